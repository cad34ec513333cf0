package providers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/providertest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A worker whose machines carry large annotations (1 KiB each, within what
// a task may carry) still reports every one of them: a report is cut into
// parts that each fit in a NATS message, not into parts of a fixed count.
// Cut by count alone, 1,000 such machines made a 1.4 MB part, which NATS
// refused, so the report never went out.
func TestInventoryOfLargeMachinesFitsInMessages(t *testing.T) {
	e := newEnv(t)
	p := e.inmemory(t, inmemory.Options{})
	const n = 1200
	note := strings.Repeat("n", 1024)
	for i := range n {
		m := providertest.Machine(p, fmt.Sprintf("c-%d", i/100), fmt.Sprintf("m-%04d", i))
		m.Annotations = map[string]string{"note": note + fmt.Sprint(i)}
		if _, err := p.Create(testCtx(t), m); err != nil {
			t.Fatal(err)
		}
	}
	parts := make(chan *nats.Msg, 64)
	sub, err := e.nc.ChanSubscribe(wire.InventorySubject(inmemory.Name, "w-big"), parts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	e.startWorker(t, p, providers.WorkerOptions{ID: "w-big", InventoryInterval: time.Hour})
	listed := map[string]bool{}
	got := map[int]bool{}
	timeout := time.After(30 * time.Second)
	for want := -1; want < 0 || len(got) < want; {
		select {
		case m := <-parts:
			// A leader takes a part, then answers: until then the worker
			// sends no other.
			select {
			case early := <-parts:
				t.Fatalf("a part sent before the one before it was answered: %d bytes", len(early.Data))
			case <-time.After(20 * time.Millisecond):
			}
			if err := m.Respond(nil); err != nil {
				t.Fatal(err)
			}
			if len(m.Data) > int(e.nc.MaxPayload()) {
				t.Fatalf("a part of %d bytes, more than NATS's %d", len(m.Data), e.nc.MaxPayload())
			}
			inv, err := wire.DecodeInventory(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			want, got[inv.Part] = inv.Parts, true
			for _, in := range inv.Instances {
				if !strings.HasPrefix(in.Annotations["note"], note) {
					t.Fatalf("%s: annotation cut", in.Machine)
				}
				listed[in.Machine] = true
			}
		case <-timeout:
			t.Fatalf("after 30 s: %d parts of the report, %d machines listed; want all %d", len(got), len(listed), n)
		}
	}
	if len(listed) != n {
		t.Fatalf("the report lists %d machines, want %d", len(listed), n)
	}
}
