package reconciler

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// leader records which replica leads, as lead callbacks see it.
type leader struct {
	t       *testing.T
	mu      sync.Mutex
	current string
	terms   []string
}

func (l *leader) run(id string) func(ctx context.Context) {
	return func(ctx context.Context) {
		l.mu.Lock()
		if l.current != "" {
			l.t.Errorf("two leaders at once: %s and %s", l.current, id)
		}
		l.current = id
		l.terms = append(l.terms, id)
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		l.current = ""
		l.mu.Unlock()
	}
}

func (l *leader) get() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.current
}

func waitLeader(t *testing.T, l *leader, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if l.get() == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("leader is %q, want %q after %s", l.get(), want, within)
}

func leaderBucket(t *testing.T, url string, ttl time.Duration) jetstream.KeyValue {
	t.Helper()
	_, js := natstest.Connect(t, url)
	kv, err := js.CreateOrUpdateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: wire.BucketLeader + "-test", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// One replica leads at a time; a replica that stops hands over at once, one
// that dies (its connection gone, no release) hands over once its lease
// expires.
func TestLeaseHandover(t *testing.T) {
	srv := natstest.Start(t)
	const ttl = 1500 * time.Millisecond
	l := leader{t: t}
	log := testLog(t, "lease")

	ctxA, stopA := context.WithCancel(t.Context())
	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		_ = NewLease(leaderBucket(t, srv.ClientURL(), ttl), "a", ttl, log).Run(ctxA, l.run("a"))
	}()
	waitLeader(t, &l, "a", 5*time.Second)

	// b waits while a renews, well past one TTL.
	connB, jsB := natstest.Connect(t, srv.ClientURL())
	kvB, err := jsB.KeyValue(t.Context(), wire.BucketLeader+"-test")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = NewLease(kvB, "b", ttl, log).Run(t.Context(), l.run("b")) }()
	time.Sleep(2 * ttl)
	if got := l.get(); got != "a" {
		t.Fatalf("leader changed to %q while a was renewing", got)
	}

	// a stops gracefully: it releases the lease, and b takes over well
	// within one TTL.
	stopA()
	<-doneA
	if e, err := kvB.Get(t.Context(), leaderKey); err == nil && string(e.Value()) == "a" {
		t.Fatal("a stopped without releasing its lease")
	}
	waitLeader(t, &l, "b", ttl)

	// c joins, then b dies without releasing: c takes over after the TTL.
	_, jsC := natstest.Connect(t, srv.ClientURL())
	kvC, err := jsC.KeyValue(t.Context(), wire.BucketLeader+"-test")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = NewLease(kvC, "c", ttl, log).Run(t.Context(), l.run("c")) }()
	connB.Close() // b's renewals fail: it steps down without releasing
	waitLeader(t, &l, "c", 4*ttl)
}

// stalledRenewal stops the daemon (stop) while this replica's first
// renewal is on its way, and holds the renewal until its context ends.
// landed says whether the server took it all the same (only its answer
// was lost).
type stalledRenewal struct {
	jetstream.KeyValue
	t      *testing.T
	landed bool
	stop   context.CancelFunc
	once   sync.Once
}

func (s *stalledRenewal) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	first := false
	s.once.Do(func() { first = true })
	if !first {
		return s.KeyValue.Update(ctx, key, value, rev)
	}
	s.stop()
	<-ctx.Done()
	if s.landed {
		if _, err := s.KeyValue.Update(context.Background(), key, value, rev); err != nil {
			s.t.Errorf("the renewal that lands: %v", err)
		}
	}
	return 0, ctx.Err()
}

// A replica stopped while a renewal is on its way still releases the lease,
// whether or not that renewal reached the server, so a follower need not
// wait out the TTL (a CI run failed on this: the stop met a renewal).
func TestLeaseReleasedWhenStoppedMidRenewal(t *testing.T) {
	srv := natstest.Start(t)
	const ttl = 30 * time.Second // only a release frees the key in time
	for _, landed := range []bool{false, true} {
		kv := leaderBucket(t, srv.ClientURL(), ttl)
		ctx, stop := context.WithCancel(t.Context())
		stalled := &stalledRenewal{KeyValue: kv, t: t, landed: landed, stop: stop}
		l := leader{t: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			// The lease renews every 200 ms (its TTL's third); the bucket
			// keeps the key for 30 s.
			_ = NewLease(stalled, "a", 600*time.Millisecond, zerolog.Nop()).Run(ctx, l.run("a"))
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the lease did not stop within 30 s (its first renewal stops it)")
		}
		if len(l.terms) != 1 {
			t.Fatalf("landed=%v: terms %v, want one of a", landed, l.terms)
		}
		e, err := kv.Get(t.Context(), leaderKey)
		if err == nil {
			t.Errorf("landed=%v: stopped mid-renewal, the lease is still held by %q", landed, e.Value())
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatal(err)
		}
		if err := kv.Purge(t.Context(), leaderKey); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLeaseSurvivesANATSNode: two replicas share the leader bucket at
// three replicas on three routed servers; the server that leads the
// bucket's stream is killed. A replica leads again (the same one, or the
// other once the lease expires) within the lease's TTL, its renewals go
// through, and there are never two leaders.
func TestLeaseSurvivesANATSNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nats-servers and waits out a lease TTL")
	}
	srvs, url, js := replicatedCluster(t)
	l := leader{t: t}
	log := testLog(t, "lease")
	leases := map[string]*Lease{}
	for _, id := range []string{"a", "b"} {
		_, js := natstest.Connect(t, url)
		kv, err := js.KeyValue(t.Context(), wire.BucketLeader)
		if err != nil {
			t.Fatal(err)
		}
		lease := NewLease(kv, id, natsbus.LeaderTTL, log)
		leases[id] = lease
		go func() { _ = lease.Run(t.Context(), l.run(id)) }()
	}
	deadline := time.Now().Add(natsbus.LeaderTTL)
	for l.get() == "" {
		if time.Now().After(deadline) {
			t.Fatal("no replica was elected")
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := l.get()

	dead := natstest.StreamLeader(t, js, srvs, "KV_"+wire.BucketLeader)
	if dead == nil {
		t.Fatal("no server leads the leader bucket")
	}
	dead.Shutdown()
	killed := time.Now()
	// Leading means holding a lease renewed since the kill: wait until a
	// replica's fence has been renewed after it.
	var after string
	for after == "" {
		if time.Since(killed) > natsbus.LeaderTTL {
			t.Fatalf("no replica held a renewed lease within the TTL (%s) of the NATS server's death; %s led before", natsbus.LeaderTTL, before)
		}
		time.Sleep(50 * time.Millisecond)
		id := l.get()
		if id == "" || leases[id].Fence() != nil {
			continue
		}
		leases[id].mu.Lock()
		renewed := leases[id].until.Add(-(natsbus.LeaderTTL - natsbus.LeaderTTL/5))
		leases[id].mu.Unlock()
		if renewed.After(killed) {
			after = id
		}
	}
	t.Logf("%s led before the kill, %s leads %s after it", before, after, time.Since(killed).Round(time.Millisecond))
	l.mu.Lock()
	terms := l.terms
	l.mu.Unlock()
	t.Logf("terms: %v", terms)
}
