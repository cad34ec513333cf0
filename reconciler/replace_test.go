package reconciler

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestReplacementNamesWhatItReplaces: a machine the daemon removes for its
// health gets a replacement whose cause names it and why it went, not the
// pool's count, which reads as the work of whoever wrote the spec commit in
// force. With maxSurge the replacement comes in the pass that deletes the
// machine; without, once its delete has ended.
func TestReplacementNamesWhatItReplaces(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy string
	}{
		{"in the pass that deletes it", ""},
		{"once its delete ended", "\n          rollout: {strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoop(t, "local", 1, 1)
			l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 1)+tc.strategy)
			dead := l.startWithADyingWorker()
			deleted := false
			created := l.waitReplacement(dead.task.Machine.Name, func() {
				if rec := l.records()[dead.task.Machine.Name]; rec != nil && rec.Phase == wire.PhaseDeleting && !deleted {
					// Its delete ends (with maxSurge, a create may come first).
					for _, task := range l.nextTasks(1) {
						if task.task.Operation == wire.OpDelete {
							l.answer(task, wire.PhaseDeleted)
							deleted = true
						}
					}
				}
			})
			want := "replaces " + dead.task.Machine.Name + " (remediated: no heartbeat for "
			if !strings.HasPrefix(created.Cause, want) {
				t.Errorf("replacement %s: cause %q, want %q…", created.Name, created.Cause, want)
			}
		})
	}
}

// fastBeats finds each provider line of a class, to give it a spec.
var fastBeats = regexp.MustCompile(`(?m)^( *)provider: .*\n`)

// startWithADyingWorker starts l with replaceHealthCheck committed beside
// its cluster c1 (one control-plane machine, one worker), runs both, and
// lets the worker send one heartbeat: the health check remediates it a
// second after its last. It returns the worker's create.
func (l *loop) startWithADyingWorker() received {
	l.t.Helper()
	l.repo.write("clusters/c1-health.yaml", replaceHealthCheck)
	// Heartbeats every 500ms, so a second's silence is two missed.
	l.repo.write("classes/small.yaml", fastBeats.ReplaceAllString(fmt.Sprintf(loopClass, "local"), "$0${1}spec: {heartbeatInterval: 500ms}\n"))
	l.repo.commit("c1: a health check")
	l.start()
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
	dead := l.nextTasks(1)[0]
	l.answer(dead, wire.PhaseRunning)
	l.waitRecords("Running Running")
	if err := heartbeat(l.nc, dead.task.Machine, true); err != nil {
		l.t.Fatal(err)
	}
	return dead
}

// waitReplacement waits for the record of a worker other than dead, and
// returns it; meanwhile (nil: none) runs before each look.
func (l *loop) waitReplacement(dead string, meanwhile func()) *Record {
	l.t.Helper()
	var created *Record
	l.waitFor("a replacement recorded", func() (bool, string) {
		if meanwhile != nil {
			meanwhile()
		}
		var seen []string
		for _, rec := range l.records() {
			if rec.Role == wire.RoleWorker && rec.Name != dead {
				created = rec
				return true, ""
			}
			seen = append(seen, rec.Name+"="+string(rec.Phase))
		}
		return false, strings.Join(seen, " ")
	})
	return created
}

const replaceHealthCheck = `apiVersion: gitfleet.io/v1alpha1
kind: MachineHealthCheck
metadata: {name: c1-health}
spec:
  clusterName: c1
  selector:
    matchLabels: {gitfleet.io/deployment: md-0}
  checks:
    nodeStartupTimeoutSeconds: 0
    unhealthyNodeConditions: [{type: Ready, status: Unknown, timeoutSeconds: 1}]
`

// TestANewLeadersReplacementNamesWhatItReplaces: the machines removed for
// their health and not replaced yet outlive their leader. A new leader
// rebuilds them from the records of machines being deleted and from the
// deleted lists the status branch holds, so the replacement it makes
// names the machine it replaces, as the last leader's would have, rather
// than reading "md-0 has 0 of 1 machines" under the spec commit in force.
// Without maxSurge the replacement waits for the delete to end, which is
// where a failover falls between the two.
func TestANewLeadersReplacementNamesWhatItReplaces(t *testing.T) {
	const surge0 = "\n          rollout: {strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}}"
	for _, tc := range []struct {
		name string
		// gone ends the remediated machine's delete and stops the
		// leader before it makes the replacement.
		gone func(l *loop, del received)
	}{
		{"its delete ended while no daemon led", func(l *loop, del received) {
			l.stop()
			l.answer(del, wire.PhaseDeleted)
		}},
		{"its delete ended before the failover, on a paused cluster", func(l *loop, del received) {
			// Paused, the cluster gets no step: the leader writes the
			// deleted machine in the deleted list, and nothing more.
			l.repo.write("clusters/c1.yaml", strings.Replace(fmt.Sprintf(loopCluster, "c1", 1, 1)+surge0, "spec:\n", "spec:\n  paused: true\n", 1))
			l.repo.commit("c1: paused")
			l.apply()
			l.waitFor("c1 paused", func() (bool, string) {
				c := l.statusSnapshot().Cluster("c1")
				return c != nil && c.Phase == "Paused", "not yet"
			})
			l.answer(del, wire.PhaseDeleted)
			l.waitFor("the delete in c1's deleted list", func() (bool, string) {
				c := l.statusSnapshot().Cluster("c1")
				return c != nil && len(c.Deleted) == 1 && c.Deleted[0].Name == del.task.Machine.Name, "not yet"
			})
			l.stop()
			l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 1)+surge0)
			l.repo.commit("c1: resumed")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoop(t, "local", 1, 1)
			l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 1)+surge0)
			dead := l.startWithADyingWorker()
			del := l.nextTasks(1)[0]
			if del.task.Operation != wire.OpDelete || del.task.Machine.Name != dead.task.Machine.Name {
				t.Fatalf("task %s of %s, want the remediated machine's delete", del.task.Operation, del.task.Machine.Name)
			}
			tc.gone(l, del)

			l.start()
			created := l.waitReplacement(dead.task.Machine.Name, nil)
			want := "replaces " + dead.task.Machine.Name + " (remediated: no heartbeat for "
			if !strings.HasPrefix(created.Cause, want) {
				t.Errorf("the new leader's replacement %s: cause %q, want %q…", created.Name, created.Cause, want)
			}
		})
	}
}

// TestCarryRemovedLeavesOutWhatWasReplaced: a new leader's removed
// machines are the removals for health or absence that nothing names as
// replaced: those being deleted, then those of the deleted list, newest
// first (an older one may have been replaced by a machine removed since),
// without those a record's cause names, the deletes of another kind, and
// entries that do not say their pool.
func TestCarryRemovedLeavesOutWhatWasReplaced(t *testing.T) {
	rec := func(name string, phase wire.Phase, cause, reason string) *machine {
		return &machine{rec: &Record{Name: name, Phase: phase, Shape: &Shape{Cluster: "c1", Deployment: "md-0",
			Role: wire.RoleWorker, Cause: cause, Reason: reason}}}
	}
	entry := func(name, cause, reason string) status.DeletedMachine {
		return status.DeletedMachine{Name: name, Role: "worker", Deployment: "md-0", Cause: cause, Reason: reason}
	}
	r := &Reconciler{removed: map[string][]planner.Removed{}, machines: map[string]machineList{"c1": {
		rec("c1-md-0-a", wire.PhaseRunning, "replaces c1-md-0-y (remediated: no heartbeat for 40s)", ""),
		rec("c1-md-0-d", wire.PhaseDeleting, "remediate: the provider no longer runs it (NodeExited)", "NodeExited"),
		rec("c1-md-0-e", wire.PhaseDeleting, "scale down md-0 to 2 machines", ""),
	}}, deleted: map[string][]status.DeletedMachine{"c1": {
		entry("c1-md-0-z", "remediate: no heartbeat for 50s", "Remediated"),
		entry("c1-md-0-y", "remediate: no heartbeat for 40s", "Remediated"),
		entry("c1-md-0-s", "scale down md-0 to 3 machines", "ScaledDown"),
		{Name: "c1-md-0-o", Cause: "remediate: no heartbeat for 30s"}, // written before entries said their pool
		entry("c1-md-0-x", "remediate: the provider no longer runs it (MachineMissing)", "MachineMissing"),
	}}}
	r.carryRemoved()
	var got []string
	for _, rm := range r.removed["c1"] {
		got = append(got, rm.Name+" "+rm.Deployment+" "+rm.Why)
	}
	want := []string{
		"c1-md-0-d md-0 gone: NodeExited",
		"c1-md-0-z md-0 remediated: no heartbeat for 50s",
		"c1-md-0-x md-0 gone: MachineMissing",
	}
	if !slices.Equal(got, want) {
		t.Errorf("removed after the start:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
