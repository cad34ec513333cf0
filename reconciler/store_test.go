package reconciler

import (
	"errors"
	"testing"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestSaveAsyncIsCompareAndSet: a write started without waiting keeps the
// rule of Save: it names the revision it replaces, and one based on a
// stale revision (or a create of a key that exists) fails with
// ErrConflict and changes nothing.
func TestSaveAsyncIsCompareAndSet(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv.ClientURL())
	if err := natsbus.Ensure(t.Context(), js); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), wire.BucketMachines)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(kv, nil, js)
	rev1, err := s.SaveAsync("c.m", map[string]int{"v": 1}, 0).Wait(t.Context())
	if err != nil || rev1 == 0 {
		t.Fatalf("create: rev %d, %v", rev1, err)
	}
	if _, err := s.SaveAsync("c.m", map[string]int{"v": 9}, 0).Wait(t.Context()); !errors.Is(err, ErrConflict) {
		t.Errorf("second create: %v, want ErrConflict", err)
	}
	rev2, err := s.SaveAsync("c.m", map[string]int{"v": 2}, rev1).Wait(t.Context())
	if err != nil || rev2 <= rev1 {
		t.Fatalf("update: rev %d, %v", rev2, err)
	}
	if _, err := s.SaveAsync("c.m", map[string]int{"v": 9}, rev1).Wait(t.Context()); !errors.Is(err, ErrConflict) {
		t.Errorf("update on a stale revision: %v, want ErrConflict", err)
	}
	e, err := kv.Get(t.Context(), "c.m")
	if err != nil || string(e.Value()) != `{"v":2}` || e.Revision() != rev2 {
		t.Errorf("stored %s at %d (%v), want {\"v\":2} at %d", e.Value(), e.Revision(), err, rev2)
	}
}
