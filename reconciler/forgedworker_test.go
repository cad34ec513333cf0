package reconciler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// An event whose worker is no worker identity — a wildcard, a dot,
// thousands of characters — is terminated as malformed, never recorded.
// Recorded, it was where the machine's next task went: the delete of one
// named "w.>" could never be published (the leader tried again every
// second, for ever), and the delete of one named with 5,000 characters
// made NATS close the leader's connection for good, at every start,
// with it every in-process worker's; the worker that really held the
// machine then reported it as a copy of no record's and deleted it as an
// orphan, while its record said Running.
func TestForgedWorkerInEventIsRefused(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 1)
	m := NewMetrics(nil)
	l.opts.Metrics = m
	l.start()
	// The test's worker takes tasks on a connection of its own, so that
	// it sees what the leader publishes whatever becomes of the leader's.
	_, wjs := natstest.Connect(t, l.srv.ClientURL())
	tasks, err := wjs.Consumer(t.Context(), wire.StreamTasks, "test-worker")
	if err != nil {
		t.Fatal(err)
	}
	take := func(n int) []received {
		t.Helper()
		var out []received
		for deadline := time.Now().Add(30 * time.Second); len(out) < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d tasks within 30s, want %d (the leader's connection is connected: %v)", len(out), n, l.nc.IsConnected())
			}
			batch, err := tasks.FetchNoWait(100)
			if err != nil {
				t.Fatal(err)
			}
			for msg := range batch.Messages() {
				task, err := wire.DecodeTask(msg.Data())
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, received{task: task, msg: msg})
			}
		}
		return out
	}
	// The control plane is made first, then the worker: each is
	// answered first by a forged event, then by the worker that holds it.
	forged := []string{"w.>", strings.Repeat("w", 5000)}
	for i := range forged {
		r := take(1)[0]
		l.event(wire.Event{TaskID: r.task.ID, Attempt: r.task.Attempt, Cluster: r.task.Machine.Cluster,
			Machine: r.task.Machine.Name, Phase: wire.PhaseRunning, Worker: forged[i], Time: time.Now().UTC()})
		l.waitFor("a forged event terminated as malformed", func() (bool, string) {
			got := counter(t, m.Malformed.WithLabelValues("event"))
			var workers []string
			for _, rec := range l.records() {
				workers = append(workers, fmt.Sprintf("%s %s worker %.10q", rec.Name, rec.Phase, rec.Worker))
			}
			return got == float64(i+1), fmt.Sprintf("%v malformed events, records: %s", got, strings.Join(workers, ", "))
		})
		l.answer(r, wire.PhaseRunning)
		l.waitFor(r.task.Machine.Name+" Running", func() (bool, string) {
			rec := l.records()[r.task.Machine.Name]
			if rec == nil {
				return false, "no record"
			}
			if rec.Worker != "" {
				t.Fatalf("%s: worker %.20q recorded", rec.Name, rec.Worker)
			}
			return rec.Phase == wire.PhaseRunning, string(rec.Phase)
		})
	}
	// Both are deleted with their cluster, and the leader stays connected.
	l.repo.git("rm", "-q", "clusters/c1.yaml")
	l.repo.commit("no cluster")
	l.apply()
	for range 2 { // the worker, then the control plane
		r := take(1)[0]
		if r.task.Operation != wire.OpDelete {
			t.Fatalf("task %s, want a delete", r.task.ID)
		}
		l.answer(r, wire.PhaseDeleted)
	}
	l.waitRecords("")
	if !l.nc.IsConnected() {
		t.Errorf("the leader's connection is %v", l.nc.Status())
	}
}
