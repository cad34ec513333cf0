package planner

import (
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// stagingUnderWay is wavesFleet's class change (with edit, if any)
// rolling out, stopped at the pass that admits stage-a to wave staging
// (maxConcurrent 1): stage-b waits for a slot, production for staging to
// be done.
func stagingUnderWay(t *testing.T, edit func(f *v1alpha1.Fleet)) *sim {
	t.Helper()
	s := newSim(t, wavesFleet("v1.30.2"))
	s.quiet = true
	s.run(100)
	f := templateChange(wavesFleet("v1.30.2"))
	if edit != nil {
		edit(f)
	}
	s.setFleet(f)
	for range 50 {
		s.step()
		if slices.Equal(newlyAdmitted(s.recBefore, s.records), []string{"stage-a"}) {
			return s
		}
	}
	t.Fatalf("stage-a never admitted alone:\n%s", s.log.String())
	return nil
}

// newlyAdmitted are the clusters that records after admit to their
// class's rollout and records before did not (nil: none).
func newlyAdmitted(before, after Records) []string {
	var out []string
	for n, c := range after.Clusters {
		a, b := c.Admission, before.Clusters[n].Admission
		rev := after.Rollouts["standard"].Revision
		if a != nil && a.Revision == rev && a.State == AdmissionProgressing && (b == nil || b.Revision != rev) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// TestPreviewGateChangeUnderWayIsWhatHappens: while a class's rollout is
// under way, a change of its gate alone — a wave's maxConcurrent, a
// cluster relabelled into another wave — starts no rollout, and the
// rollout goes on by it. The preview names the clusters the planner
// admits at the merge and no other, and counts their machines as the
// planner then replaces them; the clusters it moves without admitting
// them are named as waiting elsewhere, and the planner admits none of
// them at the merge, and a wave it says moves all at once is admitted in
// one pass. The same pass without the change admits none of them: the
// change is what admits them. Before, every such change read "No
// changes".
func TestPreviewGateChangeUnderWayIsWhatHappens(t *testing.T) {
	wave := func(name string, mc *v1alpha1.IntOrPercent) func(f *v1alpha1.Fleet) {
		return func(f *v1alpha1.Fleet) {
			for i := range f.Classes[0].Spec.Rollout.Waves {
				if w := &f.Classes[0].Spec.Rollout.Waves[i]; w.Name == name {
					w.MaxConcurrent = mc
				}
			}
		}
	}
	relabel := func(cluster, tier string) func(f *v1alpha1.Fleet) {
		return func(f *v1alpha1.Fleet) { clusterOf(f, cluster).Metadata.Labels["tier"] = tier }
	}
	pausedCanary := func(f *v1alpha1.Fleet) { clusterOf(f, "canary-a").Spec.Paused = true }
	for _, c := range []struct {
		name string
		// base edits the class change the rollout under way is of.
		base   func(f *v1alpha1.Fleet)
		head   func(f *v1alpha1.Fleet)
		admits []string
		moves  []string
		want   []string
		// together: admitted in one pass when their wave opens, as the
		// preview says (all at once).
		together []string
	}{
		{name: "more slots", head: wave("staging", v1alpha1.Int(2)), admits: []string{"stage-b"}, want: []string{
			"admitted: at the merge, to class standard's rollout of revision ",
			" under way, in wave staging (2 clusters, all at once); before this change it was in wave staging (2 clusters, 1 at a time), waiting for a slot in wave staging of class standard (maxConcurrent 1); its machines move to that revision now",
			"it admits stage-b at the merge.",
			"machines replaced: stage-b-md-",
		}},
		// prod-b is left alone in its wave, which then moves all of it
		// at once, no longer one of two.
		{name: "relabelled into a wave done", head: relabel("prod-a", "canary"), admits: []string{"prod-a"}, moves: []string{"prod-b"}, want: []string{
			"in wave canary (2 clusters, all at once); before this change it was in wave production (2 clusters, 1 at a time), waiting for wave staging of class standard: 0 of 2 clusters done",
		}},
		{name: "relabelled into the open wave, no slot", head: relabel("prod-a", "staging"), moves: []string{"prod-a", "prod-b"}, want: []string{
			"it waits in wave staging (3 clusters, 1 at a time), not in wave production (2 clusters, 1 at a time) as before, now waiting for a slot in wave staging of class standard (maxConcurrent 1)",
			"it waits in wave production (1 cluster, all at once), not in wave production (2 clusters, 1 at a time) as before, now waiting for wave staging of class standard: 0 of 3 clusters done",
			"No machine changes: 5 clusters unchanged, 2 of them waiting elsewhere in their class's rollout under way.",
		}},
		{name: "a wave not open yet all at once", head: wave("production", v1alpha1.Percent(100)), moves: []string{"prod-a", "prod-b"}, together: []string{"prod-a", "prod-b"}, want: []string{
			"it waits in wave production (2 clusters, all at once), not in wave production (2 clusters, 1 at a time) as before, now waiting for wave staging of class standard: 0 of 2 clusters done",
			"prod-a, prod-b wait where that gate puts them.",
		}},
		// The canary, paused when the change came, was passed over; once
		// unpaused it takes part again, and its wave's turn has come.
		{name: "unpaused in a wave passed", base: pausedCanary, head: func(f *v1alpha1.Fleet) { clusterOf(f, "canary-a").Spec.Paused = false },
			admits: []string{"canary-a"}, want: []string{
				"in wave canary (1 cluster, all at once); before this change it was passed over (spec.paused); its machines move to that revision now",
			}},
		// A slot taken by no change of the gate: nothing moves.
		{name: "maxConcurrent alike", head: wave("staging", v1alpha1.Int(1))},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := stagingUnderWay(t, c.base)
			base, head := templateChange(wavesFleet("v1.30.2")), templateChange(wavesFleet("v1.30.2"))
			if c.base != nil {
				c.base(base)
				c.base(head)
			}
			c.head(head)
			r := PreviewOf(PreviewInput{Base: base, Head: head, Observed: s.observed(), Rollouts: observedRollouts(s)})
			// Every cluster listed as changed is one the gate admits, and
			// says so.
			var admits, moves []string
			for _, cc := range r.Clusters {
				admits = append(admits, cc.Name)
			}
			for _, u := range r.Untouched {
				if strings.Contains(u.Reason, "but this change moves it in class standard's rollout") {
					moves = append(moves, u.Name)
				}
			}
			if !slices.Equal(admits, c.admits) || !slices.Equal(moves, c.moves) {
				t.Errorf("the preview admits %v and moves %v; want %v admitted, %v moved", admits, moves, c.admits, c.moves)
			}
			if r.Reaches() != (len(c.admits)+len(c.moves) > 0) {
				t.Errorf("Reaches %v, with %v admitted and %v moved", r.Reaches(), c.admits, c.moves)
			}
			text, md := renderTextAndMarkdown(t, r)
			for _, w := range c.want {
				if !strings.Contains(text, w) || !strings.Contains(md, w) {
					t.Errorf("text or Markdown lacks %q:\n%s\n---\n%s", w, text, md)
				}
			}

			// The same pass without the change admits none of them.
			without := stagingUnderWay(t, c.base)
			without.step()
			if got := newlyAdmitted(without.recBefore, without.records); got != nil {
				t.Errorf("without the change the next pass admits %v", got)
			}
			// With it, the planner admits what the preview says.
			from := len(s.applied)
			s.setFleet(head)
			s.step()
			if got := newlyAdmitted(s.recBefore, s.records); !slices.Equal(got, c.admits) {
				t.Errorf("the merge's pass admits %v; the preview said %v", got, c.admits)
			}
			for i := 0; len(c.together) > 0; i++ {
				if i == 100 {
					t.Fatalf("%v never admitted:\n%s", c.together, s.log.String())
				}
				s.step()
				got := slices.DeleteFunc(newlyAdmitted(s.recBefore, s.records), func(n string) bool { return !slices.Contains(c.together, n) })
				if len(got) > 0 {
					if !slices.Equal(got, c.together) {
						t.Errorf("a pass admits %v; the preview said %v, all at once", got, c.together)
					}
					break
				}
			}
			s.run(300)
			checkListedIsWhatHappens(t, r, s.applied[from:])
		})
	}
}
