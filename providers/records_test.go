package providers

import (
	"fmt"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A copy of the records shared by two workers follows the bucket while
// either runs: the first to stop leaves it up to date for the other, and
// the watch ends with the last (a record written after no longer shows).
func TestSharedRecordsFollowWhileAWorkerRuns(t *testing.T) {
	r := newTestRecords(t)
	put := func(machine string) {
		t.Helper()
		data := fmt.Sprintf(`{"taskID":"create.c1.%s","attempt":1,"phase":"Pending"}`, machine)
		if _, err := r.kv.Put(t.Context(), wire.RecordKey("c1", machine), []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	has := func(machine string) bool {
		r.mu.RLock()
		defer r.mu.RUnlock()
		_, ok := r.m[wire.RecordKey("c1", machine)]
		return ok
	}
	waitFor := func(machine string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !has(machine); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("record of %s not in the copy after 10 s", machine)
			}
		}
	}
	first, second := r.use(), r.use()
	put("m1")
	waitFor("m1")
	first()
	first() // releasing twice counts once
	put("m2")
	waitFor("m2")
	second()
	put("m3")
	time.Sleep(300 * time.Millisecond)
	if has("m3") {
		t.Error("the copy still follows the bucket after its last worker stopped")
	}
}

// The copy holds only records with a task in flight: a machine that runs
// leaves it, and a task for it is still found stale, by a read of its
// record; its delete brings it back, and the delete's task is current.
func TestRecordsCopyHoldsTasksInFlight(t *testing.T) {
	r := newTestRecords(t)
	defer r.use()()
	key := wire.RecordKey("c1", "m1")
	put := func(task string, phase wire.Phase) uint64 {
		t.Helper()
		rev, err := r.kv.Put(t.Context(), key, fmt.Appendf(nil, `{"taskID":%q,"attempt":1,"phase":%q}`, task, phase))
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	waitHas := func(want bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			r.mu.RLock()
			_, ok := r.m[key]
			r.mu.RUnlock()
			if ok == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("record in the copy: %v after 10 s, want %v", ok, want)
			}
		}
	}
	task := func(op wire.Operation, rev uint64) *wire.Task {
		return &wire.Task{ID: string(op) + ".c1.m1", Attempt: 1, Revision: rev, Operation: op, Machine: wire.Machine{Cluster: "c1", Name: "m1"}}
	}
	rev := put("create.c1.m1", wire.PhasePending)
	waitHas(true)
	create := task(wire.OpCreate, rev)
	if why, err := r.staleness(t.Context(), create); why != "" || err != nil {
		t.Fatalf("a Pending machine's create: %q, %v; want current", why, err)
	}
	put("create.c1.m1", wire.PhaseRunning)
	waitHas(false)
	if why, err := r.staleness(t.Context(), create); why != "the task is done: the machine is Running" || err != nil {
		t.Fatalf("a Running machine's create: %q, %v; want stale", why, err)
	}
	rev = put("delete.c1.m1", wire.PhaseDeleting)
	waitHas(true)
	if why, err := r.staleness(t.Context(), task(wire.OpDelete, rev)); why != "" || err != nil {
		t.Fatalf("a Deleting machine's delete: %q, %v; want current", why, err)
	}
}

// newTestRecords is a shared copy of the records of a new server's bucket.
func newTestRecords(t *testing.T) *records {
	t.Helper()
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv.ClientURL())
	shared, err := NewRecords(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	return shared.r
}
