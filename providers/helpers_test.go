package providers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

type env struct {
	srv *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	pub *natsbus.Publisher
}

func newEnv(tb testing.TB) *env {
	srv := natstest.Start(tb)
	nc, js := natstest.Connect(tb, srv.ClientURL())
	return &env{srv: srv, nc: nc, js: js, pub: natsbus.NewPublisher(js)}
}

func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

// inmemory is an inmemory provider on the env's server.
func (e *env) inmemory(tb testing.TB, opts inmemory.Options) *inmemory.Provider {
	tb.Helper()
	p, err := inmemory.New(testCtx(tb), e.js, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// startWorker runs a worker on its own connection until cleanup.
func (e *env) startWorker(tb testing.TB, p providers.Provider, opts providers.WorkerOptions) *providers.Worker {
	tb.Helper()
	_, js := natstest.Connect(tb, e.srv.ClientURL())
	w, err := providers.NewWorker(testCtx(tb), js, p, opts)
	if err != nil {
		tb.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()
	tb.Cleanup(func() {
		w.Close()
		if err := <-errc; err != nil {
			tb.Errorf("worker Run: %v", err)
		}
	})
	return w
}

var taskSeq atomic.Int64

func task(op wire.Operation, provider, cluster, name, spec string) wire.Task {
	t := wire.Task{
		ID:        fmt.Sprintf("t-%d-%s-%s-%s", taskSeq.Add(1), op, cluster, name),
		Operation: op,
		Machine: wire.Machine{Name: name, Cluster: cluster, Role: wire.RoleWorker, Version: "v1.30.2",
			Provider: provider},
	}
	if spec != "" {
		t.Machine.Spec = json.RawMessage(spec)
	}
	return t
}

func (e *env) publish(tb testing.TB, tasks ...wire.Task) {
	tb.Helper()
	ctx := testCtx(tb)
	natstest.Intend(tb, e.js, tasks...)
	for i := range tasks {
		if _, err := e.pub.Publish(ctx, &tasks[i]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := e.pub.Wait(ctx); err != nil {
		tb.Fatal(err)
	}
}

// events streams every event stored in GITFLEET_EVENTS, from the start.
func (e *env) events(tb testing.TB) <-chan wire.Event {
	tb.Helper()
	cons, err := e.js.OrderedConsumer(testCtx(tb), wire.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	ch := make(chan wire.Event, 1<<16)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev, err := wire.DecodeEvent(m.Data())
		if err != nil {
			tb.Errorf("event on %s: %v", m.Subject(), err)
			return
		}
		ch <- ev
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cc.Stop)
	return ch
}

// waitPhases reads events until it has seen each machine reach phase;
// it returns every event read, per machine, in order.
func waitPhases(tb testing.TB, ch <-chan wire.Event, phase wire.Phase, machines ...string) map[string][]wire.Event {
	tb.Helper()
	want := map[string]bool{}
	for _, m := range machines {
		want[m] = true
	}
	seen := map[string][]wire.Event{}
	timeout := time.After(30 * time.Second)
	for len(want) > 0 {
		select {
		case ev := <-ch:
			k := ev.Cluster + "/" + ev.Machine
			seen[k] = append(seen[k], ev)
			if ev.Phase == phase {
				delete(want, k)
			}
		case <-timeout:
			tb.Fatalf("no %s event for %v after 30s; saw %v", phase, keys(want), seen)
		}
	}
	return seen
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func phases(evs []wire.Event) []wire.Phase {
	out := make([]wire.Phase, len(evs))
	for i, ev := range evs {
		out[i] = ev.Phase
	}
	return out
}

// eventually polls cond until it holds or 30s pass.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("after 30s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// taskCount is how many tasks wait in GITFLEET_TASKS.
func (e *env) taskCount(tb testing.TB) uint64 {
	tb.Helper()
	s, err := e.js.Stream(testCtx(tb), wire.StreamTasks)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(testCtx(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Msgs
}

// count is how many machines the inmemory cloud holds.
func count(tb testing.TB, p *inmemory.Provider) int {
	tb.Helper()
	n, err := p.Len(testCtx(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
