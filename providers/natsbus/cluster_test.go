package natsbus_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

func streamReplicas(t *testing.T, js jetstream.JetStream, name string) int {
	t.Helper()
	s, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.Config.Replicas
}

// TestReplicasOnACluster: on three routed servers, --nats-replicas 3 makes
// every stream and bucket R3; a daemon started without the flag keeps
// them R3 (never silently lowered); given 1, it lowers them, saying so;
// and killing the server that leads the task stream loses no task and
// leaves the stream and the machines bucket writable.
func TestReplicasOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nats-servers")
	}
	srvs := natstest.StartCluster(t, 3)
	nc, err := nats.Connect(natstest.ClusterURLs(srvs), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	names := []string{wire.StreamTasks, wire.StreamEvents, "KV_" + wire.BucketMachines, "KV_" + wire.BucketLeader, "KV_" + wire.BucketRollouts, "KV_" + wire.BucketPKI}
	check := func(want int) {
		t.Helper()
		for _, n := range names {
			if got := streamReplicas(t, js, n); got != want {
				t.Errorf("%s has %d replicas, want %d", n, got, want)
			}
		}
	}
	limits := natsbus.DefaultLimits()
	if err := limits.EnsureReplicated(ctx, js, natsbus.Replication{Replicas: 3, Set: true}); err != nil {
		t.Fatal(err)
	}
	check(3)
	if err := limits.EnsureReplicated(ctx, js, natsbus.Replication{}); err != nil { // a restart without the flag
		t.Fatal(err)
	}
	check(3)
	if err := natsbus.EnsureMissingReplicated(ctx, js, 1); err != nil { // a worker's start
		t.Fatal(err)
	}
	check(3)

	// Kill the task stream's leader: every task published stays.
	const before = 50
	for i := range before {
		if _, err := js.Publish(ctx, fmt.Sprintf("%s.inmemory.c1.m%d", wire.SubjectTasks, i), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	s, err := js.Stream(ctx, wire.StreamTasks)
	if err != nil {
		t.Fatal(err)
	}
	leader := natstest.StreamLeader(t, js, srvs, wire.StreamTasks)
	if leader == nil {
		t.Fatal("no server leads the task stream")
	}
	leader.Shutdown()
	// A new leader is elected; a publish may fail meanwhile and is retried,
	// as the daemon retries an unacknowledged task.
	published := before
	for i := range 20 {
		for {
			// Each attempt waits 2s for its acknowledgement: one sent to
			// the dead leader never gets one.
			actx, acancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := js.Publish(actx, fmt.Sprintf("%s.inmemory.c1.after%d", wire.SubjectTasks, i), []byte("{}"), jetstream.WithMsgID(fmt.Sprint("after", i)))
			acancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("publishing after the leader's death: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		published++
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(published) {
		t.Errorf("the task stream holds %d messages after its leader died, want %d", info.State.Msgs, published)
	}
	kv, err := js.KeyValue(ctx, wire.BucketMachines)
	if err != nil {
		t.Fatal(err)
	}
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := kv.Put(pctx, "c1.m0", []byte("{}"))
		pcancel()
		if err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("the machines bucket is not writable after a server died: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Given explicitly, a lower count is applied, and logged.
	var logged strings.Builder
	if err := limits.EnsureReplicated(ctx, js, natsbus.Replication{Replicas: 1, Set: true, Log: zerolog.New(&logged)}); err != nil {
		t.Fatal(err)
	}
	check(1)
	if !strings.Contains(logged.String(), `"from":3,"to":1`) {
		t.Errorf("lowering the replicas was not logged: %s", logged.String())
	}
}
