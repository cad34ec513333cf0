package planner

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// randomFleet makes a fleet of a few clusters with random sizes and
// strategies, at version ver, with machine spec size cpus.
func randomFleet(rng *rand.Rand, ver string, cpus int) *v1alpha1.Fleet {
	class := testClass(ver, "v1.30.3")
	class.Spec.Workers.MachineDeployments[0].Template.Spec["cpus"] = cpus
	class.Spec.Workers.MachineDeployments = append(class.Spec.Workers.MachineDeployments, v1alpha1.MachineDeploymentClass{
		Class: "gpu", Template: v1alpha1.MachineTemplate{Provider: "inmemory", Spec: map[string]any{"gpus": 1}}})
	f := testFleet(class)
	for i := range 1 + rng.Intn(3) {
		c := testCluster(fmt.Sprintf("c%d", i), []int{1, 3, 5}[rng.Intn(3)], rng.Intn(9))
		mds := &c.Spec.Topology.Workers.MachineDeployments
		if rng.Intn(2) == 0 {
			*mds = append(*mds, v1alpha1.MachineDeploymentTopology{Class: "gpu", Name: "gpu", Replicas: ptr(rng.Intn(5)), FailureDomain: "zone-b"})
		}
		for j := range *mds {
			(*mds)[j].Strategy = randomStrategy(rng)
		}
		f.Clusters = append(f.Clusters, c)
	}
	return f
}

func randomStrategy(rng *rand.Rand) *v1alpha1.MachineDeploymentStrategy {
	if rng.Intn(6) == 0 {
		return &v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.StrategyOnDelete}
	}
	val := func() *v1alpha1.IntOrPercent {
		switch rng.Intn(3) {
		case 0:
			return nil
		case 1:
			return v1alpha1.Int(rng.Intn(3))
		}
		return v1alpha1.Percent(rng.Intn(101))
	}
	ru := &v1alpha1.RollingUpdateStrategy{MaxSurge: val(), MaxUnavailable: val()}
	if ru.MaxSurge != nil && ru.MaxUnavailable != nil && ru.MaxSurge.Value == 0 && ru.MaxUnavailable.Value == 0 {
		ru.MaxSurge = v1alpha1.Int(1) // the schema rejects 0/0
	}
	return &v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.StrategyRollingUpdate, RollingUpdate: ru}
}

// TestRolloutProperties upgrades generated fleets (a version bump, often
// two minors through the class's list, sometimes with a spec change too)
// with random provisioning delays and checks, after every round, the
// invariants of checkInvariants, and that every rollout converges within a
// bound proportional to the number of machines.
func TestRolloutProperties(t *testing.T) {
	for seed := int64(1); seed <= 60; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			base := randomFleet(rand.New(rand.NewSource(seed)), "v1.29.4", 4)
			headVer := []string{"v1.30.3", "v1.31.0", "v1.29.4"}[rng.Intn(3)]
			cpus := []int{4, 8}[rng.Intn(2)]
			head := randomFleet(rand.New(rand.NewSource(seed)), headVer, cpus)
			s := newSim(t, base)
			s.rng = rand.New(rand.NewSource(seed))
			s.quiet = true
			s.run(400)
			s.setFleet(head)
			s.check = checkInvariants(t)
			machines := len(s.machines)
			s.run(20 + 12*machines)
			for _, dc := range s.desired.Clusters {
				if hasOnDelete(dc) {
					// Outdated OnDelete machines stay until someone deletes
					// them, and hold a chained upgrade back: the status says so.
					continue
				}
				for _, m := range s.machines {
					if m.Cluster != dc.Name {
						continue
					}
					_, pool := dc.pool(m.Deployment)
					if m.Version != headVer {
						t.Errorf("%s runs %s after convergence, want %s", m.Name, m.Version, headVer)
					}
					if pool.Strategy.Type != v1alpha1.StrategyOnDelete && m.TemplateHash != pool.TemplateHash {
						t.Errorf("%s has template %s after convergence, want %s", m.Name, m.TemplateHash, pool.TemplateHash)
					}
				}
			}
		})
	}
}

func hasOnDelete(dc *DesiredCluster) bool {
	for _, p := range dc.Deployments {
		if p.Strategy.Type == v1alpha1.StrategyOnDelete && p.Replicas > 0 {
			return true
		}
	}
	return false
}
