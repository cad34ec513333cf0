package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// TestTopologyRolloutKeepsClassAfter: a cluster topology that sets only
// rollout.strategy for its pool keeps the worker class's rollout.after,
// as Cluster API v1beta2 resolves a topology's fields one by one: once
// the time has passed, its workers made before it are replaced (by the
// topology's strategy), as those of a cluster that sets no rollout are,
// and gitfleet plan lists them. Before, the topology's rollout replaced
// the class's whole: the class's rollout.after never reached the pool,
// and plan said the change replaced none of its machines.
func TestTopologyRolloutKeepsClassAfter(t *testing.T) {
	fleet := func(after *time.Time) *v1alpha1.Fleet {
		class := testClass("v1.30.2")
		if after != nil {
			class.Spec.Workers.MachineDeployments[0].Rollout = &v1alpha1.MachineRollout{After: after}
		}
		return testFleet(class, testCluster("own-strategy", 1, 2, rolling(0, 1)), testCluster("no-rollout", 1, 2))
	}
	base := fleet(nil)
	s := newSim(t, base)
	s.quiet = true
	s.run(50)
	after := s.now.Add(time.Minute)
	head := fleet(&after)

	r := Preview(base, head, nil, s.observed())
	text, md := renderTextAndMarkdown(t, r)
	if r.Totals.Changed != 2 || r.Totals.Replaced != 4 {
		t.Errorf("plan totals %+v, want 2 clusters changed, 4 workers replaced", r.Totals)
	}
	for _, out := range []string{text, md} {
		if want := "md: 2 machines, 2 replaced (made before rollout.after " + after.UTC().Format(time.RFC3339); strings.Count(out, want) != 2 {
			t.Errorf("plan does not say %q for both clusters:\n%s", want, out)
		}
	}

	s.setFleet(head)
	s.check = checkInvariants(t) // the topology's strategy (maxSurge 0) still applies
	s.minRound = s.round + 12    // past rollout.after
	s.run(60)
	for _, m := range s.observed() {
		if m.Deployment != "" && m.Created.Before(after) {
			t.Errorf("%s: worker %s made %s, before the class's rollout.after %s, was not replaced",
				m.Cluster, m.Name, m.Created.Format(time.RFC3339), after.Format(time.RFC3339))
		}
	}
	for _, dc := range s.desired.Clusters {
		if p := dc.Deployments[0]; !p.RolloutAfter.Equal(after) {
			t.Errorf("%s: pool's rollout.after %v, want the class's %v", dc.Name, p.RolloutAfter, after)
		}
	}
}

// TestTopologyDeletionKeepsClassOrder: a topology's deletion: {} writes
// no order, so the worker class's order applies: a scale-down from 4 to 2
// with the class's Newest keeps the two oldest workers. Before, the
// topology's empty deletion replaced the class's, and the default
// (Oldest) took the two oldest.
func TestTopologyDeletionKeepsClassOrder(t *testing.T) {
	fleet := func(workers int) *v1alpha1.Fleet {
		class := testClass("v1.30.2")
		class.Spec.Workers.MachineDeployments[0].Deletion = &v1alpha1.MachineDeletion{Order: v1alpha1.DeleteNewest}
		return testFleet(class, testCluster("c1", 1, workers, func(c *v1alpha1.Cluster) {
			c.Spec.Topology.Workers.MachineDeployments[0].Deletion = &v1alpha1.MachineDeletion{}
		}))
	}
	s := newSim(t, fleet(2))
	s.quiet = true
	s.run(50)
	grown := s.now
	s.setFleet(fleet(4))
	s.run(50)
	s.setFleet(fleet(2))
	s.run(50)
	for _, m := range s.observed() {
		if m.Deployment != "" && !m.Created.Before(grown) {
			t.Errorf("worker %s, made by the scale-up, was kept by the scale-down: the class's deletion.order Newest takes it first", m.Name)
		}
	}
}
