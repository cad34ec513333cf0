package planner

import (
	"fmt"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// bumpFleet is n clusters of 3 control-plane + 10 workers whose class moves
// from v1.29.4 to v1.30.2, with every machine Running at v1.29.4 and every
// cluster admitted to the old revision, done.
func bumpFleet(n int) (*Desired, []ObservedMachine, Records, time.Time) {
	now := simStart.Add(time.Hour)
	build := func(ver string) *Desired {
		class := testClass(ver)
		class.Spec.Rollout = &v1alpha1.RolloutSpec{Waves: []v1alpha1.RolloutWave{
			{Name: "canary", Selector: v1alpha1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}},
			{Name: "rest", MaxConcurrent: v1alpha1.Percent(10)},
		}}
		f := testFleet(class)
		for i := range n {
			tier := "prod"
			if i%100 == 0 {
				tier = "canary"
			}
			f.Clusters = append(f.Clusters, testCluster(fmt.Sprintf("c%05d", i), 3, 10, labels("tier", tier)))
		}
		d, _ := Expand(f)
		return d
	}
	old, head := build("v1.29.4"), build("v1.30.2")
	ms := make([]ObservedMachine, 0, n*13)
	for _, dc := range old.Clusters {
		add := func(p *Pool, k int) {
			ms = append(ms, ObservedMachine{
				Name: fmt.Sprintf("%s-%s-%d", dc.Name, PoolName(p.Name), k), Cluster: dc.Name, Deployment: p.Name, Role: p.Role,
				Provider: p.Provider, Version: p.Version, TemplateHash: p.TemplateHash, Phase: wire.PhaseRunning,
				Created: simStart, LastHeartbeat: now.Add(-time.Second), Healthy: true, Labels: p.Labels,
			})
		}
		for k := range 3 {
			add(&dc.ControlPlane, k)
		}
		for k := range 10 {
			add(&dc.Deployments[0], k)
		}
	}
	recs := Plan(Input{Desired: old, Observed: ms, Now: now}).Records
	return head, ms, recs, now
}

func BenchmarkPlanVersionBump(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			d, ms, recs, now := bumpFleet(n)
			names := 0
			newName := func(c, p string) string { names++; return fmt.Sprintf("%s-%s-x%d", c, p, names) }
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var res Result
			for range b.N {
				res = Plan(Input{Desired: d, Observed: ms, Records: recs, Now: now, NewName: newName})
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/plan")
			b.ReportMetric(float64(len(res.Steps)), "steps")
			b.ReportMetric(float64(len(ms)), "machines")
		})
	}
}

// BenchmarkPlanOneCluster is the daemon's path for one machine's event:
// re-summarise one cluster, decide the gates from the last decision
// (RolloutsSince) and plan that cluster. The event does not move the
// cluster's summary, as most do not (a heartbeat, one machine of several
// Running); one that does decides its class again, as Rollouts does.
func BenchmarkPlanOneCluster(b *testing.B) {
	d, ms, recs, now := bumpFleet(10000)
	by := groupByCluster(ms)
	sums := NewSummaries(len(d.Clusters))
	for _, dc := range d.Clusters {
		sums.Set(dc.Name, Summarize(dc, recs.Cluster(dc.Name), by[dc.Name], now))
	}
	name := d.Clusters[5000].Name
	newName := func(c, p string) string { return c + "-" + p + "-x" }
	g := RolloutsSince(nil, d, sums, recs.Rollouts, now)
	for _, rr := range g.Changed() {
		recs.Rollouts[rr.Class] = rr // saved, as the daemon saves them
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		dc := d.Cluster(name)
		sums.Set(name, Summarize(dc, recs.Cluster(name), by[name], now))
		g = RolloutsSince(g, d, sums, recs.Rollouts, now)
		PlanCluster(ClusterInput{Name: name, Desired: dc, Machines: by[name], Record: recs.Cluster(name), Gate: g.For(name), Now: now, NewName: newName})
	}
}

// BenchmarkExpand is the cost of a new revision: expanding 10,000 clusters.
func BenchmarkExpand(b *testing.B) {
	class := testClass("v1.30.2")
	f := testFleet(class)
	for i := range 10000 {
		f.Clusters = append(f.Clusters, testCluster(fmt.Sprintf("c%05d", i), 3, 10))
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		Expand(f)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/expand")
}

// BenchmarkExpandOneClusterChanged is a daemon's one-cluster commit at
// 10,000 clusters: ExpandReusing walks every cluster's input keys to find
// the one that changed; ExpandChanged is told it by the source.
func BenchmarkExpandOneClusterChanged(b *testing.B) {
	f := testFleet(testClass("v1.30.2"))
	keys := map[ObjectRef]string{{v1alpha1.KindClusterClass, "standard"}: "class"}
	for i := range 10000 {
		name := fmt.Sprintf("c%05d", i)
		f.Clusters = append(f.Clusters, testCluster(name, 3, 10))
		keys[ObjectRef{v1alpha1.KindCluster, name}] = "v0 " + name
	}
	key := func(kind, name string) string { return keys[ObjectRef{kind, name}] }
	version := 0 // of the cluster files, across rounds
	for _, how := range []struct {
		name   string
		expand func(prev *Desired, changed []ObjectRef) *Desired
	}{
		{"reusing", func(prev *Desired, _ []ObjectRef) *Desired { d, _ := ExpandReusing(prev, f, key); return d }},
		{"changed", func(prev *Desired, changed []ObjectRef) *Desired {
			d, _ := ExpandChanged(prev, f, key, changed)
			return d
		}},
	} {
		b.Run(how.name, func(b *testing.B) {
			b.ReportAllocs()
			// Each round starts from the fleet as the last one left it
			// (a round of b.N commits changes it).
			d, _ := ExpandReusing(nil, f, key)
			b.ResetTimer()
			for i := range b.N {
				c := f.Clusters[i%len(f.Clusters)]
				c.Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(10 + i%2)
				version++
				keys[ObjectRef{v1alpha1.KindCluster, c.Metadata.Name}] = fmt.Sprintf("v%d %s", version, c.Metadata.Name)
				d = how.expand(d, []ObjectRef{{v1alpha1.KindCluster, c.Metadata.Name}})
				if expanded, _, _ := d.Changes(); len(expanded) != 1 {
					b.Fatalf("%d clusters expanded, want 1", len(expanded))
				}
			}
		})
	}
}
