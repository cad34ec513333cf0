package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeEventRefusesUnknownPhases(t *testing.T) {
	for _, phase := range []string{"Bogus", "Pending", "running"} {
		_, err := DecodeEvent([]byte(`{"apiVersion":"gitfleet.io/wire/v1","taskID":"t","cluster":"c","machine":"m","phase":"` + phase + `"}`))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "unknown phase") {
			t.Errorf("phase %q: %v; want a malformed event naming the phase", phase, err)
		}
	}
	if _, err := DecodeEvent([]byte(`{"apiVersion":"gitfleet.io/wire/v1","taskID":"t","cluster":"c","machine":"m","phase":"Deleted"}`)); err != nil {
		t.Errorf("Deleted: %v", err)
	}
}

func TestTaskStale(t *testing.T) {
	create := Task{ID: "create.c.m", Attempt: 2, Revision: 10, Operation: OpCreate}
	del := Task{ID: "delete.c.m", Attempt: 1, Revision: 12, Operation: OpDelete}
	orphan := Task{ID: "orphan.c.m", Operation: OpDelete, Orphan: true, Worker: "w1"}
	rec := func(id string, attempt int, phase Phase, worker string) *TaskRecord {
		return &TaskRecord{TaskID: id, Attempt: attempt, Phase: phase, Worker: worker}
	}
	for _, tc := range []struct {
		name  string
		task  Task
		rec   *TaskRecord
		rev   uint64
		stale string // substring; "" for current
	}{
		{"current create", create, rec("create.c.m", 2, PhaseProvisioning, ""), 11, ""},
		{"older attempt", create, rec("create.c.m", 3, PhasePending, ""), 13, "attempt 3"},
		{"no record", create, nil, 0, "no record"},
		{"other task", create, rec("delete.c.m", 1, PhaseDeleting, ""), 13, "on task delete.c.m"},
		{"create done", create, rec("create.c.m", 2, PhaseRunning, ""), 14, "Running"},
		{"store rebuilt", create, rec("create.c.m", 2, PhasePending, ""), 3, "store was rebuilt"},
		{"current delete", del, rec("delete.c.m", 1, PhaseDeleting, "w1"), 12, ""},
		{"orphan, no record", orphan, nil, 0, ""},
		{"orphan duplicate on another worker", orphan, rec("create.c.m", 1, PhaseRunning, "w2"), 5, ""},
		{"orphan wanted here", orphan, rec("create.c.m", 1, PhaseRunning, "w1"), 5, "no orphan"},
		{"orphan of a shared provider, wanted", Task{ID: "orphan.c.m", Operation: OpDelete, Orphan: true}, rec("create.c.m", 1, PhaseRunning, ""), 5, "no orphan"},
	} {
		got := tc.task.Stale(tc.rec, tc.rev)
		if (tc.stale == "") != (got == "") || !strings.Contains(got, tc.stale) {
			t.Errorf("%s: Stale = %q; want %q", tc.name, got, tc.stale)
		}
	}
}

func TestMsgIDChangesWithTheAttempt(t *testing.T) {
	a := Task{ID: "create.c.m", Attempt: 1}
	b := a
	b.Attempt = 2
	if a.MsgID() == b.MsgID() {
		t.Fatalf("attempts 1 and 2 share message ID %s", a.MsgID())
	}
}
