package planner

import (
	"testing"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestReplacementNamesWhatItReplaces: a worker that is gone is deleted with
// why it went and replaced in the same plan by a create naming it; a
// control-plane machine removed in an earlier plan (ClusterInput.Removed)
// is named by the create that makes up for it, and without it the create
// keeps the pool's count.
func TestReplacementNamesWhatItReplaces(t *testing.T) {
	s := newSim(t, testFleet(testClass("v1.30.2"), testCluster("c1", 1, 1)))
	s.quiet = true
	s.run(50)
	var cp, worker string
	for _, m := range s.observed() {
		if m.Deployment == "" {
			cp = m.Name
		} else {
			worker = m.Name
		}
	}
	planWith := func(removed []Removed, edit func(*ObservedMachine) bool) []Step {
		var ms []ObservedMachine
		for _, m := range s.observed() {
			if edit(&m) {
				ms = append(ms, m)
			}
		}
		return PlanCluster(ClusterInput{Name: "c1", Desired: s.desired.Cluster("c1"), Machines: ms,
			Record: s.records.Cluster("c1"), Now: s.now, NewName: s.newName, Removed: removed}).Steps
	}

	steps := planWith(nil, func(m *ObservedMachine) bool {
		if m.Name == worker {
			m.Phase, m.Reason = wire.PhaseFailed, "NodeExited"
		}
		return true
	})
	if len(steps) != 2 || steps[0].Op != wire.OpDelete || steps[0].Removal != "gone: NodeExited" ||
		steps[1].Op != wire.OpCreate || steps[1].Replaces != worker || steps[1].Reason != "replaces "+worker+" (gone: NodeExited)" {
		t.Errorf("gone worker: steps %+v", steps)
	}

	noCP := func(m *ObservedMachine) bool { return m.Name != cp }
	removed := []Removed{{Name: "c1-md-0-old", Deployment: "md-0", Why: "gone: NodeExited"},
		{Name: cp, Why: "remediated: no heartbeat for 40s"}}
	steps = planWith(removed, noCP)
	if len(steps) != 1 || steps[0].Replaces != cp || steps[0].Reason != "replaces "+cp+" (remediated: no heartbeat for 40s)" {
		t.Errorf("control plane removed earlier: steps %+v", steps)
	}
	steps = planWith(nil, noCP)
	if len(steps) != 1 || steps[0].Replaces != "" || steps[0].Reason != "control plane has 0 of 1 machines" {
		t.Errorf("control plane missing, none removed: steps %+v", steps)
	}
}

// TestARemovedMachineAPoolNoLongerLacksIsSettled: a worker removed for its
// health whose pool was made smaller before it was replaced is settled
// (ClusterResult.Settled): nothing replaces it, and the caller forgets it,
// so that a later scale-up of the pool is not named its replacement. One
// the pool still lacks is not settled.
func TestARemovedMachineAPoolNoLongerLacksIsSettled(t *testing.T) {
	s := newSim(t, testFleet(testClass("v1.30.2"), testCluster("c1", 1, 1)))
	s.quiet = true
	s.run(50)
	removed := []Removed{{Name: "c1-md-old", Deployment: "md", Why: "gone: NodeExited"}}
	plan := func(ms []ObservedMachine) ClusterResult {
		return PlanCluster(ClusterInput{Name: "c1", Desired: s.desired.Cluster("c1"), Machines: ms,
			Record: s.records.Cluster("c1"), Now: s.now, NewName: s.newName, Removed: removed})
	}
	// md wants 1 and has 1: the removed machine is moot.
	res := plan(s.observed())
	if len(res.Settled) != 1 || res.Settled[0] != "c1-md-old" {
		t.Errorf("pool at its size: settled %q, want the removed machine", res.Settled)
	}
	for _, st := range res.Steps {
		if st.Replaces != "" {
			t.Errorf("pool at its size: step %+v names a replacement", st)
		}
	}
	// md lacks its machine: the removed one is replaced, not settled.
	var cpOnly []ObservedMachine
	for _, m := range s.observed() {
		if m.Deployment == "" {
			cpOnly = append(cpOnly, m)
		}
	}
	res = plan(cpOnly)
	if len(res.Settled) != 0 || len(res.Steps) != 1 || res.Steps[0].Replaces != "c1-md-old" {
		t.Errorf("pool short of one: settled %q, steps %+v; want the removed machine replaced", res.Settled, res.Steps)
	}
}

// TestARemovedMachineOfAPoolGoneIsSettled: a worker removed for its health
// whose pool was then taken out of the cluster is settled too: nothing
// will replace it, and kept, it would name the first create of a pool of
// that name added back later.
func TestARemovedMachineOfAPoolGoneIsSettled(t *testing.T) {
	s := newSim(t, testFleet(testClass("v1.30.2"), testCluster("c1", 1, 1)))
	s.quiet = true
	s.run(50)
	res := PlanCluster(ClusterInput{Name: "c1", Desired: s.desired.Cluster("c1"), Machines: s.observed(),
		Record: s.records.Cluster("c1"), Now: s.now, NewName: s.newName,
		Removed: []Removed{{Name: "c1-md-old-1", Deployment: "md-old", Why: "gone: NodeExited"}}})
	if len(res.Settled) != 1 || res.Settled[0] != "c1-md-old-1" {
		t.Errorf("pool md-old no longer in the cluster: settled %q, want its removed machine", res.Settled)
	}
}

// TestDeleteReasonNamesEveryDelete: each kind of delete the planner plans
// has its word, which the daemon writes as the reason of the machine's
// entry in its cluster's deleted list. The simulator checks every delete
// it carries out; these are the kinds its scenarios may not reach.
func TestDeleteReasonNamesEveryDelete(t *testing.T) {
	s := newSim(t, testFleet(testClass("v1.30.2"), testCluster("c1", 1, 1)))
	s.quiet = true
	s.run(50)
	deleteOf := func(edit func(*ObservedMachine)) Step {
		t.Helper()
		var ms []ObservedMachine
		for _, m := range s.observed() {
			edit(&m)
			ms = append(ms, m)
		}
		for _, st := range PlanCluster(ClusterInput{Name: "c1", Desired: s.desired.Cluster("c1"), Machines: ms,
			Record: s.records.Cluster("c1"), Now: s.now, NewName: s.newName}).Steps {
			if st.Op == wire.OpDelete {
				return st
			}
		}
		t.Fatal("no delete planned")
		return Step{}
	}
	for _, tc := range []struct {
		name string
		edit func(*ObservedMachine)
		want string
	}{
		{"a pool no longer in the cluster", func(m *ObservedMachine) {
			if m.Deployment != "" {
				m.Deployment = "md-gone"
			}
		}, DeletedDeploymentRemoved},
		{"a control-plane machine gone", func(m *ObservedMachine) {
			if m.Deployment == "" {
				m.Phase, m.Reason = wire.PhaseFailed, "NodeExited"
			}
		}, DeletedRemediated},
		{"a worker gone", func(m *ObservedMachine) {
			if m.Deployment != "" {
				m.Phase, m.Reason = wire.PhaseFailed, "NodeExited"
			}
		}, DeletedRemediated},
	} {
		st := deleteOf(tc.edit)
		if got := DeleteReason(st.Reason); got != tc.want {
			t.Errorf("%s: DeleteReason(%q) = %q, want %q", tc.name, st.Reason, got, tc.want)
		}
		if got := RemovalOf(st.Reason, "NodeExited"); got != st.Removal {
			t.Errorf("%s: RemovalOf(%q) = %q, want the step's Removal %q", tc.name, st.Reason, got, st.Removal)
		}
	}
	if got := DeleteReason("md-0 has 2 of 3 machines"); got != "" {
		t.Errorf("a create's reason: DeleteReason = %q, want none", got)
	}
}
