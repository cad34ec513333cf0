package reconciler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"

	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestDeletedEntriesSayWhyInAWord: each entry of a cluster's deleted list
// carries a reason, whatever removed the machine: the planner's word for
// a scale-down or a remediation, the provider's for a machine that was
// gone. Before, a machine's reason was cleared with each phase its task
// moved it to, and only a machine found gone by the inventory had one:
// the list said `reason:` for none of the machines a user removed or a
// health check replaced.
func TestDeletedEntriesSayWhyInAWord(t *testing.T) {
	entry := func(c *status.ClusterStatus, name string) *status.DeletedMachine {
		if c == nil {
			return nil
		}
		for i := range c.Deleted {
			if c.Deleted[i].Name == name {
				return &c.Deleted[i]
			}
		}
		return nil
	}
	check := func(t *testing.T, d *status.DeletedMachine, cause, reason string) {
		t.Helper()
		if !strings.HasPrefix(d.Cause, cause) || d.Reason != reason {
			t.Errorf("deleted entry of %s: cause %q, reason %q; want cause %q…, reason %q", d.Name, d.Cause, d.Reason, cause, reason)
		}
	}

	t.Run("scaled down", func(t *testing.T) {
		l := newLoop(t, "inmemory", 1, 1)
		l.start()
		l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
		worker := l.nextTasks(1)[0]
		l.answer(worker, wire.PhaseRunning)
		l.waitRecords("Running Running")
		l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 0))
		l.repo.commit("no workers")
		l.apply()
		l.answer(l.nextTasks(1)[0], wire.PhaseDeleted)
		var d *status.DeletedMachine
		l.waitFor("the delete in c1's status", func() (bool, string) {
			d = entry(l.statusSnapshot().Cluster("c1"), worker.task.Machine.Name)
			return d != nil, "not listed"
		})
		check(t, d, "scale down md-0 to 0 machines", "ScaledDown")
	})

	t.Run("remediated", func(t *testing.T) {
		l := newLoop(t, "local", 1, 1)
		// Remediated a second after its one heartbeat (its replacement
		// is created in the same pass).
		dead := l.startWithADyingWorker()
		for deleted := false; !deleted; {
			for _, task := range l.nextTasks(1) {
				if task.task.Operation == wire.OpDelete && task.task.Machine.Name == dead.task.Machine.Name {
					l.answer(task, wire.PhaseDeleted)
					deleted = true
				}
			}
		}
		var d *status.DeletedMachine
		l.waitFor("the remediated machine in c1's deleted list", func() (bool, string) {
			d = entry(l.statusSnapshot().Cluster("c1"), dead.task.Machine.Name)
			return d != nil, "not listed"
		})
		check(t, d, "remediate: no heartbeat for ", "Remediated")
	})

	t.Run("gone", func(t *testing.T) {
		f := newCloudFleet(t)
		g, err := git.PlainOpen(f.repo.dir)
		if err != nil {
			t.Fatal(err)
		}
		w := newStatusWriter(t, g)
		stop, _ := runLeader(t, f.js, f.repo.dir, func(o *Options) { o.Status = w })
		f.wait("three Running machines", f.converged)
		lost := f.loseWorker()
		f.wait("the lost machine replaced", func() bool { return f.converged() && f.records()[lost] == nil })
		stop()
		closeStatusWriter(t, w)
		snap, err := status.Read(g, "gitfleet/status")
		if err != nil {
			t.Fatal(err)
		}
		_, name, _ := strings.Cut(lost, ".")
		d := entry(snap.Cluster("c1"), name)
		if d == nil {
			t.Fatalf("%s is not in c1's deleted list", name)
		}
		check(t, d, "remediate: the provider no longer runs it (MachineMissing)", ReasonMachineMissing)
	})
}
