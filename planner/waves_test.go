package planner

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// threeWaves is a class rolled out in three waves of one cluster each
// (canary-a, stage-a, prod-a; one control-plane machine and two workers).
// Its workers' cpus come from variable cpus, whose schema defaults it to
// 4 (Cluster API v1beta2's form), and a patch sets their memory by the
// class's name, read from builtin.cluster.topology.class.
func threeWaves() *v1alpha1.Fleet {
	class := testClass("v1.30.2")
	class.Spec.Variables = []v1alpha1.ClassVariable{{Name: "cpus",
		Schema: &v1alpha1.VariableSchema{OpenAPIV3Schema: map[string]any{"type": "integer", "default": 4}}}}
	class.Spec.Patches = []v1alpha1.ClassPatch{
		workerPatch("cpus", "default", fromVar("/spec/cpus", "cpus")),
		workerPatch("memory", "default", v1alpha1.JSONPatch{Op: v1alpha1.PatchAdd, Path: "/spec/memory",
			ValueFrom: &v1alpha1.ValueFrom{Template: `{{ if eq .builtin.cluster.topology.class "standard" }}8{{ else }}16{{ end }}`}}),
	}
	class.Spec.Rollout = &v1alpha1.RolloutSpec{Waves: []v1alpha1.RolloutWave{
		{Name: "canary", Selector: v1alpha1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}},
		{Name: "stage", Selector: v1alpha1.LabelSelector{MatchLabels: map[string]string{"tier": "stage"}}, MaxConcurrent: v1alpha1.Int(1)},
		{Name: "prod", Selector: v1alpha1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}, MaxConcurrent: v1alpha1.Int(1)},
	}}
	return testFleet(class,
		testCluster("canary-a", 1, 2, labels("tier", "canary")),
		testCluster("prod-a", 1, 2, labels("tier", "prod")),
		testCluster("stage-a", 1, 2, labels("tier", "stage")),
	)
}

// workerClass is the class's one worker class.
func workerClass(f *v1alpha1.Fleet) *v1alpha1.MachineDeploymentClass {
	return &f.Classes[0].Spec.Workers.MachineDeployments[0]
}

// classChanges are the kinds of class change that can create, replace or
// delete machines. Each returns the changed fleet, made when the change is
// merged (now).
var classChanges = []struct {
	name   string
	change func(f *v1alpha1.Fleet, now time.Time) *v1alpha1.Fleet
	// setup runs on the converged fleet before the change is merged.
	setup func(s *sim)
}{
	{
		name: "worker template",
		change: func(f *v1alpha1.Fleet, _ time.Time) *v1alpha1.Fleet {
			workerClass(f).Template.Spec["image"] = "v2"
			return f
		},
	},
	{
		// The default of the variable's schema (openAPIV3Schema.default),
		// not the variable's own default.
		name: "variable schema default",
		change: func(f *v1alpha1.Fleet, _ time.Time) *v1alpha1.Fleet {
			f.Classes[0].Spec.Variables[0].Schema.OpenAPIV3Schema["default"] = 8
			return f
		},
	},
	{
		// The memory patch reads the class's name.
		name: "class rename",
		change: func(f *v1alpha1.Fleet, _ time.Time) *v1alpha1.Fleet {
			f.Classes[0].Metadata.Name = "standard-v2"
			for _, c := range f.Clusters {
				c.Spec.Topology.ClassRef.Name = "standard-v2"
			}
			return f
		},
	},
	{
		// Every worker made before 30 seconds from now is replaced then,
		// all at once (maxSurge 0, maxUnavailable 100%).
		name: "rollout.after and strategy",
		change: func(f *v1alpha1.Fleet, now time.Time) *v1alpha1.Fleet {
			workerClass(f).Rollout = &v1alpha1.MachineRollout{After: ptr(now.Add(30 * time.Second)),
				Strategy: &v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.StrategyRollingUpdate,
					RollingUpdate: &v1alpha1.RollingUpdateStrategy{MaxSurge: v1alpha1.Int(0), MaxUnavailable: v1alpha1.Percent(100)}}}
			return f
		},
	},
	{
		// A worker of each cluster stopped sending heartbeats before the
		// change, which adds a health check that finds it unhealthy.
		name: "health check",
		change: func(f *v1alpha1.Fleet, _ time.Time) *v1alpha1.Fleet {
			classHealth(f.Classes[0], 1)
			return f
		},
		setup: func(s *sim) {
			dead := map[string]bool{}
			for _, m := range s.observed() {
				if m.Deployment != "" && !dead[m.Cluster] {
					dead[m.Cluster] = true
					s.dead[m.Name] = true
				}
			}
		},
	},
}

// TestEveryClassChangeGoesThroughTheWaves: whatever a class change is, it
// reaches the first wave only until that wave is done on it. Here every
// machine made after the change fails: the canary fails, the rollout
// halts, and the later waves get no step at all (no create, no delete, no
// remediation). Reverting the change releases the fleet: the canary is
// repaired and every cluster is done on the revert, still without a step
// in the later waves.
func TestEveryClassChangeGoesThroughTheWaves(t *testing.T) {
	for _, tc := range classChanges {
		t.Run(strings.ReplaceAll(tc.name, " ", "-"), func(t *testing.T) {
			s := newSim(t, threeWaves())
			s.quiet = true
			s.run(100)
			if tc.setup != nil {
				tc.setup(s)
			}
			s.check = checkInvariants(t)
			changed := s.now
			s.setFleet(tc.change(threeWaves(), changed))
			s.fail = func(m *ObservedMachine) bool { return !m.Created.Before(changed) }
			s.applied = nil
			s.minRound = s.round + 6 // rollout.after: 30 s
			for i := 0; i < 60 && s.step(); i++ {
			}

			canary := 0
			for _, st := range s.applied {
				if st.Machine.Cluster == "canary-a" {
					canary++
				}
			}
			if canary == 0 {
				t.Fatal("the change never reached the canary")
			}
			reachedLater(t, s, "after the change")
			cr := s.last.Classes[0]
			if !cr.Halted || fmt.Sprint(cr.Failed) != "[canary-a]" {
				t.Errorf("rollout %+v, want halted with canary-a failed", cr)
			}

			// git revert
			s.applied = nil
			s.setFleet(threeWaves())
			s.fail = nil
			s.minRound = s.round + 2
			for i := 0; i < 100 && s.step(); i++ {
			}
			reachedLater(t, s, "after the revert")
			cr = s.last.Classes[0]
			if cr.Halted || len(cr.Failed) > 0 {
				t.Errorf("after the revert the rollout is %+v, want it released", cr)
			}
			for _, c := range s.last.Clusters {
				if c.Rollout == nil || c.Rollout.Revision != cr.Revision || c.Rollout.State != AdmissionDone {
					t.Errorf("after the revert %s is %+v, want done on %s", c.Name, c.Rollout, cr.Revision)
				}
			}
			for _, m := range s.machines {
				if m.Cluster == "canary-a" && m.Phase != wire.PhaseRunning {
					t.Errorf("after the revert canary machine %s is %s", m.Name, m.Phase)
				}
			}
		})
	}
}

// reachedLater fails the test when a cluster after the first wave got a
// step, naming the first few.
func reachedLater(t *testing.T, s *sim, when string) {
	t.Helper()
	var got []string
	for _, st := range s.applied {
		if st.Machine.Cluster != "canary-a" {
			got = append(got, fmt.Sprintf("%s %s (%s)", st.Op, st.Machine.Name, st.Reason))
		}
	}
	if len(got) > 0 {
		t.Errorf("%s, later waves got %d steps: %s", when, len(got), strings.Join(got[:min(len(got), 3)], "; "))
	}
}

// TestAnUpgradeStartsNoRollout: records written by a gitfleet that
// computed class revisions over less of the class (legacyRevision) and
// recorded no rules in admissions are read as this one's: a halted
// rollout stays halted, with the same start and failures, no cluster is
// admitted again and none gets a step; the admissions get their rules.
func TestAnUpgradeStartsNoRollout(t *testing.T) {
	base := threeWaves()
	head := classChanges[0].change(threeWaves(), simStart)
	s := newSim(t, base)
	s.quiet = true
	s.run(100)
	s.setFleet(head)
	changed := s.now
	s.fail = func(m *ObservedMachine) bool { return !m.Created.Before(changed) }
	s.run(60)
	if cr := s.last.Classes[0]; !cr.Halted {
		t.Fatalf("the rollout did not halt: %+v", cr)
	}

	// The records as the earlier gitfleet wrote them.
	legacy := map[string]string{}
	for _, f := range []*v1alpha1.Fleet{base, head} {
		cc := f.Classes[0]
		legacy[classRevision(cc)] = legacyRevision(cc)
	}
	before := s.records.clone()
	old := s.records.clone()
	for n, rr := range old.Rollouts {
		rr.Revision = legacy[rr.Revision]
		old.Rollouts[n] = rr
	}
	for n, rec := range old.Clusters {
		a := *rec.Admission
		a.Revision = legacy[a.Revision]
		// No rules: templates only.
		a.Rules, a.HealthChecks, a.KubernetesVersions = false, nil, nil
		a.Pools = slices.Clone(a.Pools)
		for i := range a.Pools {
			a.Pools[i].Rules = PoolRules{}
		}
		rec.Admission = &a
		old.Clusters[n] = rec
	}
	s.records = old
	s.gates, s.sums = nil, nil // a new process

	s.applied = nil
	s.minRound = s.round + 3
	s.run(60)
	if len(s.applied) > 0 {
		t.Errorf("after the upgrade, %d steps; the first: %s %s (%s)", len(s.applied), s.applied[0].Op, s.applied[0].Machine.Name, s.applied[0].Reason)
	}
	if a, b := before.Rollouts["standard"], s.records.Rollouts["standard"]; !a.equal(b) {
		t.Errorf("the upgrade changed the rollout:\nbefore %+v\nafter  %+v", a, b)
	}
	rev := s.desired.Classes[0].Revision
	for n, rec := range before.Clusters {
		a, b := rec.Admission, s.records.Clusters[n].Admission
		// One admitted to an earlier revision keeps the revision it was
		// recorded with: it still is not the class's.
		want := a.Revision
		if want != rev {
			want = legacy[want]
		}
		if b == nil || b.Revision != want || a.State != b.State || !a.AdmittedAt.Equal(b.AdmittedAt) || !b.Rules {
			t.Errorf("%s: admission before the upgrade %+v, after %+v", n, a, b)
		}
	}
	if cr := s.last.Classes[0]; !cr.Halted || fmt.Sprint(cr.Failed) != "[canary-a]" {
		t.Errorf("after the upgrade the rollout is %+v, want halted with canary-a failed", cr)
	}
}

// TestAWaitingClusterKeepsItsStrategy: a cluster still moving to the
// revision it was admitted to when the class changes again keeps that
// revision's strategy until its wave admits it to the new one. Here
// stage-a replaces its workers one by one (maxSurge 1, maxUnavailable 0)
// when a commit changes the template again and the strategy to all at
// once (maxSurge 0, maxUnavailable 100%); the canary fails on it, so
// stage-a is never admitted to it, and never has fewer than its two
// workers ready.
func TestAWaitingClusterKeepsItsStrategy(t *testing.T) {
	s := newSim(t, threeWaves())
	s.quiet = true
	s.run(100)
	s.check = checkInvariants(t)
	r1 := classChanges[0].change(threeWaves(), s.now)
	s.setFleet(r1)
	stage := func() *Admission { return s.records.Clusters["stage-a"].Admission }
	for i := 0; ; i++ {
		if i == 30 {
			t.Fatal("stage-a never started moving to the first change")
		}
		s.step()
		if a := stage(); a != nil && a.Revision == s.desired.Classes[0].Revision {
			break
		}
	}
	// Stage-a's machines take three rounds to come up: it is in the
	// middle of its rolling update when the second change lands.
	slow := func() {
		for _, st := range s.applied {
			if _, ok := s.delay[st.Machine.Name]; !ok && st.Machine.Cluster == "stage-a" {
				s.delay[st.Machine.Name] = 3
			}
		}
	}
	slow()
	r2 := classChanges[0].change(threeWaves(), s.now)
	workerClass(r2).Template.Spec["image"] = "v3"
	workerClass(r2).Rollout = &v1alpha1.MachineRollout{Strategy: &v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.StrategyRollingUpdate,
		RollingUpdate: &v1alpha1.RollingUpdateStrategy{MaxSurge: v1alpha1.Int(0), MaxUnavailable: v1alpha1.Percent(100)}}}
	s.setFleet(r2)
	changed := s.now
	s.fail = func(m *ObservedMachine) bool { return m.Cluster == "canary-a" && !m.Created.Before(changed) }
	check := s.check
	least := 2
	s.check = func(s *sim, before, after []ObservedMachine) {
		check(s, before, after)
		ready := 0
		for _, m := range after {
			if m.Cluster == "stage-a" && m.Deployment == "md" && m.Phase == wire.PhaseRunning {
				ready++
			}
		}
		least = min(least, ready)
		slow()
	}
	s.applied = nil
	s.minRound = s.round + 8
	for i := 0; i < 60 && s.step(); i++ {
	}
	if least < 2 {
		t.Errorf("stage-a had %d workers running at one point, want 2 at all times (its strategy: maxUnavailable 0)", least)
	}
	if cr := s.last.Classes[0]; !cr.Halted {
		t.Errorf("the rollout did not halt on the canary: %+v", cr)
	}
	if a := stage(); a == nil || a.Revision == s.desired.Classes[0].Revision || a.State != AdmissionDone {
		t.Errorf("stage-a: %+v, want done on the first change", a)
	}
	for _, st := range s.applied {
		if st.Machine.Cluster == "prod-a" {
			t.Errorf("prod-a got a step: %s %s (%s)", st.Op, st.Machine.Name, st.Reason)
		}
	}
}
