package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

func cpHealthCheck(f *v1alpha1.Fleet) *v1alpha1.Fleet {
	f = withMHC(f, nil)
	f.HealthChecks[0].Spec.Selector = v1alpha1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelControlPlane: "true"}}
	return f
}

// TestControlPlaneRemediationKeepsQuorum: one dead control-plane machine of
// three is replaced; with two dead, deleting one would leave no quorum, so
// remediation is blocked and the status says why.
func TestControlPlaneRemediationKeepsQuorum(t *testing.T) {
	f := cpHealthCheck(testFleet(testClass("v1.30.2"), testCluster("c1", 3, 1)))
	s := newSim(t, f)
	s.quiet = true
	s.run(50)
	s.quiet = false
	s.kill("", 1)
	s.minRound = s.round + 6
	s.run(50)
	if !strings.Contains(s.log.String(), "remediate control plane: no heartbeat") {
		t.Errorf("dead control-plane machine not replaced:\n%s", s.log.String())
	}
	if c := s.last.Clusters[0]; c.Phase != PhaseProvisioned {
		t.Errorf("phase %s after remediation", c.Phase)
	}

	s.log.Reset()
	s.kill("", 2)
	s.minRound = s.round + 6
	s.run(50)
	if strings.Contains(s.log.String(), "delete") {
		t.Errorf("deleted a control-plane machine without quorum:\n%s", s.log.String())
	}
	c := s.last.Clusters[0]
	if !c.Has(CondRemediationBlocked) || !strings.Contains(s.log.String(), "fewer than the quorum of 2") {
		t.Errorf("status does not say remediation is blocked: %+v", c.Conditions)
	}
}

// TestFirstControlPlaneFailureIsReplaced: a control-plane machine that fails
// before the cluster ever ran is replaced even with one replica.
func TestFirstControlPlaneFailureIsReplaced(t *testing.T) {
	s := newSim(t, testFleet(testClass("v1.30.2"), testCluster("c1", 1, 1)))
	failed := 0
	s.fail = func(m *ObservedMachine) bool { failed++; return failed == 1 }
	s.run(50)
	if !strings.Contains(s.log.String(), "remediate control plane: the provider reported it Failed") {
		t.Errorf("failed first machine not replaced:\n%s", s.log.String())
	}
}

// TestIncrementalMatchesPlan: the daemon's one-cluster path (Summarize,
// Rollouts, PlanCluster) gives the same steps and status as Plan.
func TestIncrementalMatchesPlan(t *testing.T) {
	s := newSim(t, wavesFleet("v1.29.4"))
	s.quiet = true
	s.run(50)
	s.setFleet(wavesFleet("v1.30.2"))
	for round := 0; round < 12; round++ {
		obs := s.observed()
		n := 0
		names := func(c, p string) string { n++; return fmt.Sprintf("%s-%s-r%d-%d", c, p, round, n) }
		full := Plan(Input{Desired: s.desired, Observed: obs, Records: s.records, Now: s.now, NewName: names})
		by := groupByCluster(obs)
		sums := map[string]Summary{}
		for _, dc := range s.desired.Clusters {
			sums[dc.Name] = Summarize(dc, s.records.Cluster(dc.Name), by[dc.Name], s.now)
		}
		g := Rollouts(s.desired, sums, s.records.Rollouts, s.now)
		n = 0
		var steps []Step
		for i, dc := range s.desired.Clusters {
			r := PlanCluster(ClusterInput{Name: dc.Name, Desired: dc, Machines: by[dc.Name], Record: s.records.Cluster(dc.Name),
				Gate: g.For(dc.Name), Now: s.now, NewName: names})
			if r.RecordChanged != (full.Records.Clusters[dc.Name].Cluster != "") || (r.RecordChanged && !r.Record.Equal(full.Records.Clusters[dc.Name])) {
				t.Fatalf("round %d %s: record %+v, Plan says %+v", round, dc.Name, r.Record, full.Records.Clusters[dc.Name])
			}
			steps = append(steps, r.Steps...)
			if r.Status.Phase != full.Clusters[i].Phase || len(r.Status.Conditions) != len(full.Clusters[i].Conditions) {
				t.Fatalf("round %d %s: status %+v, Plan says %+v", round, dc.Name, r.Status, full.Clusters[i])
			}
		}
		if len(steps) != len(full.Steps) {
			t.Fatalf("round %d: %d steps one by one, %d from Plan", round, len(steps), len(full.Steps))
		}
		for i := range steps {
			if steps[i].Machine.Name != full.Steps[i].Machine.Name || steps[i].Op != full.Steps[i].Op {
				t.Errorf("round %d step %d: %+v vs %+v", round, i, steps[i], full.Steps[i])
			}
		}
		s.keep(full.Records)
		for _, st := range full.Steps {
			s.apply(st)
		}
		s.advance()
	}
	if s.machines == nil || countPhase(s, wire.PhaseRunning) == 0 {
		t.Fatal("simulation ran nothing")
	}
}

func countPhase(s *sim, p wire.Phase) int {
	n := 0
	for _, m := range s.machines {
		if m.Phase == p {
			n++
		}
	}
	return n
}

// TestGoneMachinesAreReplaced: after a reboot every machine is gone (the
// provider's inventory says so). No quorum rule and no maxUnhealthy
// short-circuit holds them: a machine that is gone has nothing left to
// protect, so the whole cluster is recreated, without a create backoff.
func TestGoneMachinesAreReplaced(t *testing.T) {
	zero := v1alpha1.IntOrPercent{Value: 0}
	f := cpHealthCheck(testFleet(testClass("v1.30.2"), testCluster("c1", 3, 2)))
	f = withMHC(f, &zero)
	s := newSim(t, f)
	s.quiet = true
	s.run(50)
	before := map[string]bool{}
	for name, m := range s.machines {
		before[name] = true
		m.Phase, m.Reason = wire.PhaseFailed, "NodeExited"
	}
	s.quiet = false
	s.minRound = s.round + 20
	s.run(100)
	running := 0
	for name, m := range s.machines {
		if before[name] {
			t.Errorf("gone machine %s is still there (%s)", name, m.Phase)
		}
		if m.Phase == wire.PhaseRunning {
			running++
		}
	}
	if running != 5 {
		t.Errorf("%d machines Running after the reboot, want 5:\n%s", running, s.log.String())
	}
	if c := s.last.Clusters[0]; c.Phase != PhaseProvisioned || c.ControlPlane.Failures+c.Deployments[0].Failures > 0 {
		t.Errorf("after the reboot: phase %s, control plane %+v, workers %+v", c.Phase, c.ControlPlane, c.Deployments[0])
	}
}

// TestReasonsCountInWords: a scale-down to one machine says "1 machine",
// not "1 machines", in the delete's reason the status branch records.
func TestReasonsCountInWords(t *testing.T) {
	s := newSim(t, testFleet(testClass("v1.30.2"), testCluster("c1", 1, 3)))
	s.run(50)
	s.log.Reset()
	s.setFleet(testFleet(testClass("v1.30.2"), testCluster("c1", 1, 1)))
	s.run(50)
	if log := s.log.String(); !strings.Contains(log, "to 1 machine") || strings.Contains(log, "1 machines") {
		t.Errorf("the scale-down to one machine does not say \"to 1 machine\":\n%s", log)
	}
}
