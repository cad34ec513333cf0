package planner

import (
	"sort"
)

// Plan computes the steps allowed right now for the whole fleet: every
// desired cluster, and every cluster that still has machines but was removed
// from the fleet. Result.Records holds the records that changed: the
// caller persists them before it carries out any step.
func Plan(in Input) Result {
	byCluster := groupByCluster(in.Observed)
	d := in.Desired
	if d == nil {
		d = &Desired{}
	}
	sums := make(map[string]Summary, len(d.Clusters))
	for _, dc := range d.Clusters {
		sums[dc.Name] = Summarize(Scaled(dc, in.Scale[dc.Name]), in.Records.Cluster(dc.Name), byCluster[dc.Name], in.Now)
	}
	gates := Rollouts(d, sums, in.Records.Rollouts, in.Now)
	names := make([]string, 0, len(byCluster)+len(d.Clusters))
	for _, dc := range d.Clusters {
		names = append(names, dc.Name)
	}
	for n := range byCluster {
		if d.Cluster(n) == nil {
			names = append(names, n)
		}
	}
	for n := range in.Records.Clusters {
		if d.Cluster(n) == nil && byCluster[n] == nil {
			names = append(names, n) // removed, machines gone: its record goes too
		}
	}
	sort.Strings(names)
	res := Result{Clusters: make([]ClusterStatus, 0, len(names)), Classes: gates.Classes()}
	for _, rr := range gates.Changed() {
		if res.Records.Rollouts == nil {
			res.Records.Rollouts = map[string]RolloutRecord{}
		}
		res.Records.Rollouts[rr.Class] = rr
	}
	for _, n := range names {
		cr := PlanCluster(ClusterInput{Name: n, Desired: d.Cluster(n), Machines: byCluster[n], Record: in.Records.Cluster(n),
			Gate: gates.For(n), Now: in.Now, NewName: in.NewName, Backoff: in.Backoff, Scale: in.Scale[n], Locate: in.Locate,
			Removed: in.Removed[n]})
		res.Steps = append(res.Steps, cr.Steps...)
		if cr.Status.Phase != PhaseDeleted {
			res.Clusters = append(res.Clusters, cr.Status)
		}
		if cr.RecordChanged {
			if res.Records.Clusters == nil {
				res.Records.Clusters = map[string]ClusterRecord{}
			}
			res.Records.Clusters[n] = cr.Record
		}
		if !cr.Wake.IsZero() && (res.Wake.IsZero() || cr.Wake.Before(res.Wake)) {
			res.Wake = cr.Wake
		}
	}
	return res
}

// Cluster returns the record of cluster name, or nil.
func (r Records) Cluster(name string) *ClusterRecord {
	if rec, ok := r.Clusters[name]; ok {
		return &rec
	}
	return nil
}

// groupByCluster splits machines by cluster without copying them when they
// already come grouped.
func groupByCluster(ms []ObservedMachine) map[string][]ObservedMachine {
	out := map[string][]ObservedMachine{}
	start := 0
	for i := 1; i <= len(ms); i++ {
		if i < len(ms) && ms[i].Cluster == ms[start].Cluster {
			continue
		}
		c := ms[start].Cluster
		if prev, ok := out[c]; ok {
			// Not contiguous: copy into a fresh slice.
			out[c] = append(append([]ObservedMachine(nil), prev...), ms[start:i]...)
		} else {
			out[c] = ms[start:i:i]
		}
		start = i
	}
	return out
}
