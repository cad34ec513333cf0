package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// TestPreviewRolloutAfter: a class change that sets a worker class's
// rollout.after (here with maxUnavailable 100%) replaces every machine
// made before it, wave by wave, as a template change does: the plan lists
// each cluster and each machine it replaces, says when they go and by
// which strategy, and does not say that merging changes no machine.
// Before, plan compared templates only and said "Merging changes no
// machine." while the daemon then took every pool down at once.
func TestPreviewRolloutAfter(t *testing.T) {
	fleet := func(after *time.Time) *v1alpha1.Fleet {
		f := wavesFleet("v1.30.2")
		f.Clusters[0].Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(2) // canary-a
		if after != nil {
			f.Classes[0].Spec.Workers.MachineDeployments[0].Rollout = &v1alpha1.MachineRollout{After: after,
				Strategy: &v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.StrategyRollingUpdate,
					RollingUpdate: &v1alpha1.RollingUpdateStrategy{MaxUnavailable: v1alpha1.Percent(100)}}}
		}
		return f
	}
	base := fleet(nil)
	s := newSim(t, base)
	s.quiet = true
	s.run(50)
	after := s.now.Add(time.Hour)
	head := fleet(&after)

	for name, observed := range map[string][]ObservedMachine{"observed": s.observed(), "assumed": nil} {
		r := Preview(base, head, nil, observed)
		text, md := renderTextAndMarkdown(t, r)
		if r.Totals.Changed != 5 || r.Totals.Replaced != 6 {
			t.Errorf("%s: totals %+v, want 5 clusters changed, 6 workers replaced", name, r.Totals)
		}
		for _, out := range []string{text, md} {
			if strings.Contains(out, "changes no machine") {
				t.Errorf("%s: plan says merging changes no machine:\n%s", name, out)
			}
			for _, want := range []string{
				"md: 2 machines, 2 replaced (made before rollout.after " + after.UTC().Format(time.RFC3339) + ", they go once it has passed); new strategy maxSurge 1, maxUnavailable 2: every machine of the pool may be down at once",
				"rolls out wave canary (canary-a), then wave staging (stage-a, stage-b; maxConcurrent 1: 1 cluster at a time), then wave production (prod-a, prod-b; maxConcurrent 50%: 1 cluster at a time)",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("%s: plan lacks %q:\n%s", name, want, out)
				}
			}
		}
		if name == "observed" {
			for _, c := range r.Clusters {
				if len(c.Machines) != c.Replaced || c.Replaced == 0 {
					t.Errorf("%s: machines %v, want the %d workers it replaces named", c.Name, c.Machines, c.Replaced)
				}
			}
		}
	}

	// A rollout.after moved earlier, before every machine was made,
	// replaces none of them; one left as it is replaces nothing the
	// change does (what it replaces is its own doing, not this change's).
	earlier := simStart.Add(-time.Hour)
	for name, c := range map[string][2]*v1alpha1.Fleet{
		"moved earlier": {fleet(&after), fleet(&earlier)},
		"unchanged":     {fleet(&after), fleet(&after)},
	} {
		if r := Preview(c[0], c[1], nil, s.observed()); r.Totals.Replaced != 0 {
			t.Errorf("%s: %+v, want nothing replaced", name, r.Totals)
		}
	}
}
