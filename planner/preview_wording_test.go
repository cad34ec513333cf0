package planner

import (
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestPreviewClassRulesReachTheirWave: a class change of rules alone (a
// worker class's health check gains nodeStartupTimeoutSeconds, its
// deletion order, its minReadySeconds) moves no machine, but each
// cluster's admission records the rules, so they reach the clusters wave
// by wave. The plan says which clusters get them, in which wave. Before,
// it read "Merging changes no machine." and each cluster "no machine
// template, version, replica count or rollout.after it uses changes",
// with no word of the waves.
func TestPreviewClassRulesReachTheirWave(t *testing.T) {
	for _, tc := range []struct {
		name, rule string
		change     func(c *v1alpha1.MachineDeploymentClass)
	}{
		{"healthCheck", "health checks", func(c *v1alpha1.MachineDeploymentClass) {
			c.HealthCheck = &v1alpha1.HealthRules{Checks: v1alpha1.HealthChecks{NodeStartupTimeoutSeconds: ptr(300)}}
		}},
		{"deletionOrder", "md deletion.order", func(c *v1alpha1.MachineDeploymentClass) {
			c.Deletion = &v1alpha1.MachineDeletion{Order: v1alpha1.DeleteNewest}
		}},
		{"minReadySeconds", "md minReadySeconds", func(c *v1alpha1.MachineDeploymentClass) { c.MinReadySeconds = ptr(30) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, head := wavesFleet("v1.30.2"), wavesFleet("v1.30.2")
			tc.change(&head.Classes[0].Spec.Workers.MachineDeployments[0])
			r := Preview(base, head, nil, nil)
			text, md := renderTextAndMarkdown(t, r)
			if r.HasChanges() || r.Totals != (PreviewTotals{}) {
				t.Errorf("totals %+v: want no machine changed", r.Totals)
			}
			for _, out := range []string{text, md} {
				for _, want := range []string{
					"class standard's new rules (" + tc.rule + ") reach it in wave 2/3 staging",
					"No machine changes: 5 clusters unchanged, 5 of them getting new rules of their class in their wave.",
					"No machine changes. Class standard rolls out wave canary (new rules only: canary-a), then wave staging (new rules only: stage-a, stage-b; maxConcurrent 1: 1 cluster at a time), then wave production (new rules only: prod-a, prod-b; maxConcurrent 50%: 1 cluster at a time)",
				} {
					if !strings.Contains(out, want) {
						t.Errorf("plan lacks %q:\n%s", want, out)
					}
				}
				if strings.Contains(out, "Merging changes no machine.") {
					t.Errorf("plan says nothing reaches the clusters:\n%s", out)
				}
			}
		})
	}
}

// TestPreviewSaysEachWavesMaxConcurrent: the footer that lists a class
// change's waves says how many clusters of each wave move at a time when
// the wave sets maxConcurrent (as written, and what it makes of the
// wave's clusters). Before, it listed the waves and their clusters only:
// a reviewer could not tell that wave staging would take its clusters
// one at a time.
func TestPreviewSaysEachWavesMaxConcurrent(t *testing.T) {
	base := wavesFleet("v1.30.2")
	for _, n := range []string{"prod-c", "prod-d"} {
		base.Clusters = append(base.Clusters, testCluster(n, 1, 1, labels("tier", "prod")))
	}
	head := templateChange(wavesFleet("v1.30.2"))
	head.Clusters = base.Clusters
	text, md := renderTextAndMarkdown(t, Preview(base, head, nil, nil))
	for _, out := range []string{text, md} {
		want := "Class standard rolls out wave canary (canary-a), then wave staging (stage-a, stage-b; maxConcurrent 1: 1 cluster at a time), then wave production (prod-a, prod-b, prod-c, prod-d; maxConcurrent 50%: 2 clusters at a time); a wave starts when the one before it is done"
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// TestPreviewOfARevertAdmitsAtOnceWhoNeverGotIt: the revert of a class
// change that halted on the canary, which also grows prod-a's pool.
// prod-a never got the bad revision: the status branch shows it on the
// revision the revert brings back, so the rollout the revert starts
// admits it at once, and its new machine is made from the templates it
// runs, replacing nothing. The plan says so: "none, at once", in no wave.
// Before, it took prod-a for a cluster on the bad revision: "wave: 3/3
// production", its pool "at once, from the templates it runs; 1 replaced
// in its wave", and the footer had wave production roll it out.
func TestPreviewOfARevertAdmitsAtOnceWhoNeverGotIt(t *testing.T) {
	s, _ := haltedCanary(t)
	base, head := templateChange(wavesFleet("v1.30.2")), wavesFleet("v1.30.2")
	clusterOf(head, "prod-a").Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(2)
	r := PreviewOf(PreviewInput{Base: base, Head: head, Observed: s.observed(), Rollouts: observedRollouts(s)})
	text, md := renderTextAndMarkdown(t, r)
	rev := r.Rollouts[0].Revision
	for _, want := range []string{
		"wave: none, at once: it runs class revision " + rev + ", which this change brings back, so the rollout admits it at once (class changes reach it in 3/3 production)",
		"    md: 1 → 2 machines\n",
		"Class standard rolls out wave canary (canary-a); the first cluster that fails halts the rollout",
		"At once, in no wave: prod-a.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(md, "| `prod-a` | standard | v1.30.2 | at once (3/3 production) | 0 | 1 | 0 |") {
		t.Errorf("markdown's row of prod-a is not at once, 1 created:\n%s", md)
	}
	for _, bad := range []string{"wave: 3/3 production", "replaced in its wave", "wave production (prod-a", "before their wave: prod-a"} {
		if strings.Contains(text, bad) {
			t.Errorf("text says %q:\n%s", bad, text)
		}
	}
	s.quiet = true
	from := len(s.applied)
	s.setFleet(head)
	s.run(100)
	checkPreviewIsWhatHappens(t, r, s.applied[from:])
}

// TestPreviewReleaseNoteSaysWhatBecomesOfTheFailed: the note of a change
// that releases a halted rollout says what becomes of the failed
// cluster's machines as the preview counts them. The revert leaves
// canary-a's pool one machine over its replicas: its failed machine is
// deleted and none made in its place. A fix (another template) deletes
// it too and replaces the other. Before, both read "the failed clusters'
// machines are replaced when their wave admits them", untrue of the
// revert.
func TestPreviewReleaseNoteSaysWhatBecomesOfTheFailed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		head     func() *v1alpha1.Fleet
		want     string
		replaced bool
	}{
		{"revert", func() *v1alpha1.Fleet { return wavesFleet("v1.30.2") }, "with no replacement.", false},
		{"fix", func() *v1alpha1.Fleet {
			f := wavesFleet("v1.30.2")
			f.Classes[0].Spec.Workers.MachineDeployments[0].Template.Spec["cpus"] = 6
			return f
		}, "with no replacement, and has 1 machine replaced.", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := haltedCanary(t)
			observed := s.observed()
			r := PreviewOf(PreviewInput{Base: templateChange(wavesFleet("v1.30.2")), Head: tc.head(), Observed: observed, Rollouts: observedRollouts(s)})
			text, md := renderTextAndMarkdown(t, r)
			var failed string
			for _, m := range observed {
				if m.Phase == wire.PhaseFailed {
					failed = m.Name
				}
			}
			want := "which releases the halt: it starts again from the first wave with no failure counted; when their wave admits them, canary-a loses " + failed + ", over its pools' replicas, " + tc.want
			for _, out := range []string{text, md} {
				if !strings.Contains(out, want) {
					t.Errorf("plan lacks %q:\n%s", want, out)
				}
				if strings.Contains(out, "machines are replaced") {
					t.Errorf("plan says the failed clusters' machines are replaced:\n%s", out)
				}
			}
			if c := r.Clusters[0]; c.Name != "canary-a" || (c.Replaced > 0) != tc.replaced || len(c.DeletedMachines) != 1 {
				t.Errorf("canary-a: %+v", c)
			}
		})
	}
}
