package planner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// observedRollouts is what the status branch would show of the sim's
// rollouts after its last round.
func observedRollouts(s *sim) *ObservedRollouts {
	o := &ObservedRollouts{Classes: map[string]ClassRollout{}, Clusters: map[string]ClusterRollout{}}
	for _, c := range s.last.Classes {
		c.Change = Change{Commit: "fe501a247cfaca95f159ccb4c6a47a195950cf68", Author: "Ada <ada@example.com>", Subject: "standard: 8 cpus a worker"}
		o.Classes[c.Class] = c
	}
	for _, c := range s.last.Clusters {
		if c.Rollout != nil {
			o.Clusters[c.Name] = *c.Rollout
		}
	}
	return o
}

// haltedPreview plans head against the halted canary's fleet (base) as the
// status branch shows it, and renders it in text and Markdown.
func haltedPreview(t *testing.T, head func(f *v1alpha1.Fleet)) (*PreviewReport, string, string) {
	t.Helper()
	s, _ := haltedCanary(t)
	base := templateChange(wavesFleet("v1.30.2"))
	h := templateChange(wavesFleet("v1.30.2"))
	head(h)
	r := PreviewOf(PreviewInput{Base: base, Head: h, Observed: s.observed(), Rollouts: observedRollouts(s)})
	text, md := renderTextAndMarkdown(t, r)
	return r, text, md
}

// renderTextAndMarkdown renders a preview of main → pr as text and as
// Markdown.
func renderTextAndMarkdown(t *testing.T, r *PreviewReport) (string, string) {
	t.Helper()
	r.Base, r.Head = "main", "pr"
	var text, md bytes.Buffer
	if err := RenderText(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := RenderMarkdown(&md, r, 0); err != nil {
		t.Fatal(err)
	}
	return text.String(), md.String()
}

// TestPreviewDuringHalt: a pull request that only grows stage-a's pool,
// planned while the class's rollout is halted on canary-a, says the
// rollout is halted (at which revision, why), shows stage-a growing from
// the templates it runs, and no cluster replaced: not every cluster the
// halt holds back "replaced at once, in no wave".
func TestPreviewDuringHalt(t *testing.T) {
	r, text, md := haltedPreview(t, func(f *v1alpha1.Fleet) {
		clusterOf(f, "stage-a").Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(2)
	})
	golden(t, "preview/halted-scale", text)
	golden(t, "preview/halted-scale.md", md)
	if r.Totals != (PreviewTotals{Changed: 1, Created: 1}) || r.Clusters[0].Name != "stage-a" || r.Clusters[0].Held == "" {
		t.Errorf("totals %+v, clusters %+v: want stage-a alone, held, 1 machine created", r.Totals, r.Clusters)
	}
	if len(r.Rollouts) != 1 || r.Rollouts[0].Running == nil || !r.Rollouts[0].Running.Halted || r.Rollouts[0].NewRollout {
		t.Fatalf("rollouts %+v: want standard's, halted, going on", r.Rollouts)
	}
	rev := r.Rollouts[0].Running.Revision
	for _, want := range []string{"rollout of revision " + rev, "is halted: 1 of maxFailures 1 clusters failed (canary-a)", "the halt stays",
		"stays halted at revision " + rev} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "At once, in no wave: canary-a") || strings.Contains(text, "replaced") && !strings.Contains(text, "0 machines replaced") {
		t.Errorf("the halted clusters read as replaced:\n%s", text)
	}
}

// TestPreviewNewClusterDuringHalt: a cluster added while its class's
// rollout is halted reads as waiting, with no machine made.
func TestPreviewNewClusterDuringHalt(t *testing.T) {
	r, text, _ := haltedPreview(t, func(f *v1alpha1.Fleet) {
		f.Clusters = append(f.Clusters, testCluster("prod-new", 1, 1, labels("tier", "prod")))
	})
	if r.Totals != (PreviewTotals{Added: 1}) || r.Clusters[0].Held == "" {
		t.Errorf("totals %+v, clusters %+v: want prod-new added, held, nothing made", r.Totals, r.Clusters)
	}
	if !strings.Contains(text, "waits: the rollout of class standard is halted at revision") {
		t.Errorf("text does not say prod-new waits on the halt:\n%s", text)
	}
}

// TestPreviewReleasesHalt: a fix of the class during a halt says it
// releases the halt and starts a rollout from the first wave.
func TestPreviewReleasesHalt(t *testing.T) {
	r, text, _ := haltedPreview(t, func(f *v1alpha1.Fleet) {
		f.Classes[0].Spec.Workers.MachineDeployments[0].Template.Spec["cpus"] = 6
	})
	if len(r.Rollouts) != 1 || !r.Rollouts[0].Releases() {
		t.Fatalf("rollouts %+v: want standard's halt released", r.Rollouts)
	}
	for _, want := range []string{"which releases the halt", "halted rollout of revision " + r.Rollouts[0].Running.Revision + " is released", "rolls out wave canary (canary-a)"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

// TestPreviewGateChange: a commit that changes a class's machines and, in
// the same commit, collapses its waves into one and raises maxFailures
// starts a rollout that runs by the new gate; the plan warns that the
// change changes the gate of the rollout it starts, and its footer says
// how many failures halt it, not "a failure".
func TestPreviewGateChange(t *testing.T) {
	base := wavesFleet("v1.29.4")
	head := wavesFleet("v1.30.2")
	head.Classes[0].Spec.Rollout = &v1alpha1.RolloutSpec{MaxFailures: ptr(3),
		Waves: []v1alpha1.RolloutWave{{Name: "all", Selector: v1alpha1.LabelSelector{MatchExpressions: []v1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: "Exists"}}}}}}
	r := Preview(base, head, nil, nil)
	text, md := renderTextAndMarkdown(t, r)
	golden(t, "preview/gate-change", text)
	if len(r.Rollouts) != 1 || len(r.Rollouts[0].GateChanges) == 0 || r.Rollouts[0].MaxFailures != 3 {
		t.Fatalf("rollouts %+v: want standard's new rollout, maxFailures 3, with its gate changes", r.Rollouts)
	}
	for _, out := range []string{text, md} {
		for _, want := range []string{"changes the gate of that very rollout", "waves canary, staging (maxConcurrent 1), production (maxConcurrent 50%); maxFailures 1 → waves all; maxFailures 3", "the rollout halts once 3 clusters failed (maxFailures 3)"} {
			if !strings.Contains(out, want) {
				t.Errorf("plan lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "a failure halts") {
			t.Errorf("plan says a single failure halts a rollout of maxFailures 3:\n%s", out)
		}
	}
}

// TestPreviewRaisesMaxFailures: raising maxFailures during a halt, the
// class's machines left as they are, releases the halt without a new
// rollout: the plan says so, not that the halt stays.
func TestPreviewRaisesMaxFailures(t *testing.T) {
	r, text, _ := haltedPreview(t, func(f *v1alpha1.Fleet) {
		f.Classes[0].Spec.Rollout.MaxFailures = ptr(2)
	})
	if len(r.Rollouts) != 1 || !r.Rollouts[0].Releases() || r.Rollouts[0].NewRollout {
		t.Fatalf("rollouts %+v: want standard's halt released by maxFailures 2, no new rollout", r.Rollouts)
	}
	for _, want := range []string{"This change raises maxFailures to 2, which releases the halt without a new rollout", "goes on under maxFailures 2"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "the halt stays") {
		t.Errorf("text says the halt stays:\n%s", text)
	}
}
