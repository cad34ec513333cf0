package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

func TestWorkerNeedsAKnownProvider(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"worker"}, "--provider is required"},
		{[]string{"worker", "--provider", "vsphere"}, `--provider "vsphere": unknown provider (want inmemory, local or docker)`},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, &cmdEnv{stdout: &out, stderr: &errb})
		if code != 1 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// The worker command runs tasks from a real NATS and stops cleanly when its
// context ends (SIGTERM in main).
func TestWorkerCommandRunsTasksAndDrains(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv.ClientURL())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"worker", "--provider", "inmemory", "--nats", srv.ClientURL(), "--concurrency", "2"},
			&cmdEnv{stdout: &bytes.Buffer{}, stderr: &errb})
	}()
	pub := natsbus.NewPublisher(js)
	task := wire.Task{ID: "t1", Operation: wire.OpCreate, Machine: wire.Machine{Name: "m", Cluster: "c", Provider: "inmemory", Version: "v1.30.0"}}
	natstest.Intend(t, js, task)
	if _, err := pub.Publish(ctx, &task); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, wire.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m, err := stream.GetLastMsgForSubject(ctx, wire.EventSubject("c")); err == nil {
			if ev, err := wire.DecodeEvent(m.Data); err == nil && ev.Phase == wire.PhaseRunning {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Running event in 20s; worker log:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("worker exit %d after cancel; log:\n%s", code, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop within 20s of cancel")
	}
	if !strings.Contains(errb.String(), "worker stopped") {
		t.Errorf("log does not say the worker stopped:\n%s", errb.String())
	}
}
