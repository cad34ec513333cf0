package reconciler

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// lockedBuffer is a log a test reads while the loop writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Count(b.buf.Bytes(), []byte("\n"))
}

// A flood of malformed and refused messages — events and inventories,
// which a worker's credentials publish, and join reviews, which a node's
// do — is counted whole and logged a line a kind every 10 s, as refused
// heartbeats are. Before, each was a warning of its own: 2,000 events
// sent in a moment logged 2,000 lines (50,000 a second against a running
// daemon), a disk filled from another host.
func TestFloodOfBadMessagesIsLoggedSparingly(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv.ClientURL())
	if err := natsbus.Ensure(t.Context(), js); err != nil {
		t.Fatal(err)
	}
	keys, _ := pki.NewKeyring([]byte(strings.Repeat("j", pki.KeySize)))
	store, _, err := pki.OpenStore(t.Context(), js, keys)
	if err != nil {
		t.Fatal(err)
	}
	var log lockedBuffer
	m := NewMetrics(nil)
	r, err := New(Options{JS: js, Log: zerolog.New(&log).Level(zerolog.WarnLevel), Metrics: m,
		Bootstrap: bootstrap.NewIssuer(store, keys, time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })

	const n = 1000
	for i := range n {
		// Malformed, and refused: published on another cluster's subject.
		for _, body := range []string{fmt.Sprintf("not json %d", i),
			fmt.Sprintf(`{"apiVersion":%q,"taskID":"t","cluster":"d","machine":"m%d","phase":"Running"}`, wire.APIVersion, i)} {
			if _, err := js.PublishAsync(wire.EventSubject("c", "w1"), []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("events not stored")
	}
	// Plain NATS: sent until the loop counts them.
	malformed := func(kind string) float64 { return counter(t, m.Malformed.WithLabelValues(kind)) }
	refused := func(kind, reason string) float64 { return counter(t, m.Refused.WithLabelValues(kind, reason)) }
	for deadline := time.Now().Add(30 * time.Second); malformed("inventory") < n || malformed("join") < n; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v malformed inventories and %v malformed join reviews counted, want %d each", malformed("inventory"), malformed("join"), n)
		}
		for range n / 10 {
			_ = nc.Publish(wire.InventorySubject("inmemory", "w1"), []byte("not json"))
			_ = nc.PublishRequest(wire.JoinSubject("c", "cp"), nats.NewInbox(), []byte("not json"))
		}
	}
	// A review about a machine the leader never made is refused.
	review := fmt.Sprintf(`{"apiVersion":%q,"cluster":"c","node":"m","tokenID":"a","secretHash":"b"}`, wire.APIVersion)
	if _, err := nc.Request(wire.JoinSubject("c", "cp"), []byte(review), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); malformed("event") < n || refused("event", refusedSubject) < n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v malformed and %v refused events counted, want %d each", malformed("event"), refused("event", refusedSubject), n)
		}
	}
	// One line for each kind (event, inventory, join); a fourth should
	// the flood straddle a ten-second mark.
	if got := log.lines(); got > 6 {
		t.Errorf("%d lines logged for %d bad messages, want a few", got, 4*n)
	}
	// Refused reviews, logged as sparingly, are counted.
	if got := refused("join", "review"); got < n+1 {
		t.Errorf("%v join reviews counted refused, want %d or more", got, n+1)
	}
}
