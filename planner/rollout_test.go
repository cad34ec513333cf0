package planner

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./planner -run %s -update)", err, t.Name())
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, d)
	}
}

// converged runs the simulator on base quietly, then switches to head and
// records every round until converged.
func converged(t *testing.T, base, head *v1alpha1.Fleet) *sim {
	t.Helper()
	s := newSim(t, base)
	s.quiet = true
	s.run(100)
	s.quiet = false
	s.round = 0
	s.setFleet(head)
	return s
}

func TestRolloutGolden(t *testing.T) {
	upgrade := func(surge, unavail int) (*v1alpha1.Fleet, *v1alpha1.Fleet) {
		return testFleet(testClass("v1.29.4"), testCluster("c1", 3, 5, rolling(surge, unavail))),
			testFleet(testClass("v1.30.2"), testCluster("c1", 3, 5, rolling(surge, unavail)))
	}
	tests := []struct {
		name  string
		base  *v1alpha1.Fleet
		head  *v1alpha1.Fleet
		setup func(s *sim)
		check func(t *testing.T, s *sim)
	}{
		{name: "upgrade-surge1-unavail0", base: first(upgrade(1, 0)), head: second(upgrade(1, 0))},
		{name: "upgrade-surge0-unavail1", base: first(upgrade(0, 1)), head: second(upgrade(0, 1))},
		{
			name: "scale-down",
			base: testFleet(testClass("v1.30.2"), testCluster("c1", 5, 5)),
			head: testFleet(testClass("v1.30.2"), testCluster("c1", 3, 2)),
		},
		{
			name: "ondelete",
			base: testFleet(testClass("v1.29.4"), testCluster("c1", 3, 3, onDelete)),
			head: testFleet(testClass("v1.30.2"), testCluster("c1", 3, 3, onDelete)),
			setup: func(s *sim) {
				// Nothing replaces outdated workers until someone deletes one.
				s.minRound = 9
				s.hooks[8] = func(s *sim) { s.deleteOldest("md", 2) }
			},
		},
		{
			name: "chained-v1.29-v1.31",
			base: testFleet(testClass("v1.29.4", "v1.30.1", "v1.30.5", "v1.31.0"), testCluster("c1", 3, 2)),
			head: testFleet(testClass("v1.31.0", "v1.30.1", "v1.30.5", "v1.31.0"), testCluster("c1", 3, 2)),
		},
		{
			name:  "remediation",
			base:  withMHC(testFleet(testClass("v1.30.2"), testCluster("c1", 3, 5)), v1alpha1.Percent(40)),
			head:  withMHC(testFleet(testClass("v1.30.2"), testCluster("c1", 3, 5)), v1alpha1.Percent(40)),
			setup: func(s *sim) { s.kill("md", 1); s.minRound = 8 },
		},
		{
			name:  "remediation-maxunhealthy",
			base:  withMHC(testFleet(testClass("v1.30.2"), testCluster("c1", 3, 5)), v1alpha1.Percent(40)),
			head:  withMHC(testFleet(testClass("v1.30.2"), testCluster("c1", 3, 5)), v1alpha1.Percent(40)),
			setup: func(s *sim) { s.kill("md", 3); s.minRound = 8 },
			check: func(t *testing.T, s *sim) {
				c := s.last.Clusters[0]
				if !c.Has(CondRemediationBlocked) {
					t.Errorf("conditions %+v lack %s", c.Conditions, CondRemediationBlocked)
				}
			},
		},
		{
			// Ready False for 60s: the machine's heartbeats keep coming,
			// but say it is not healthy; it is replaced once the
			// condition's timeout has passed, not before.
			name:  "remediation-not-ready",
			base:  withMHC(testFleet(testClass("v1.30.2"), testCluster("c1", 3, 5)), v1alpha1.Percent(40)),
			head:  withMHC(testFleet(testClass("v1.30.2"), testCluster("c1", 3, 5)), v1alpha1.Percent(40)),
			setup: func(s *sim) { s.sicken("md", 1); s.minRound = 10 },
		},
		{
			// unhealthyInRange [2-3]: one unhealthy machine is outside the
			// range, so remediation waits and says why.
			name:  "remediation-in-range",
			base:  withMHC(testFleet(testClass("v1.30.2"), testCluster("c1", 3, 5)), nil),
			head:  inRange(withMHC(testFleet(testClass("v1.30.2"), testCluster("c1", 3, 5)), nil), "[2-3]"),
			setup: func(s *sim) { s.kill("md", 1); s.minRound = 8 },
			check: func(t *testing.T, s *sim) {
				c := s.last.Clusters[0]
				if !c.Has(CondRemediationBlocked) {
					t.Errorf("conditions %+v lack %s", c.Conditions, CondRemediationBlocked)
				}
			},
		},
		{
			// The class's worker health check, with maxInFlight 1: three
			// silent machines are replaced one at a time, and no
			// MachineHealthCheck object is written.
			name:  "remediation-class-maxinflight",
			base:  testFleet(classHealth(testClass("v1.30.2"), 1), testCluster("c1", 3, 5)),
			head:  testFleet(classHealth(testClass("v1.30.2"), 1), testCluster("c1", 3, 5)),
			setup: func(s *sim) { s.kill("md", 3); s.minRound = 10 },
		},
		{
			// A standalone MachineDeployment with remediation.maxInFlight
			// 1, found unhealthy by a MachineHealthCheck without a bound of
			// its own: three silent machines are replaced one at a time.
			name:  "remediation-standalone-maxinflight",
			base:  withMHC(withStandalone(testFleet(testClass("v1.30.2"), testCluster("c1", 1, 0)), 3, v1alpha1.Int(1)), nil),
			head:  withMHC(withStandalone(testFleet(testClass("v1.30.2"), testCluster("c1", 1, 0)), 3, v1alpha1.Int(1)), nil),
			setup: func(s *sim) { s.kill("extra", 3); s.minRound = 10 },
		},
		{
			// The cluster turns the class's health check off: the silent
			// machine is not replaced.
			name: "remediation-class-disabled",
			base: testFleet(classHealth(testClass("v1.30.2"), 1), testCluster("c1", 3, 5)),
			head: testFleet(classHealth(testClass("v1.30.2"), 1), testCluster("c1", 3, 5, func(c *v1alpha1.Cluster) {
				c.Spec.Topology.Workers.MachineDeployments[0].HealthCheck = &v1alpha1.TopologyHealthCheck{Enabled: ptr(false)}
			})),
			setup: func(s *sim) { s.kill("md", 1); s.minRound = 8 },
		},
		{
			// The machines' labels come from the cluster's metadata, and
			// a MachineHealthCheck selects by one of them; the label is
			// added after the machines were made, and selects them at once.
			name:  "remediation-user-label",
			base:  testFleet(testClass("v1.30.2"), testCluster("c1", 3, 5)),
			head:  userLabelMHC(testFleet(testClass("v1.30.2"), testCluster("c1", 3, 5))),
			setup: func(s *sim) { s.kill("md", 1); s.minRound = 8 },
		},
		{
			// rollout.after two minutes in: nothing changes until then,
			// and then every worker made before it is replaced, one at a
			// time (maxSurge 1).
			name: "rollout-after",
			base: testFleet(testClass("v1.30.2"), testCluster("c1", 1, 2)),
			head: testFleet(testClass("v1.30.2"), testCluster("c1", 1, 2, func(c *v1alpha1.Cluster) {
				c.Spec.Topology.Workers.MachineDeployments[0].Rollout = &v1alpha1.MachineRollout{After: ptr(simStart.Add(2 * time.Minute))}
			})),
			setup: func(s *sim) { s.minRound = 12 },
		},
		{
			// deletion.order Newest: a scale-down takes the newest machines.
			name: "scale-down-newest",
			base: testFleet(testClass("v1.30.2"), testCluster("c1", 1, 4)),
			head: testFleet(testClass("v1.30.2"), testCluster("c1", 1, 2, func(c *v1alpha1.Cluster) {
				c.Spec.Topology.Workers.MachineDeployments[0].Deletion = &v1alpha1.MachineDeletion{Order: v1alpha1.DeleteNewest}
			})),
		},
		{
			// minReadySeconds 30: an outdated worker goes only once its
			// replacement has been Running for 30 seconds.
			name: "upgrade-min-ready",
			base: testFleet(testClass("v1.29.4"), testCluster("c1", 1, 2)),
			head: testFleet(testClass("v1.30.2"), testCluster("c1", 1, 2, func(c *v1alpha1.Cluster) {
				c.Spec.Topology.Workers.MachineDeployments[0].MinReadySeconds = ptr(30)
			})),
		},
		{
			// An autoscaled pool (the autoscaler's annotations, no
			// replicas) starts at its minimum, follows scale requests
			// within its bounds, and a new maximum written in Git
			// applies at once.
			name: "autoscale",
			base: testFleet(testClass("v1.30.2"), testCluster("c1", 1, 0, autoscaled(1, 4))),
			head: testFleet(testClass("v1.30.2"), testCluster("c1", 1, 0, autoscaled(1, 4))),
			setup: func(s *sim) {
				s.minRound = 12
				s.hooks[2] = func(s *sim) { s.scale = map[string]map[string]ScaleRequest{"c1": {"md": {Replicas: 3, By: "alice"}}} }
				s.hooks[5] = func(s *sim) { s.scale["c1"]["md"] = ScaleRequest{Replicas: 9, By: "bob"} }
				s.hooks[8] = func(s *sim) {
					s.setFleet(testFleet(testClass("v1.30.2"), testCluster("c1", 1, 0, autoscaled(1, 2))))
				}
			},
		},
		{
			name: "waves-second-fails",
			base: wavesFleet("v1.29.4"),
			head: wavesFleet("v1.30.2"),
			setup: func(s *sim) {
				s.fail = func(m *ObservedMachine) bool { return m.Cluster == "stage-b" && m.Version == "v1.30.2" }
			},
			check: func(t *testing.T, s *sim) {
				var cr ClassRollout
				for _, c := range s.last.Classes {
					cr = c
				}
				if !cr.Halted || strings.Join(cr.Failed, ",") != "stage-b" {
					t.Errorf("rollout = %+v, want halted with stage-b failed", cr)
				}
				for _, m := range s.machines {
					if strings.HasPrefix(m.Cluster, "prod") && m.Version != "v1.29.4" {
						t.Errorf("third wave machine %s moved to %s", m.Name, m.Version)
					}
				}
				// Nothing moves in the third wave, and nothing will
				// until a person releases the halt: its clusters wait
				// on it, and say so, not RollingOut for their wave.
				for _, c := range s.last.Clusters {
					if strings.HasPrefix(c.Name, "prod") && (c.Phase != PhaseWaiting || !c.Has(CondRolloutHalted) || c.Has(CondWaitingForWave)) {
						t.Errorf("%s is %s with %+v: want Waiting, RolloutHalted", c.Name, c.Phase, c.Conditions)
					}
				}
			},
		},
		{
			name: "cluster-deletion",
			base: testFleet(testClass("v1.30.2"), testCluster("c1", 3, 3), testCluster("c2", 1, 1)),
			head: testFleet(testClass("v1.30.2"), testCluster("c2", 1, 1)),
			check: func(t *testing.T, s *sim) {
				for _, m := range s.machines {
					if m.Cluster == "c1" {
						t.Errorf("machine %s of removed cluster left", m.Name)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := converged(t, tt.base, tt.head)
			s.check = checkInvariants(t)
			if tt.setup != nil {
				tt.setup(s)
			}
			s.run(200)
			golden(t, "rollout/"+tt.name, s.log.String())
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

func first[A, B any](a A, _ B) A  { return a }
func second[A, B any](_ A, b B) B { return b }

func onDelete(c *v1alpha1.Cluster) {
	c.Spec.Topology.Workers.MachineDeployments[0].Rollout = &v1alpha1.MachineRollout{Strategy: &v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.StrategyOnDelete}}
}

// classHealth gives the class's worker class a health check: Ready
// Unknown for 30s, at most maxInFlight machines replaced at once.
func classHealth(cc *v1alpha1.ClusterClass, maxInFlight int) *v1alpha1.ClusterClass {
	cc.Spec.Workers.MachineDeployments[0].HealthCheck = &v1alpha1.HealthRules{
		Checks:      v1alpha1.HealthChecks{UnhealthyNodeConditions: []v1alpha1.UnhealthyNodeCondition{{Type: "Ready", Status: "Unknown", TimeoutSeconds: 30}}},
		Remediation: v1alpha1.HealthRemediation{MaxInFlight: v1alpha1.Int(maxInFlight)},
	}
	return cc
}

// userLabelMHC labels c1's workers example.com/tier: batch through the
// cluster's metadata and adds a health check selecting that label.
func userLabelMHC(f *v1alpha1.Fleet) *v1alpha1.Fleet {
	f.Clusters[0].Spec.Topology.Workers.MachineDeployments[0].Metadata.Labels = map[string]string{"example.com/tier": "batch"}
	f = withMHC(f, nil)
	f.HealthChecks[0].Spec.Selector = v1alpha1.LabelSelector{MatchLabels: map[string]string{"example.com/tier": "batch"}}
	return f
}

// autoscaled gives the cluster's pool md the autoscaler's annotations and
// no replicas.
func autoscaled(lo, hi int) clusterOpt {
	return func(c *v1alpha1.Cluster) {
		md := &c.Spec.Topology.Workers.MachineDeployments[0]
		md.Replicas = nil
		md.Metadata.Annotations = map[string]string{
			v1alpha1.AnnotationAutoscalerMin: strconv.Itoa(lo), v1alpha1.AnnotationAutoscalerMax: strconv.Itoa(hi)}
	}
}

// withStandalone adds a standalone MachineDeployment "extra" of the given
// replicas and remediation.maxInFlight to cluster c1.
func withStandalone(f *v1alpha1.Fleet, replicas int, maxInFlight *v1alpha1.IntOrPercent) *v1alpha1.Fleet {
	f.MachineDeployments = append(f.MachineDeployments, &v1alpha1.MachineDeployment{
		Metadata: v1alpha1.ObjectMeta{Name: "extra"},
		Source:   v1alpha1.Source{Path: "clusters/c1-extra.yaml", Line: 1},
		Spec: v1alpha1.MachineDeploymentSpec{ClusterName: "c1", Replicas: ptr(replicas),
			Template:    v1alpha1.MachineTemplate{Provider: "inmemory", Spec: map[string]any{"cpus": 4}},
			Remediation: &v1alpha1.MachineDeploymentRemediation{MaxInFlight: maxInFlight}},
	})
	return f
}

func inRange(f *v1alpha1.Fleet, r string) *v1alpha1.Fleet {
	f.HealthChecks[0].Spec.Remediation.TriggerIf.UnhealthyInRange = r
	return f
}

func withMHC(f *v1alpha1.Fleet, maxUnhealthy *v1alpha1.IntOrPercent) *v1alpha1.Fleet {
	f.HealthChecks = append(f.HealthChecks, &v1alpha1.MachineHealthCheck{
		Metadata: v1alpha1.ObjectMeta{Name: "c1-workers"},
		Source:   v1alpha1.Source{Path: "clusters/c1-health.yaml", Line: 1},
		Spec: v1alpha1.MachineHealthCheckSpec{
			ClusterName: "c1",
			Selector:    v1alpha1.LabelSelector{MatchExpressions: []v1alpha1.LabelSelectorRequirement{{Key: v1alpha1.LabelDeployment, Operator: "Exists"}}},
			HealthRules: v1alpha1.HealthRules{
				Checks: v1alpha1.HealthChecks{NodeStartupTimeoutSeconds: ptr(300),
					UnhealthyNodeConditions: []v1alpha1.UnhealthyNodeCondition{
						{Type: "Ready", Status: "Unknown", TimeoutSeconds: 30}, {Type: "Ready", Status: "False", TimeoutSeconds: 60}}},
				Remediation: v1alpha1.HealthRemediation{TriggerIf: &v1alpha1.RemediationTrigger{UnhealthyLessThanOrEqualTo: maxUnhealthy}},
			},
		},
	})
	return f
}

func wavesFleet(version string) *v1alpha1.Fleet {
	class := testClass(version)
	class.Spec.Rollout = &v1alpha1.RolloutSpec{Waves: []v1alpha1.RolloutWave{
		{Name: "canary", Selector: v1alpha1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}},
		{Name: "staging", Selector: v1alpha1.LabelSelector{MatchLabels: map[string]string{"tier": "staging"}}, MaxConcurrent: v1alpha1.Int(1)},
		{Name: "production", Selector: v1alpha1.LabelSelector{MatchLabels: map[string]string{"tier": "prod"}}, MaxConcurrent: v1alpha1.Percent(50)},
	}}
	return testFleet(class,
		testCluster("canary-a", 1, 1, labels("tier", "canary")),
		testCluster("prod-a", 1, 1, labels("tier", "prod")),
		testCluster("prod-b", 1, 1, labels("tier", "prod")),
		testCluster("stage-a", 1, 1, labels("tier", "staging")),
		testCluster("stage-b", 1, 1, labels("tier", "staging")),
	)
}

// sicken makes the heartbeats of the n oldest machines of a pool say they
// are not healthy (their Ready condition False).
func (s *sim) sicken(pool string, n int) {
	if s.sick == nil {
		s.sick = map[string]bool{}
	}
	for _, m := range s.oldest(pool, n) {
		s.sick[m.Name] = true
	}
}

// kill stops heartbeats of the n oldest machines of a pool.
func (s *sim) kill(pool string, n int) {
	for _, m := range s.oldest(pool, n) {
		s.dead[m.Name] = true
	}
}

// deleteOldest deletes the n oldest machines of a pool behind the planner's
// back, as a person would with OnDelete.
func (s *sim) deleteOldest(pool string, n int) {
	for _, m := range s.oldest(pool, n) {
		s.logf("(before round %d someone deletes %s)\n", s.round, m.Name)
		delete(s.machines, m.Name)
	}
}

func (s *sim) oldest(pool string, n int) []ObservedMachine {
	var out []ObservedMachine
	for _, m := range s.observed() {
		if m.Deployment == pool && len(out) < n {
			out = append(out, m)
		}
	}
	return out
}

// checkInvariants returns the rules that must hold after every round: per
// rolling pool, no more than replicas+maxSurge machines and no fewer than
// replicas-maxUnavailable ready (unless it already was so before the round,
// e.g. a scale down or a dead machine); workers never newer than the
// control plane.
func checkInvariants(t testing.TB) func(s *sim, before, after []ObservedMachine) {
	return func(s *sim, before, after []ObservedMachine) {
		t.Helper()
		checkFleetRules(t, s, before)
		for _, dc := range s.desired.Clusters {
			dc = Scaled(dc, s.scale[dc.Name]) // an autoscaled pool's size is the daemon's
			// The strategies and health checks the cluster acts on: its admission's.
			dc = admitted(dc, s.records.Clusters[dc.Name].Admission)
			for i := range dc.Deployments {
				p := &dc.Deployments[i]
				if p.Strategy.Type != v1alpha1.StrategyRollingUpdate {
					continue
				}
				nb, rb := countPool(s, dc, before, p.Name)
				na, ra := countPool(s, dc, after, p.Name)
				if limit := p.Replicas + p.Strategy.MaxSurge; na > limit && na > nb {
					t.Errorf("round %d: %s/%s has %d machines, more than replicas+maxSurge %d", s.round, dc.Name, p.Name, na, limit)
				}
				if floor := p.Replicas - p.Strategy.MaxUnavailable; ra < floor && ra < rb {
					t.Errorf("round %d: %s/%s has %d ready, fewer than replicas-maxUnavailable %d", s.round, dc.Name, p.Name, ra, floor)
				}
			}
		}
		cpMin := map[string]string{}
		for _, m := range after {
			if m.Role == wire.RoleControlPlane && (cpMin[m.Cluster] == "" || compareVersions(m.Version, cpMin[m.Cluster]) < 0) {
				cpMin[m.Cluster] = m.Version
			}
		}
		for _, m := range after {
			if m.Role == wire.RoleWorker && cpMin[m.Cluster] != "" && compareVersions(m.Version, cpMin[m.Cluster]) > 0 {
				t.Errorf("round %d: worker %s runs %s, newer than control plane %s", s.round, m.Name, m.Version, cpMin[m.Cluster])
			}
		}
	}
}

// countPool counts a pool's machines (Deleting ones included: they still
// exist) and its ready machines: those the planner can see are ready (a
// machine that died counts until its health check's timeout says so).
func countPool(s *sim, dc *DesiredCluster, ms []ObservedMachine, pool string) (n, ready int) {
	for i := range ms {
		m := &ms[i]
		if m.Cluster != dc.Name || m.Deployment != pool || m.Phase == wire.PhaseDeleted {
			continue
		}
		n++
		if why, _ := unhealthy(m, dc, s.now); m.Phase != wire.PhaseDeleting && m.Ready() && why == "" {
			ready++
		}
	}
	return n, ready
}

// TestRolloutsSinceReusesOnlyWhatIsTheSame: a class keeps the last
// decision while its clusters' summaries and its record are those it was
// decided on, and is decided again, as Rollouts would, when either moves.
func TestRolloutsSinceReusesOnlyWhatIsTheSame(t *testing.T) {
	other := testClass("v1.30.2")
	other.Metadata.Name = "other"
	f := testFleet(testClass("v1.30.2"), testCluster("a1", 1, 1), testCluster("a2", 1, 1))
	f.Classes = append(f.Classes, other)
	for _, n := range []string{"b1", "b2"} {
		c := testCluster(n, 1, 1)
		c.Spec.Topology.ClassRef.Name = "other"
		f.Clusters = append(f.Clusters, c)
	}
	d, probs := Expand(f)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	now := simStart
	sums := map[string]Summary{}
	for _, dc := range d.Clusters {
		sums[dc.Name] = Summarize(dc, nil, nil, now)
	}
	records := map[string]RolloutRecord{}
	var prevSums *Summaries // the summaries kept from decision to decision
	decide := func(prev *Gates) *Gates {
		t.Helper()
		if prevSums == nil {
			prevSums = NewSummaries(len(sums))
		}
		for n, sum := range sums {
			prevSums.Set(n, sum)
		}
		g := RolloutsSince(prev, d, prevSums, records, now)
		fresh := Rollouts(d, sums, records, now)
		if diff := cmp.Diff(fresh.Classes(), g.Classes()); diff != "" {
			t.Fatalf("classes differ from Rollouts' (-fresh +since):\n%s", diff)
		}
		if diff := cmp.Diff(fresh.Changed(), g.Changed()); diff != "" {
			t.Fatalf("changed records differ from Rollouts' (-fresh +since):\n%s", diff)
		}
		for _, dc := range d.Clusters {
			if fresh.For(dc.Name) != g.For(dc.Name) {
				t.Fatalf("%s: gate %+v, Rollouts' %+v", dc.Name, g.For(dc.Name), fresh.For(dc.Name))
			}
		}
		for _, rr := range g.Changed() {
			records[rr.Class] = rr
		}
		return g
	}
	reused := func(prev, g *Gates, class string) bool { return prev.byClass[class] == g.byClass[class] }

	g1 := decide(nil)
	if len(g1.Changed()) != 2 {
		t.Fatalf("a first decision records %d rollouts, want 2", len(g1.Changed()))
	}
	g2 := decide(g1)
	if !reused(g1, g2, "standard") || !reused(g1, g2, "other") {
		t.Fatal("nothing changed, yet a class was decided again")
	}
	now = now.Add(time.Minute)
	s := sums["a1"]
	s.Skip = true // paused
	sums["a1"] = s
	g3 := decide(g2)
	if reused(g2, g3, "standard") || !reused(g2, g3, "other") {
		t.Fatal("a summary of class standard moved: want standard decided again and other kept")
	}
	delete(records, "other")
	g4 := decide(g3)
	if !reused(g3, g4, "standard") || reused(g3, g4, "other") {
		t.Fatal("class other's record is gone: want other decided again and standard kept")
	}
	if ch := g4.Changed(); len(ch) != 1 || ch[0].Class != "other" || !ch[0].Started.Equal(now) {
		t.Fatalf("changed records %+v, want other's new rollout started %s", ch, now)
	}
}
