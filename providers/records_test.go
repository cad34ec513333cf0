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
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv.ClientURL())
	shared, err := NewRecords(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	r := shared.r
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
