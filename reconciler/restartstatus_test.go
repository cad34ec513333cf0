package reconciler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestRestartCarriesTheDeletedList: a new leader goes on with the deleted
// list the cluster's file holds. Its first pass leaves the file as it is
// (the status is made from what the file was made from), and a removal
// after the restart is added in front of the earlier ones, not in their
// place. A cluster that left the fleet stays gone.
func TestRestartCarriesTheDeletedList(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 1)
	l.start()
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
	l.waitRecords("Running Running")
	scale := func(workers int, msg string) {
		t.Helper()
		l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, workers))
		l.repo.commit(msg)
		l.apply()
	}
	deletedList := func() string {
		c := l.statusSnapshot().Cluster("c1")
		if c == nil {
			return "no file"
		}
		out := ""
		for _, d := range c.Deleted {
			out += d.Name + " "
		}
		return out
	}
	scale(0, "no workers")
	first := l.nextTasks(1)[0]
	l.answer(first, wire.PhaseDeleted)
	l.waitRecords("Running")
	want := first.task.Machine.Name + " "
	l.waitFor("the delete in c1's status", func() (bool, string) { d := deletedList(); return d == want, d })
	l.stop()
	before := l.statusFile("c1")

	l.opts.Metrics = NewMetrics(prometheus.NewRegistry())
	l.start()
	l.waitFor("the restart's first pass", func() (bool, string) {
		n := planCount(t, l.opts.Metrics)
		return n > 0, fmt.Sprint(n, " passes")
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := l.writer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if after := l.statusFile("c1"); after != before {
		t.Errorf("the restart's first pass rewrote c1's file:\n%s\nwant it as it was:\n%s", after, before)
	}

	scale(1, "a worker again")
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
	l.waitRecords("Running Running")
	scale(0, "no workers again")
	second := l.nextTasks(1)[0]
	l.answer(second, wire.PhaseDeleted)
	want = second.task.Machine.Name + " " + first.task.Machine.Name + " "
	l.waitFor("both deletes in c1's status, newest first", func() (bool, string) { d := deletedList(); return d == want, d })

	// c1 leaves the fleet: its file goes, and the next leader, which
	// carries on the lists the branch holds, does not bring it back.
	l.repo.git("rm", "-q", "clusters/c1.yaml")
	l.repo.commit("c1 goes")
	l.apply()
	l.answer(l.nextTasks(1)[0], wire.PhaseDeleted)
	l.waitFor("c1's file removed", func() (bool, string) { d := deletedList(); return d == "no file", d })
	l.stop()
	l.start()
	time.Sleep(500 * time.Millisecond)
	l.stop()
	if d := deletedList(); d != "no file" {
		t.Errorf("after a restart, the file of a cluster that left the fleet is back: deleted %s", d)
	}
}

// statusFile is a cluster's file on the status branch as it is written.
func (l *loop) statusFile(name string) string {
	l.t.Helper()
	c, err := status.ReadCluster(l.g, "gitfleet/status", name)
	if err != nil {
		l.t.Fatal(err)
	}
	data, err := status.EncodeCluster(*c)
	if err != nil {
		l.t.Fatal(err)
	}
	return string(data)
}

// planCount is how many plans m timed.
func planCount(t *testing.T, m *Metrics) uint64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	m.PlanDuration.Collect(ch)
	var d dto.Metric
	if err := (<-ch).Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetHistogram().GetSampleCount()
}
