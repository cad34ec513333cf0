package natsbus_test

import (
	"context"
	"encoding/json"
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

// moved: the stream has a leader and want-1 current followers, and no
// change of its peers is under way.
func moved(info *jetstream.StreamInfo, want int) bool {
	c := info.Cluster
	if want == 1 {
		return c == nil || c.Desired == nil && len(c.Replicas) == 0
	}
	if c == nil || c.Leader == "" || c.Desired != nil || len(c.Replicas) != want-1 {
		return false
	}
	for _, p := range c.Replicas {
		if !p.Current || p.Offline {
			return false
		}
	}
	return true
}

func clusterInfo(info *jetstream.StreamInfo) string {
	if info == nil || info.Cluster == nil {
		return ""
	}
	b, _ := json.Marshal(info.Cluster)
	return string(b)
}

// TestReplicasOnACluster: on three routed servers, --nats-replicas 3 makes
// every stream and bucket R3; a daemon started without the flag keeps
// them R3 (never silently lowered); given 1, it lowers them, saying so,
// and given 3 raises them again; and killing the server that leads the
// task stream loses no task and leaves the stream and the machines bucket
// writable.
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
	start := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	// settled waits until every stream and bucket is kept by want servers,
	// each caught up, with no change of replicas still moving peers: the
	// configuration says the new count as soon as it is accepted.
	settled := func(want int) {
		t.Helper()
		for _, n := range names {
			for {
				info, err := func() (*jetstream.StreamInfo, error) {
					s, err := js.Stream(ctx, n)
					if err != nil {
						return nil, err
					}
					return s.Info(ctx)
				}()
				if err == nil && moved(info, want) {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("%s is not kept by %d servers: %v %s", n, want, err, clusterInfo(info))
				}
				time.Sleep(100 * time.Millisecond)
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
	// Given explicitly, a lower count is applied, and logged; and so is a
	// higher one. With every server up: a change of replicas moves the
	// stream one peer at a time, and with one server down it may wait for
	// it (lowering from 3 to 1 once went unanswered for two minutes here).
	set := func(from, to int) {
		t.Helper()
		var logged strings.Builder
		if err := limits.EnsureReplicated(ctx, js, natsbus.Replication{Replicas: to, Set: true, Log: zerolog.New(&logged)}); err != nil {
			t.Fatal(err)
		}
		check(to)
		if want := fmt.Sprintf(`"from":%d,"to":%d`, from, to); !strings.Contains(logged.String(), want) {
			t.Errorf("changing the replicas from %d to %d was not logged: %s", from, to, logged.String())
		}
		settled(to)
		step(fmt.Sprintf("replicas %d -> %d", from, to))
	}
	set(3, 1)
	set(1, 3)

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
	step("killed " + leader.Name())
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
	step("published after")
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

	step("put")
}
