package providers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
			got[inv.Part] = true
			if inv.Parts > 0 { // the last part says how many; the others, 0
				want = inv.Parts
			}
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

// walking is a provider of n machines that hands them over one at a time
// (providers.Walker); it counts, as it hands over each, the parts the
// leader had taken by then.
type walking struct {
	n       int
	taken   *atomic.Int32 // parts the test's leader answered
	mu      sync.Mutex
	takenAt []int32     // taken, as each machine was handed over
	listed  atomic.Bool // List was called
}

func (*walking) Name() string { return "walking" }
func (*walking) Create(context.Context, wire.Machine) (providers.Instance, error) {
	return providers.Instance{}, providers.Permanent(errors.New("walking makes no machine"))
}
func (*walking) Delete(context.Context, wire.Machine) error { return nil }
func (w *walking) List(context.Context) ([]providers.Instance, error) {
	w.listed.Store(true)
	return nil, errors.New("walking lists by Walk")
}
func (w *walking) Walk(_ context.Context, f func(providers.Instance) error) error {
	for i := range w.n {
		w.mu.Lock()
		w.takenAt = append(w.takenAt, w.taken.Load())
		w.mu.Unlock()
		if err := f(providers.Instance{Cluster: "c", Name: fmt.Sprintf("c-m-%05d", i)}); err != nil {
			return err
		}
	}
	return nil
}

// A worker whose provider walks its machines sends each part of its
// report once the part is full, before the provider hands over the rest:
// a worker reporting 130,000 machines holds a part of them, not a copy of
// all (it held ~65 MiB a report at that size).
func TestInventoryIsSentAsItIsListed(t *testing.T) {
	e := newEnv(t)
	var taken atomic.Int32
	parts := make(chan wire.Inventory, 8)
	sub, err := e.nc.Subscribe(wire.InventorySubject("walking", "w-walk"), func(m *nats.Msg) {
		inv, err := wire.DecodeInventory(m.Data)
		if err != nil {
			t.Error(err)
			return
		}
		taken.Add(1)
		parts <- inv
		_ = m.Respond(nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	p := &walking{n: 2500, taken: &taken}
	e.startWorker(t, p, providers.WorkerOptions{ID: "w-walk", InventoryInterval: time.Hour})
	machines := 0
	for last := false; !last; {
		select {
		case inv := <-parts:
			machines += len(inv.Instances)
			last = inv.Parts > 0
			if last && inv.Parts != 3 {
				t.Errorf("the last part says %d parts, want 3", inv.Parts)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("after 30 s, %d machines reported of %d", machines, p.n)
		}
	}
	if machines != p.n {
		t.Errorf("%d machines reported, want %d", machines, p.n)
	}
	if p.listed.Load() {
		t.Error("the worker called List; a Walker's machines are walked")
	}
	// Machine 1,001 does not fit in the first part, which goes (and is
	// taken) before it is added: the first part was taken before the
	// provider handed over machine 1,002, the second before machine 2,002.
	p.mu.Lock()
	defer p.mu.Unlock()
	if got := []int32{p.takenAt[1000], p.takenAt[1001], p.takenAt[2001]}; fmt.Sprint(got) != "[0 1 2]" {
		t.Errorf("parts taken as machines 1,001, 1,002 and 2,002 were handed over: %v, want [0 1 2]", got)
	}
}
