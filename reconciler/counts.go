package reconciler

import "github.com/gitfleet/gitfleet/schemas/wire"

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
	machines   map[fleetKey]int
	perCluster map[string]map[phaseKey]int
	clusters   map[clusterKey]int
	cluster    map[string]clusterKey // what each cluster counts as
}

func newFleetCounts() *fleetCounts {
	return &fleetCounts{machines: map[fleetKey]int{}, perCluster: map[string]map[phaseKey]int{},
		clusters: map[clusterKey]int{}, cluster: map[string]clusterKey{}}
}

// machine adds d machines of cluster in k.
func (c *fleetCounts) machine(cluster string, k phaseKey, d int) {
	pc := c.perCluster[cluster]
	if pc == nil {
		pc = map[phaseKey]int{}
		c.perCluster[cluster] = pc
	}
	pc[k] += d
	if pc[k] == 0 {
		delete(pc, k)
		if len(pc) == 0 {
			delete(c.perCluster, cluster)
		}
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
		for k, n := range c.perCluster[cluster] {
			c.machines[fleetKey{k, old.class}] -= n
			c.machines[fleetKey{k, class}] += n
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
