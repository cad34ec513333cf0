package reconciler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

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
	log := zerolog.Nop()

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

	// a stops gracefully: b takes over well within one TTL.
	stopA()
	<-doneA
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
