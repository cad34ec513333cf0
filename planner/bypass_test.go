package planner

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// The four ways a cluster of a later wave used to start a class rollout
// before its wave. In each, the change's machines fail in the first wave
// (canary), so the rollout halts there: no other cluster may ever get a
// machine of the new revision.

// templateChange changes the class's worker template only (cpus 4 → 8).
func templateChange(f *v1alpha1.Fleet) *v1alpha1.Fleet {
	f.Classes[0].Spec.Workers.MachineDeployments[0].Template.Spec["cpus"] = 8
	return f
}

// specChange changes both the control-plane and the worker template, so
// no pool is up to date by accident.
func specChange(f *v1alpha1.Fleet) *v1alpha1.Fleet {
	f.Classes[0].Spec.ControlPlane.MachineTemplate.Spec["cpus"] = 3
	return templateChange(f)
}

func clusterOf(f *v1alpha1.Fleet, name string) *v1alpha1.Cluster {
	for _, c := range f.Clusters {
		if c.Metadata.Name == name {
			return c
		}
	}
	panic("no cluster " + name)
}

func TestWaveBypasses(t *testing.T) {
	tests := []struct {
		name string
		base func() *v1alpha1.Fleet
		head func() *v1alpha1.Fleet
		// setup runs after base converged, before head is applied.
		setup func(s *sim)
	}{
		{
			// The control plane is unchanged, so it is up to date at once.
			name: "template-only",
			base: func() *v1alpha1.Fleet { return wavesFleet("v1.30.2") },
			head: func() *v1alpha1.Fleet { return templateChange(wavesFleet("v1.30.2")) },
		},
		{
			// prod-a's extra pool pins an older minor: its versions differ
			// forever.
			name: "pinned-pool",
			base: func() *v1alpha1.Fleet { return withPinnedPool(wavesFleet("v1.30.2"), "prod-a", "v1.29.4") },
			head: func() *v1alpha1.Fleet {
				return withPinnedPool(specChange(wavesFleet("v1.30.2")), "prod-a", "v1.29.4")
			},
		},
		{
			// stage-b has a machine provisioning when the change lands.
			name: "in-flight",
			base: func() *v1alpha1.Fleet { return wavesFleet("v1.30.2") },
			head: func() *v1alpha1.Fleet {
				f := specChange(wavesFleet("v1.30.2"))
				clusterOf(f, "stage-b").Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(2)
				return f
			},
			setup: func(s *sim) {
				// stage-b scales up first; its new machine is still
				// provisioning when the class change lands.
				f := wavesFleet("v1.30.2")
				clusterOf(f, "stage-b").Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(2)
				s.setFleet(f)
				res := s.plan()
				for _, st := range res.Steps {
					s.apply(st)
					s.delay[st.Machine.Name] = 6
				}
				s.logf("(stage-b scales up to 2 workers; %d machine provisioning)\n", len(res.Steps))
			},
		},
		{
			// prod-b scales up in the same commit as the class change.
			name: "scale-up",
			base: func() *v1alpha1.Fleet { return wavesFleet("v1.30.2") },
			head: func() *v1alpha1.Fleet {
				f := specChange(wavesFleet("v1.30.2"))
				clusterOf(f, "prod-b").Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(2)
				return f
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, head := tt.base(), tt.head()
			s := newSim(t, base)
			s.quiet = true
			s.run(100)
			s.quiet = false
			s.round = 0
			if tt.setup != nil {
				tt.setup(s)
			}
			oldHashes := poolHashes(s.desired)
			s.setFleet(head)
			newHashes := map[string]bool{}
			for h := range poolHashes(s.desired) {
				if !oldHashes[h] {
					newHashes[h] = true
				}
			}
			s.fail = func(m *ObservedMachine) bool { return newHashes[m.TemplateHash] }
			s.check = checkInvariants(t)
			s.minRound = 4
			s.run(60)
			golden(t, "rollout/bypass-"+tt.name, s.log.String())

			var reached []string
			for _, m := range s.machines {
				if newHashes[m.TemplateHash] && m.Cluster != "canary-a" {
					reached = append(reached, m.Cluster+"/"+m.Name)
				}
			}
			sort.Strings(reached)
			if len(reached) > 0 {
				t.Errorf("the change reached clusters after the first wave: %s", strings.Join(reached, ", "))
			}
			var cr ClassRollout
			for _, c := range s.last.Classes {
				cr = c
			}
			if !cr.Halted || fmt.Sprint(cr.Failed) != "[canary-a]" {
				t.Errorf("rollout = %+v, want halted with canary-a failed", cr)
			}
		})
	}
}

// withPinnedPool gives cluster a standalone MachineDeployment at version.
func withPinnedPool(f *v1alpha1.Fleet, cluster, version string) *v1alpha1.Fleet {
	f.MachineDeployments = append(f.MachineDeployments, &v1alpha1.MachineDeployment{
		Metadata: v1alpha1.ObjectMeta{Name: "legacy"},
		Source:   v1alpha1.Source{Path: "clusters/" + cluster + "-legacy.yaml", Line: 1},
		Spec: v1alpha1.MachineDeploymentSpec{ClusterName: cluster, Replicas: ptr(1), Version: version,
			Template: v1alpha1.MachineTemplate{Provider: "inmemory", Spec: map[string]any{"cpus": 2}}},
	})
	return f
}

// poolHashes is every pool template hash of d.
func poolHashes(d *Desired) map[string]bool {
	out := map[string]bool{}
	for _, dc := range d.Clusters {
		out[dc.ControlPlane.TemplateHash] = true
		for _, p := range dc.Deployments {
			out[p.TemplateHash] = true
		}
	}
	return out
}
