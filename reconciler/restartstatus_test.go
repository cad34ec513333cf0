package reconciler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
	"github.com/gitfleet/gitfleet/sources"
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
	l.firstPassCommitted()
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

// firstPassCommitted waits for a new leader's first pass (counted in
// l.opts.Metrics, which the test gave it anew) and commits what it set.
func (l *loop) firstPassCommitted() {
	l.t.Helper()
	l.waitFor("the restart's first pass", func() (bool, string) {
		n := planCount(l.t, l.opts.Metrics)
		return n > 0, fmt.Sprint(n, " passes")
	})
	ctx, cancel := context.WithTimeout(l.t.Context(), 10*time.Second)
	defer cancel()
	if err := l.writer.Flush(ctx); err != nil {
		l.t.Fatal(err)
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
func planCount(t testing.TB, m *Metrics) uint64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	m.PlanDuration.Collect(ch)
	var d dto.Metric
	if err := (<-ch).Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetHistogram().GetSampleCount()
}

// TestARestartKeepsTheRefusal: a new leader started while main's head is a
// refused commit applies the last good revision first and refuses the head
// after it, as the source delivers them (sources.WatchOptions.LastGood).
// Nothing resolved the refusal, so every status commit the new leader
// makes shows it in fleet.yaml's lastRejected: before, its first pass was
// committed without it (when the pass outlasted --status-interval, as
// at 10,000 clusters; here a flush stands for that interval), and
// fleet.yaml, describe and the dashboard showed the refusal gone and back.
func TestARestartKeepsTheRefusal(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 1)
	l.start()
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
	worker := l.nextTasks(1)[0] // answered after the restart: a change to commit then
	l.waitRecords("Pending Running")
	ref, err := l.g.Reference("refs/heads/main", true)
	if err != nil {
		t.Fatal(err)
	}
	good := ref.Hash().String()
	l.repo.write("clusters/c1.yaml", strings.Replace(fmt.Sprintf(loopCluster, "c1", 1, 1), "replicas: 1", "replicas: many", 1))
	l.repo.commit("c1: many control planes")
	bad, err := l.src.Revision(t.Context(), "main")
	if err != nil {
		t.Fatal(err)
	}
	if !bad.Rejected() {
		t.Fatal("the bad commit validates")
	}
	l.revs <- bad
	refused := func(f status.FleetStatus) string {
		if f.LastRejected == nil {
			return "no lastRejected"
		}
		return "lastRejected " + short(f.LastRejected.Commit)
	}
	want := "lastRejected " + short(bad.Commit)
	l.waitFor("the refusal in fleet.yaml", func() (bool, string) {
		got := refused(l.statusSnapshot().Fleet)
		return got == want, got
	})
	l.stop()
	before, err := status.ResolveBranch(l.g, "gitfleet/status")
	if err != nil {
		t.Fatal(err)
	}

	// The restart, as the daemon's source delivers it: the revision in
	// force, then the refused head once the first pass is done.
	l.opts.Metrics = NewMetrics(prometheus.NewRegistry())
	l.run()
	last, err := l.src.Revision(t.Context(), good)
	if err != nil || last.Rejected() {
		t.Fatalf("the last good revision: %v", err)
	}
	l.revs <- last
	l.firstPassCommitted()
	l.revs <- bad
	l.answer(worker, wire.PhaseRunning)
	l.waitRecords("Running Running")
	l.waitFor("the worker Running in c1's status", func() (bool, string) {
		c := l.statusSnapshot().Cluster("c1")
		if c == nil {
			return false, "no file"
		}
		got := ""
		for _, m := range c.Machines {
			got += m.Phase + " "
		}
		return got == "Running Running ", got
	})
	l.stop()

	commits, err := status.Log(l.g, "gitfleet/status")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range commits {
		if c.Hash == before.String() {
			break
		}
		n++
		snap, err := status.ReadAt(l.g.Storer, plumbing.NewHash(c.Hash))
		if err != nil {
			t.Fatal(err)
		}
		if got := refused(snap.Fleet); got != want {
			t.Errorf("status commit %s (%s) after the restart: fleet.yaml has %s, want %s", short(c.Hash), c.Subject, got, want)
		}
		if a := snap.Fleet.LastApplied; a == nil || a.Commit != good {
			t.Errorf("status commit %s (%s) after the restart: lastApplied %v, want %s", short(c.Hash), c.Subject, a, short(good))
		}
	}
	if n == 0 {
		t.Fatal("no status commit after the restart")
	}
}

// TestAResetOverARefusedHeadClearsTheRefusal: when the branch is reset
// over a refused head to the revision in force, the source delivers that
// revision again, marked Returned, and fleet.yaml stops showing the
// refusal, though no new commit was applied.
func TestAResetOverARefusedHeadClearsTheRefusal(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	l.start()
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
	l.waitRecords("Running")
	revision := func() *sources.Revision {
		t.Helper()
		rev, err := l.src.Revision(t.Context(), "main")
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	good := revision()
	l.repo.write("clusters/c1.yaml", "apiVersion: gitfleet.io/v1alpha1\nkind: Cluster\nmetadata: {name: c1}\nspec: {topology: {classRef: {name: nope}}}\n")
	l.repo.commit("c1: a class that does not exist")
	bad := revision()
	if !bad.Rejected() {
		t.Fatal("the broken commit was not rejected")
	}
	l.revs <- bad
	refusal := func() string {
		f := l.statusSnapshot().Fleet
		out := "lastRejected none"
		if f.LastRejected != nil {
			out = "lastRejected " + f.LastRejected.Commit
		}
		if f.LastApplied != nil {
			out += ", lastApplied " + f.LastApplied.Commit
		}
		return out
	}
	want := "lastRejected " + bad.Commit + ", lastApplied " + good.Commit
	l.waitFor("the refusal in fleet.yaml", func() (bool, string) { s := refusal(); return s == want, s })

	l.repo.git("reset", "-q", "--hard", good.Commit)
	back := *revision()
	back.Returned = true
	l.revs <- &back
	want = "lastRejected none, lastApplied " + good.Commit
	l.waitFor("the refusal gone from fleet.yaml", func() (bool, string) { s := refusal(); return s == want, s })
	l.noMoreTasks(200 * time.Millisecond)
}

// TestARefusedCommitThatComesBackIsRefusedAgain: a commit refused, then
// resolved by a newer good one, then made the branch's head again (a
// reset, a force-push of the old branch) is refused again, and says so in
// fleet.yaml. Before, the daemon remembered it as reported and passed
// over it in silence: fleet.yaml showed no refusal while the head it
// named was not applied.
func TestARefusedCommitThatComesBackIsRefusedAgain(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	l.start()
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
	l.waitRecords("Running")
	revision := func() *sources.Revision {
		t.Helper()
		rev, err := l.src.Revision(t.Context(), "main")
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	refusal := func() string {
		f := l.statusSnapshot().Fleet
		out := "lastRejected none"
		if f.LastRejected != nil {
			out = "lastRejected " + f.LastRejected.Commit
		}
		if f.LastApplied != nil {
			out += ", lastApplied " + f.LastApplied.Commit
		}
		return out
	}
	good := revision()
	l.repo.write("clusters/c1.yaml", "apiVersion: gitfleet.io/v1alpha1\nkind: Cluster\nmetadata: {name: c1}\nspec: {topology: {classRef: {name: nope}}}\n")
	l.repo.commit("c1: a class that does not exist")
	bad := revision()
	if !bad.Rejected() {
		t.Fatal("the broken commit was not rejected")
	}
	l.revs <- bad
	want := "lastRejected " + bad.Commit + ", lastApplied " + good.Commit
	l.waitFor("the refusal in fleet.yaml", func() (bool, string) { s := refusal(); return s == want, s })

	l.repo.git("reset", "-q", "--hard", good.Commit)
	l.repo.write("README.md", "a fleet\n")
	l.repo.commit("a good commit after the refused one")
	fixed := revision()
	l.revs <- fixed
	want = "lastRejected none, lastApplied " + fixed.Commit
	l.waitFor("the good commit applied, the refusal resolved", func() (bool, string) { s := refusal(); return s == want, s })

	l.repo.git("reset", "-q", "--hard", bad.Commit)
	l.revs <- revision()
	want = "lastRejected " + bad.Commit + ", lastApplied " + fixed.Commit
	l.waitFor("the refused commit refused again", func() (bool, string) { s := refusal(); return s == want, s })
}

// TestARestartKeepsLastApplied: fleet.yaml names the commit the machines
// run from the first revision a daemon applies on, also in what a new
// leader writes before it applies one (here a condition, while its source
// has handed it nothing yet: a slow or unreachable repository). Before,
// that fleet.yaml was committed without lastApplied: describe and the
// dashboard showed nothing applied, `gitfleet plan` compared a change with
// an empty fleet, and a start after it had no last good revision. Before
// any revision was ever applied, lastApplied is absent.
func TestARestartKeepsLastApplied(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	ref, err := l.g.Reference("refs/heads/main", true)
	if err != nil {
		t.Fatal(err)
	}
	head := ref.Hash().String()
	applied := func() string {
		f := l.statusSnapshot().Fleet
		if f.LastApplied == nil {
			return "no lastApplied"
		}
		return "lastApplied " + short(f.LastApplied.Commit)
	}
	// A condition on fleet.yaml before the revision comes: the wait for it.
	waitProblem := func(what string) {
		t.Helper()
		l.health.Report(ProblemPublish, fmt.Errorf("nats: no responders available for request"))
		l.waitFor("the Reconciling condition in fleet.yaml "+what, func() (bool, string) {
			for _, c := range l.statusSnapshot().Fleet.Conditions {
				if c.Type == status.ConditionReconciling {
					return true, ""
				}
			}
			return false, "no Reconciling condition"
		})
	}

	l.run()
	waitProblem("at the first start")
	if got := applied(); got != "no lastApplied" {
		t.Errorf("before any revision was ever applied: %s, want none", got)
	}
	l.health.Report(ProblemPublish, nil)
	l.apply()
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
	l.waitRecords("Running")
	want := "lastApplied " + short(head)
	l.waitFor("the applied commit in fleet.yaml", func() (bool, string) {
		got := applied()
		return got == want, got
	})
	l.stop()

	l.run() // no revision yet
	waitProblem("after the restart")
	if got := applied(); got != want {
		t.Errorf("fleet.yaml written after a restart, before the revision is applied again: %s, want %s", got, want)
	}
	got, err := status.LastApplied(l.g, "refs/heads/gitfleet/status")
	if err != nil || got != head {
		t.Errorf("the last good revision a next start reads: %q, %v; want %s", got, err, short(head))
	}
	l.health.Report(ProblemPublish, nil)
}

// rejectedCount is gitfleet_revisions_rejected_total in m.
func rejectedCount(t testing.TB, m *Metrics) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.RevisionsRejected.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

// TestARestartCountsNoRefusalAgain: gitfleet_revisions_rejected_total
// counts each refused commit once, whatever the leaders. A new leader on a
// refused head (the source hands it the head again after the revision in
// force) carries the refusal from fleet.yaml and counts nothing: in the
// same process (a lease lost and regained, the metrics kept) the counter
// stays where it was, and in a new process it stays at zero, so
// increase() over the restart, as the Grafana board's "rejected" reads
// it, is no refusal. Before, every new leader counted the same commit
// again. A commit refused after the restart is counted.
func TestARestartCountsNoRefusalAgain(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	metrics := NewMetrics(prometheus.NewRegistry())
	l.opts.Metrics = metrics
	l.start()
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
	l.waitRecords("Running")
	good, err := l.src.Revision(t.Context(), "main")
	if err != nil {
		t.Fatal(err)
	}
	refuse := func(msg string) *sources.Revision {
		t.Helper()
		l.repo.write("clusters/c1.yaml", strings.Replace(fmt.Sprintf(loopCluster, "c1", 1, 0), "replicas: 1", "replicas: many", 1))
		l.repo.write("README", msg+"\n")
		l.repo.commit(msg)
		bad, err := l.src.Revision(t.Context(), "main")
		if err != nil || !bad.Rejected() {
			t.Fatalf("%s: %v; want a refused revision", msg, err)
		}
		return bad
	}
	refused := func() string {
		if f := l.statusSnapshot().Fleet; f.LastRejected != nil {
			return "lastRejected " + short(f.LastRejected.Commit)
		}
		return "no lastRejected"
	}
	bad := refuse("c1: many control planes")
	l.revs <- bad
	l.waitFor("the refusal in fleet.yaml", func() (bool, string) {
		got := refused()
		return got == "lastRejected "+short(bad.Commit), got
	})
	if n := rejectedCount(t, metrics); n != 1 {
		t.Fatalf("rejected %v before the restart, want 1", n)
	}
	l.stop()

	// handled waits until the loop took every revision sent: a condition
	// set after them shows in fleet.yaml.
	handled := func() {
		t.Helper()
		l.health.Report(ProblemPublish, fmt.Errorf("nats: no responders available for request"))
		l.waitFor("the revisions handled", func() (bool, string) {
			for _, c := range l.statusSnapshot().Fleet.Conditions {
				if c.Type == status.ConditionReconciling {
					return true, ""
				}
			}
			return false, "no Reconciling condition"
		})
		l.health.Report(ProblemPublish, nil)
		l.waitFor("the condition cleared", func() (bool, string) {
			return len(l.statusSnapshot().Fleet.Conditions) == 0, "a condition"
		})
	}
	for _, tc := range []struct {
		name    string
		metrics *Metrics
		want    float64
	}{
		{"a new leader in the same process", metrics, 1},
		{"a new process", NewMetrics(prometheus.NewRegistry()), 0},
	} {
		// As the daemon's source hands them over: the revision in force
		// (LastGood), then the refused head.
		l.opts.Metrics = tc.metrics
		l.run()
		l.revs <- good
		l.revs <- bad
		handled()
		if n := rejectedCount(t, tc.metrics); n != tc.want {
			t.Errorf("%s: rejected %v after the restart on the same refused head, want %v", tc.name, n, tc.want)
		}
		if got := refused(); got != "lastRejected "+short(bad.Commit) {
			t.Errorf("%s: fleet.yaml has %s after the restart, want lastRejected %s", tc.name, got, short(bad.Commit))
		}
		l.stop()
	}

	// A commit refused after the restart is a new refusal.
	l.run()
	l.revs <- good
	l.revs <- bad
	worse := refuse("c1: many control planes, again")
	l.revs <- worse
	l.waitFor("the new refusal in fleet.yaml", func() (bool, string) {
		got := refused()
		return got == "lastRejected "+short(worse.Commit), got
	})
	if n := rejectedCount(t, l.opts.Metrics); n != 1 {
		t.Errorf("rejected %v after a new commit was refused in a new process, want 1", n)
	}
}

// appliedCount is gitfleet_revisions_applied_total in m.
func appliedCount(t testing.TB, m *Metrics) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.RevisionsApplied.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

// TestARestartCountsNoApplyAgain: gitfleet_revisions_applied_total
// counts each revision once, whatever the leaders. A new leader applies
// the revision fleet.yaml shows applied first (the source's LastGood):
// in the same process (a lease lost and regained, the metrics kept) that
// adds nothing, and in a new process it stays at zero, so increase() over
// a restart is the commits applied since. Before, every new leader counted
// the revision in force again. A commit applied after the restart is
// counted.
func TestARestartCountsNoApplyAgain(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	metrics := NewMetrics(prometheus.NewRegistry())
	l.opts.Metrics = metrics
	l.start()
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
	l.waitRecords("Running")
	inForce, err := l.src.Revision(t.Context(), "main")
	if err != nil {
		t.Fatal(err)
	}
	applied := func() string {
		if f := l.statusSnapshot().Fleet; f.LastApplied != nil {
			return "lastApplied " + short(f.LastApplied.Commit)
		}
		return "no lastApplied"
	}
	l.waitFor("the first revision in fleet.yaml", func() (bool, string) {
		got := applied()
		return got == "lastApplied "+short(inForce.Commit), got
	})
	if n := appliedCount(t, metrics); n != 1 {
		t.Fatalf("applied %v before the restart, want 1", n)
	}
	l.stop()

	for _, tc := range []struct {
		name    string
		metrics *Metrics
		want    float64
	}{
		{"a new leader in the same process", metrics, 2},
		{"a new process", NewMetrics(prometheus.NewRegistry()), 1},
	} {
		// As the daemon's source hands them over: the revision in force
		// (LastGood), then a new commit, applied in that order.
		l.opts.Metrics = tc.metrics
		l.run()
		l.revs <- inForce
		l.repo.write("README", tc.name+"\n")
		l.repo.commit(tc.name)
		next, err := l.src.Revision(t.Context(), "main")
		if err != nil || next.Rejected() {
			t.Fatalf("%s: %v; want a good revision", tc.name, err)
		}
		l.revs <- next
		l.waitFor("the new commit in fleet.yaml", func() (bool, string) {
			got := applied()
			return got == "lastApplied "+short(next.Commit), got
		})
		if n := appliedCount(t, tc.metrics); n != tc.want {
			t.Errorf("%s: applied %v after the restart and one new commit, want %v (the revision in force counted again?)", tc.name, n, tc.want)
		}
		l.stop()
		inForce = next
	}
}
