package planner

import (
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// stepsByCluster counts the creates and deletes of steps, by cluster.
func stepsByCluster(steps []Step) (creates, deletes map[string]int) {
	creates, deletes = map[string]int{}, map[string]int{}
	for _, st := range steps {
		switch st.Op {
		case wire.OpCreate:
			creates[st.Machine.Cluster]++
		case wire.OpDelete:
			deletes[st.Machine.Cluster]++
		}
	}
	return creates, deletes
}

// checkPreviewIsWhatHappens holds a preview's counts to the steps the
// planner then took: a cluster's creates are its replacements and its
// new machines, its deletes its replacements and the machines it loses.
func checkPreviewIsWhatHappens(t *testing.T, r *PreviewReport, steps []Step) {
	t.Helper()
	creates, deletes := checkListedIsWhatHappens(t, r, steps)
	listed := map[string]bool{}
	for _, c := range r.Clusters {
		listed[c.Name] = true
	}
	for n := range creates {
		if !listed[n] {
			t.Errorf("%s: the preview lists no change; the planner made %d creates", n, creates[n])
		}
	}
	for n := range deletes {
		if !listed[n] {
			t.Errorf("%s: the preview lists no change; the planner made %d deletes", n, deletes[n])
		}
	}
}

// checkListedIsWhatHappens holds the counts of each cluster the preview
// lists to the steps the planner then took, and returns those steps'
// creates and deletes by cluster.
func checkListedIsWhatHappens(t *testing.T, r *PreviewReport, steps []Step) (creates, deletes map[string]int) {
	t.Helper()
	creates, deletes = stepsByCluster(steps)
	for _, c := range r.Clusters {
		if creates[c.Name] != c.Replaced+c.Created || deletes[c.Name] != c.Replaced+c.Deleted {
			t.Errorf("%s: the preview said %d replaced, %d created, %d deleted (%d creates, %d deletes); the planner made %d creates and %d deletes",
				c.Name, c.Replaced, c.Created, c.Deleted, c.Replaced+c.Created, c.Replaced+c.Deleted, creates[c.Name], deletes[c.Name])
		}
	}
	return creates, deletes
}

// TestPreviewOfARevertCountsWhatHappens: the revert of a change that
// halted on the canary, planned from the status branch. The canary has
// its old machine and the failed one of the bad template, one more than
// its pool's replicas: the revert deletes the failed one and creates
// nothing, and the preview says so whatever order the machines come in.
// Before, a preview that met the failed machine first counted it
// "replaced" as well as the pool's machine too many "deleted": 1 replaced
// and 1 deleted, where the daemon deleted one machine and made none.
func TestPreviewOfARevertCountsWhatHappens(t *testing.T) {
	s, _ := haltedCanary(t)
	base, head := templateChange(wavesFleet("v1.30.2")), wavesFleet("v1.30.2")
	observed := s.observed()
	reversed := slices.Clone(observed)
	slices.Reverse(reversed)
	r := PreviewOf(PreviewInput{Base: base, Head: head, Observed: observed, Rollouts: observedRollouts(s)})
	if rev := PreviewOf(PreviewInput{Base: base, Head: head, Observed: reversed, Rollouts: observedRollouts(s)}); rev.Totals != r.Totals {
		t.Errorf("totals %+v with the machines in one order, %+v in the other", r.Totals, rev.Totals)
	}
	var failed []string
	for _, m := range observed {
		if m.Phase == wire.PhaseFailed {
			failed = append(failed, m.Name)
		}
	}
	if len(r.Clusters) != 1 || !slices.Equal(r.Clusters[0].DeletedMachines, failed) || len(r.Clusters[0].Machines) != 0 {
		t.Errorf("clusters %+v: want canary-a alone, losing its failed machine %v, replacing none", r.Clusters, failed)
	}
	if text, _ := renderTextAndMarkdown(t, r); !strings.Contains(text, "machines deleted: "+strings.Join(failed, ", ")) {
		t.Errorf("text does not name the machine deleted:\n%s", text)
	}
	s.quiet = true
	from := len(s.applied)
	s.setFleet(head)
	s.run(100)
	checkPreviewIsWhatHappens(t, r, s.applied[from:])
}

// TestPreviewNamesTheMachinesAScaleDownDeletes: a pool made smaller, with
// each deletion.order and with one machine of another template (a
// rolling update under way), names the machines its scale-down deletes
// and those it replaces, and the planner then deletes those and replaces
// those. Before, the preview named neither: it counted "1 deleted" and
// left the reviewer to guess which.
func TestPreviewNamesTheMachinesAScaleDownDeletes(t *testing.T) {
	for _, order := range []string{v1alpha1.DeleteOldest, v1alpha1.DeleteNewest, v1alpha1.DeleteRandom} {
		t.Run(order, func(t *testing.T) {
			sized := func(n int) *v1alpha1.Fleet {
				return testFleet(testClass("v1.30.2"), testCluster("c1", 1, n, func(c *v1alpha1.Cluster) {
					c.Spec.Topology.Workers.MachineDeployments[0].Deletion = &v1alpha1.MachineDeletion{Order: order}
				}))
			}
			s := newSim(t, sized(2))
			s.quiet = true
			s.run(100)
			s.setFleet(sized(4)) // two more, a round later: the pool's machines are of two ages
			s.run(100)
			// One of another template, as a rolling update leaves one.
			var oldest *ObservedMachine
			for _, m := range s.machines {
				if m.Deployment == "md" && (oldest == nil || older(m, oldest)) {
					oldest = m
				}
			}
			oldest.TemplateHash = "0123456789"
			r := Preview(sized(4), sized(2), nil, s.observed())
			if len(r.Clusters) != 1 {
				t.Fatalf("clusters %+v: want c1", r.Clusters)
			}
			c := r.Clusters[0]
			from := len(s.applied)
			s.setFleet(sized(2))
			s.run(100)
			var created, deleted []string
			for _, st := range s.applied[from:] {
				if st.Op == wire.OpDelete {
					deleted = append(deleted, st.Machine.Name)
				} else {
					created = append(created, st.Machine.Name)
				}
			}
			slices.Sort(deleted)
			want := slices.Concat(c.Machines, c.DeletedMachines)
			slices.Sort(want)
			if !slices.Equal(deleted, want) || len(created) != c.Replaced || !slices.Equal(c.Machines, []string{oldest.Name}) && !slices.Contains(c.DeletedMachines, oldest.Name) {
				t.Errorf("the preview replaces %v and deletes %v; the planner deleted %v and created %v", c.Machines, c.DeletedMachines, deleted, created)
			}
			checkPreviewIsWhatHappens(t, r, s.applied[from:])
		})
	}
}

// TestPreviewSizesThatGoBeforeTheirWave: a class change that starts a
// rollout, and in the same commit a bigger pool in stage-a (wave 2) and a
// smaller one in prod-a (wave 3). The rollout admits the canary alone;
// stage-a and prod-a keep the templates they run until their waves, but
// their new sizes apply at once (the daemon's rule: sizes are never held),
// so stage-a's new machine is made from its old template and replaced
// again in its wave. The preview says the sizes go at once and counts
// that replacement: before, it listed stage-a's pool growing in wave 2
// with one replacement, where the daemon made a machine at the merge and
// replaced two in wave 2.
func TestPreviewSizesThatGoBeforeTheirWave(t *testing.T) {
	base := wavesFleet("v1.30.2")
	head := templateChange(wavesFleet("v1.30.2"))
	clusterOf(head, "stage-a").Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(2)
	clusterOf(head, "prod-a").Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(2)
	s := newSim(t, base)
	s.quiet = true
	s.run(100)
	clusterOf(base, "prod-a").Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(3)
	s.setFleet(base)
	s.run(100)
	r := Preview(base, head, nil, s.observed())
	from := len(s.applied)
	s.setFleet(head)
	s.step() // the merge's first pass: the canary is admitted, nothing else
	first := s.applied[from:]
	s.run(200)
	checkPreviewIsWhatHappens(t, r, s.applied[from:])
	creates, deletes := stepsByCluster(first)
	for _, c := range r.Clusters {
		now := false
		for _, p := range c.Pools {
			now = now || p.ResizedAtOnce
		}
		moved := creates[c.Name]+deletes[c.Name] > 0
		if c.Name != "canary-a" && moved != now {
			t.Errorf("%s: the merge's first pass made %d creates and %d deletes; the preview's pools %+v", c.Name, creates[c.Name], deletes[c.Name], c.Pools)
		}
	}
	text, _ := renderTextAndMarkdown(t, r)
	for _, want := range []string{"md: 1 → 2 machines at once, from the templates it runs; 2 replaced in its wave", "md: 3 → 2 machines at once, from the templates it runs; 2 replaced in its wave",
		"New sizes at once, before their wave: prod-a, stage-a."} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

// TestPreviewResizedOnlyIsInNoWave: a class upgrade that prod-a, which
// pins its version, does not reach, merged with a smaller pool for
// prod-a. The rollout admits prod-a at once, done (none of its machines
// changes), and its pool shrinks at once: the plan says at once, in no
// wave, not in wave production, where it had nothing to wait for.
func TestPreviewResizedOnlyIsInNoWave(t *testing.T) {
	pin := func(f *v1alpha1.Fleet) *v1alpha1.Fleet {
		clusterOf(f, "prod-a").Spec.Topology.Version = "v1.29.4"
		clusterOf(f, "prod-a").Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(2)
		return f
	}
	base, head := pin(wavesFleet("v1.29.4")), pin(wavesFleet("v1.30.2"))
	clusterOf(head, "prod-a").Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(1)
	s := newSim(t, base)
	s.quiet = true
	s.run(100)
	r := Preview(base, head, nil, s.observed())
	from := len(s.applied)
	s.setFleet(head)
	s.run(300)
	checkPreviewIsWhatHappens(t, r, s.applied[from:])
	text, _ := renderTextAndMarkdown(t, r)
	for _, want := range []string{"then wave production (prod-b; maxConcurrent 50%: 1 cluster at a time);", "At once, in no wave: prod-a.", "wave: none, at once: the change is in the cluster's own files"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}
