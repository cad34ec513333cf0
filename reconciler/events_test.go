package reconciler

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A burst of events, several about one machine and a malformed one among
// them, waiting for a new leader: all are applied in their order, each
// machine ends where its last event leaves it, and none is handed back
// for redelivery (records of one burst are written together, and a second
// event about a machine waits for the first one's write rather than
// conflicting with it). Then the deletes of two machines the same way.
func TestABurstOfEventsIsAppliedInOrder(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 2)
	l.start()
	cp := l.nextTasks(1)[0]
	l.answer(cp, wire.PhaseRunning)
	tasks := l.nextTasks(2) // the workers, once the control plane runs
	l.waitRecords("Pending Pending Running")
	l.stop()
	for _, task := range tasks {
		l.answer(task, wire.PhaseProvisioning)
	}
	if _, err := l.js.Publish(t.Context(), wire.EventSubject("c1", "w1"), []byte("{")); err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		l.answer(task, wire.PhaseRunning)
	}
	l.start()
	recs := l.waitRecords("Running Running Running")
	l.noMoreTasks(300 * time.Millisecond)
	for _, r := range recs {
		if id := r.providerID(); id != "test://c1/"+r.Name || r.Running.IsZero() {
			t.Errorf("%s: provider ID %q, running since %v; want both from its Running event", r.Name, id, r.Running)
		}
	}

	// The workers go: their delete tasks are answered while no leader runs.
	l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 0))
	l.repo.commit("no workers")
	l.apply()
	deletes := l.nextTasks(2)
	l.waitRecords("Deleting Deleting Running")
	l.stop()
	for _, task := range deletes {
		l.answer(task, wire.PhaseDeleting)
		l.answer(task, wire.PhaseDeleted)
	}
	l.start()
	l.waitRecords("Running")
	l.noMoreTasks(300 * time.Millisecond)

	cons, err := l.js.Consumer(t.Context(), wire.StreamEvents, "gitfleet-reconciler")
	if err != nil {
		t.Fatal(err)
	}
	// An event is acknowledged once its record is written, without
	// waiting for the server: on a loaded machine the last acks can reach
	// it after the records are seen, so wait for them (well within the
	// consumer's ack wait, past which they would be redelivered).
	var info *jetstream.ConsumerInfo
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if info, err = cons.Info(t.Context()); err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending == 0 || time.Now().After(deadline) {
			break
		}
	}
	// Every delivery is one more consumer sequence; a redelivery moves it
	// past the stream's.
	if info.Delivered.Consumer != info.Delivered.Stream || info.NumAckPending != 0 {
		t.Errorf("events consumer: %d deliveries of %d events, %d waiting for an ack; want every event delivered and settled once",
			info.Delivered.Consumer, info.Delivered.Stream, info.NumAckPending)
	}
}

// Workers published each machine's events on a subject of its own
// (gitfleet.events.<cluster>.<machine>) before a cluster's events shared
// one; a daemon upgraded before its workers, as docs/operations.md says
// to, still applies events published there.
func TestEventsOnAMachinesOwnSubjectAreApplied(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	l.start()
	task := l.nextTasks(1)[0]
	ev := wire.Event{TaskID: task.task.ID, Attempt: task.task.Attempt, Cluster: "c1", Machine: task.task.Machine.Name,
		Phase: wire.PhaseRunning, ProviderID: "test://old-worker", Version: task.task.Machine.Version, Time: time.Now().UTC()}
	data, err := wire.Encode(&ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.js.Publish(t.Context(), wire.SubjectEvents+".c1."+ev.Machine, data); err != nil {
		t.Fatal(err)
	}
	_ = task.msg.Ack()
	for _, r := range l.waitRecords("Running") {
		if id := r.providerID(); id != "test://old-worker" {
			t.Errorf("%s: provider ID %q, want the event's", r.Name, id)
		}
	}
}
