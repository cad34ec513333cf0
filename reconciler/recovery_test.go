package reconciler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A save that fails (the machines bucket refuses writes) changes nothing:
// no task is published for a machine that is not recorded, fleet.yaml says
// the loop is failing, and once the store is back the machine is recorded
// and its task published — once.
func TestSaveFailureChangesNothingAndIsRetried(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	repair := l.breakStore()
	defer repair()
	l.start()
	l.waitFor("Store problem reported", func() (bool, string) {
		ps := l.health.Problems()
		return len(ps) == 1 && ps[0].Kind == ProblemStore, fmt.Sprint(ps)
	})
	l.noMoreTasks(300 * time.Millisecond)
	if recs := l.records(); len(recs) != 0 {
		t.Fatalf("records while the store refuses writes: %v", recs)
	}
	l.waitFor("Reconciling False in fleet.yaml", func() (bool, string) {
		f := l.statusSnapshot().Fleet
		for _, c := range f.Conditions {
			if c.Type == status.ConditionReconciling && c.Status == status.ConditionFalse && c.Reason == "StoreFailing" &&
				strings.Contains(c.Message, "maximum") && !c.LastTransitionTime.IsZero() {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", f.Conditions)
	})

	repair()
	tasks := l.nextTasks(1)
	recs := l.waitRecords("Pending")
	for _, r := range recs {
		if tasks[0].task.Machine.Name != r.Name || tasks[0].task.Attempt != 1 {
			t.Fatalf("task %+v for record %s", tasks[0].task, r.Name)
		}
	}
	l.noMoreTasks(300 * time.Millisecond)
	l.waitFor("condition cleared", func() (bool, string) {
		f := l.statusSnapshot().Fleet
		return len(f.Conditions) == 0 && len(l.health.Problems()) == 0, fmt.Sprintf("%+v", f.Conditions)
	})
}

// An event whose record cannot be saved is not acknowledged: memory stays
// as it was, the event is redelivered and applied once the store is back.
func TestEventSaveFailureIsRedelivered(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	l.start()
	task := l.nextTasks(1)[0]
	l.waitRecords("Pending")
	repair := l.breakStore()
	l.answer(task, wire.PhaseRunning)
	l.waitFor("Store problem reported", func() (bool, string) {
		return len(l.health.Problems()) > 0, "no problem"
	})
	if recs := l.records(); phases(recs) != "Pending" {
		t.Fatalf("records while the store refuses writes: %s", phases(recs))
	}
	repair()
	recs := l.waitRecords("Running")
	for _, r := range recs {
		if id := r.providerID(); id != "test://"+r.Cluster+"/"+r.Name {
			t.Errorf("provider ID %q after the redelivered event", id)
		}
	}
	// Memory agrees with the store: the machine is not planned again.
	l.noMoreTasks(300 * time.Millisecond)
}

// A task with no answer past the task timeout is published again as its
// next attempt under a new message ID, so JetStream does not drop it as a
// duplicate; the record names the attempt.
func TestRetryAfterTaskTimeoutIsANewMessage(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	l.opts.TaskTimeout = 300 * time.Millisecond
	l.start()
	first := l.nextTasks(1)[0]
	_ = first.msg.Ack() // taken and lost: no event ever comes
	second := l.nextTasks(1)[0]
	if second.task.ID != first.task.ID || second.task.Attempt != first.task.Attempt+1 {
		t.Fatalf("retry is %s attempt %d; want %s attempt %d", second.task.ID, second.task.Attempt, first.task.ID, first.task.Attempt+1)
	}
	if second.msgID == first.msgID || second.msgID != second.task.MsgID() {
		t.Fatalf("message IDs %q then %q; want a new one per attempt", first.msgID, second.msgID)
	}
	if second.task.Revision <= first.task.Revision {
		t.Fatalf("revision %d then %d; the retry is decided on a newer record", first.task.Revision, second.task.Revision)
	}
	recs := l.records()
	for _, r := range recs {
		if r.Attempt < 2 {
			t.Fatalf("record attempt %d after a retry", r.Attempt)
		}
	}
	l.answer(second, wire.PhaseRunning)
	l.waitRecords("Running")
}

// A leader that starts finds a record in flight whose task was never
// published (the last leader died between saving the attempt and
// publishing it) and publishes it.
func TestResumePublishesTasksInFlight(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	l.start()
	first := l.nextTasks(1)[0]
	_ = first.msg.Ack()
	l.stop()
	// What the last leader saved before it died: attempt 2, unpublished.
	var rec *Record
	for _, r := range l.records() {
		rec = r
	}
	rec.Attempt++
	l.putRecord(rec)
	l.start()
	got := l.nextTasks(1)[0]
	if got.task.Machine.Name != rec.Name || got.task.Attempt != int(rec.Attempt) {
		t.Fatalf("resumed %s attempt %d; want %s attempt %d", got.task.Machine.Name, got.task.Attempt, rec.Name, rec.Attempt)
	}
	l.answer(got, wire.PhaseRunning)
	l.waitRecords("Running")
	l.noMoreTasks(300 * time.Millisecond)
}

// Events are redelivered until they are applied: an event published while
// no leader runs is applied by the next one.
func TestEventsWhileNoLeaderAreApplied(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	l.start()
	task := l.nextTasks(1)[0]
	l.waitRecords("Pending")
	l.stop()
	l.answer(task, wire.PhaseRunning)
	l.start()
	l.waitRecords("Running")
	l.noMoreTasks(300 * time.Millisecond)
}

// Events are checked against the record: an unknown phase is malformed, an
// event without a task, about a task the machine never had, on another
// machine's or cluster's subject, or with a phase its task cannot produce (a forged
// Deleted for a running machine) is refused and counted; none is applied.
func TestForgedEventsAreRefused(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	l.opts.Metrics = NewMetrics(nil)
	l.start()
	task := l.nextTasks(1)[0]
	l.answer(task, wire.PhaseRunning)
	recs := l.waitRecords("Running")
	var rec *Record
	for _, r := range recs {
		rec = r
	}
	base := wire.Event{TaskID: rec.TaskID, Cluster: "c1", Machine: rec.Name, Time: time.Now().UTC()}
	with := func(f func(*wire.Event)) wire.Event { e := base; f(&e); return e }
	// An unknown phase never decodes.
	bogus := `{"apiVersion":"gitfleet.io/wire/v1","taskID":"` + rec.TaskID + `","cluster":"c1","machine":"` + rec.Name + `","phase":"Bogus"}`
	if _, err := l.js.Publish(t.Context(), wire.EventSubject("c1", "w1"), []byte(bogus)); err != nil {
		t.Fatal(err)
	}
	l.event(with(func(e *wire.Event) { e.TaskID, e.Phase = "", wire.PhaseFailed }))
	l.event(with(func(e *wire.Event) { e.TaskID, e.Phase = "delete.c1.other", wire.PhaseDeleted }))
	l.event(with(func(e *wire.Event) { e.Phase = wire.PhaseDeleted }))
	// On another machine's subject (as workers published them before
	// subjects were a cluster's), or another cluster's, naming this
	// machine in its body; or in worker w1's name on another worker
	// credential's subject (which NATS lets only that credential publish
	// on).
	foreign := with(func(e *wire.Event) { e.Phase = wire.PhaseFailed })
	data, _ := wire.Encode(&foreign)
	for _, subject := range []string{wire.SubjectEvents + ".c1.someone-else", wire.EventSubject("c2", "w1")} {
		if _, err := l.js.Publish(t.Context(), subject, data); err != nil {
			t.Fatal(err)
		}
	}
	impostor := with(func(e *wire.Event) { e.Phase, e.Worker = wire.PhaseFailed, "w1_pod-a" })
	data, _ = wire.Encode(&impostor)
	if _, err := l.js.Publish(t.Context(), wire.EventSubject("c1", "w2"), data); err != nil {
		t.Fatal(err)
	}
	m := l.opts.Metrics
	l.waitFor("refusals counted", func() (bool, string) {
		got := fmt.Sprintf("malformed %v no-task %v task %v phase %v subject %v",
			counter(t, m.Malformed.WithLabelValues("event")),
			counter(t, m.Refused.WithLabelValues("event", refusedNoTask)),
			counter(t, m.Refused.WithLabelValues("event", refusedTask)),
			counter(t, m.Refused.WithLabelValues("event", refusedPhase)),
			counter(t, m.Refused.WithLabelValues("event", refusedSubject)))
		return got == "malformed 1 no-task 1 task 1 phase 1 subject 3", got
	})
	after := l.records()[rec.Name]
	if after == nil || after.Phase != wire.PhaseRunning || after.Message != "" {
		t.Fatalf("record after forged events: %+v", after)
	}
	l.noMoreTasks(300 * time.Millisecond)
}
