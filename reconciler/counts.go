package reconciler

import (
	"slices"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// phaseKey is a machine's phase and provider.
type phaseKey struct {
	phase    wire.Phase
	provider string
}

func phaseOf(rec *Record) phaseKey { return phaseKey{rec.Phase, rec.Provider} }

// fleetKey is a row of the machines gauge.
type fleetKey struct {
	phaseKey
	class string
}

// clusterKey is a row of the clusters gauge.
type clusterKey struct{ phase, class string }

// fleetCounts keeps the machines and clusters gauges' counts as records are
// put and removed and as clusters' statuses are written, so a pass costs
// what it planned, not a walk of every machine. A machine counts under its
// cluster's class as of the cluster's last status ("" until the first
// pass after a start has planned it).
type fleetCounts struct {
	machines map[fleetKey]int
	// perCluster: a cluster's machines have a phase or three, a provider
	// or two; a short list costs a tenth of a map for each of 10,000
	// clusters.
	perCluster map[string][]phaseCount
	clusters   map[clusterKey]int
	cluster    map[string]clusterKey // what each cluster counts as
}

// phaseCount is how many machines of a cluster are in a phase.
type phaseCount struct {
	phaseKey
	n int
}

func newFleetCounts() *fleetCounts {
	return &fleetCounts{machines: map[fleetKey]int{}, perCluster: map[string][]phaseCount{},
		clusters: map[clusterKey]int{}, cluster: map[string]clusterKey{}}
}

// machine adds d machines of cluster in k.
func (c *fleetCounts) machine(cluster string, k phaseKey, d int) {
	pc := c.perCluster[cluster]
	i := slices.IndexFunc(pc, func(p phaseCount) bool { return p.phaseKey == k })
	if i < 0 {
		i, pc = len(pc), append(pc, phaseCount{phaseKey: k})
	}
	if pc[i].n += d; pc[i].n == 0 {
		pc = slices.Delete(pc, i, i+1)
	}
	if len(pc) == 0 {
		delete(c.perCluster, cluster)
	} else {
		c.perCluster[cluster] = pc
	}
	c.machines[fleetKey{k, c.cluster[cluster].class}] += d
}

// setCluster counts cluster in phase and class, moving its machines' counts
// when its class changed. A cluster being deleted (no class in its status)
// keeps the class it had.
func (c *fleetCounts) setCluster(cluster, phase, class string) {
	old, ok := c.cluster[cluster]
	if class == "" {
		class = old.class
	}
	next := clusterKey{phase, class}
	if ok && old == next {
		return
	}
	if ok {
		c.clusters[old]--
	}
	c.clusters[next]++
	c.cluster[cluster] = next
	if old.class != class {
		for _, p := range c.perCluster[cluster] {
			c.machines[fleetKey{p.phaseKey, old.class}] -= p.n
			c.machines[fleetKey{p.phaseKey, class}] += p.n
		}
	}
}

// dropCluster stops counting a deleted cluster (its machines are gone).
func (c *fleetCounts) dropCluster(cluster string) {
	if old, ok := c.cluster[cluster]; ok {
		c.clusters[old]--
		delete(c.cluster, cluster)
	}
}

// export sets the gauges. Rows that fell to 0 stay, at 0, so a dashboard
// sees them empty rather than stale.
func (c *fleetCounts) export(m *Metrics) {
	for k, n := range c.machines {
		m.Machines.WithLabelValues(string(k.phase), k.class, k.provider).Set(float64(n))
	}
	for k, n := range c.clusters {
		m.Clusters.WithLabelValues(k.phase, k.class).Set(float64(n))
	}
}
