package reconciler

import (
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// settleRemoved forgets the removed machines the planner found nothing
// will replace (their pools were made smaller or removed meanwhile): a later
// scale-up of the pool is the spec's doing, not a replacement.
func (r *Reconciler) settleRemoved(cluster string, settled []string) {
	if len(settled) == 0 {
		return
	}
	list := slices.DeleteFunc(slices.Clone(r.removed[cluster]), func(rm planner.Removed) bool { return slices.Contains(settled, rm.Name) })
	if len(list) == 0 {
		delete(r.removed, cluster)
		return
	}
	r.removed[cluster] = list
}

// noteRemoval keeps what a stored step says about replacements: a machine
// deleted for its health or absence waits for the create that makes up for
// it (planner.ClusterInput.Removed), which names it in its cause, and then
// is forgotten. A replacement the planner makes in the pass that deletes
// the machine names it at once; one that waits for the delete to end (no
// maxSurge, a control plane) is named from this list. At most
// status.MaxDeleted are kept a cluster: a pool made smaller meanwhile may
// never replace one.
func (r *Reconciler) noteRemoval(in *intent) {
	cluster := in.next.Cluster
	list := r.removed[cluster]
	if in.replaces != "" {
		list = slices.DeleteFunc(list, func(rm planner.Removed) bool { return rm.Name == in.replaces })
	}
	if in.removal != "" && !slices.ContainsFunc(list, func(rm planner.Removed) bool { return rm.Name == in.next.Name }) {
		list = append(list, planner.Removed{Name: in.next.Name, Deployment: in.next.Deployment, Why: in.removal})
		list = list[max(len(list)-status.MaxDeleted, 0):]
	}
	if len(list) == 0 {
		delete(r.removed, cluster)
		return
	}
	r.removed[cluster] = list
}

// carryRemoved rebuilds a new leader's removed machines (noteRemoval),
// which the last leader kept in memory, from what outlived it: the
// records of machines being deleted for their health or absence, and the
// cluster's deleted list as the status branch holds it (carryDeleted), so
// that a replacement this leader makes still names the machine it
// replaces, not its pool's count. A machine that a record's cause names
// as replaced already is left out, and so is a deleted entry that does not
// say its pool (written before entries did). Those whose pools lack no
// machine, or are gone, are settled by the first pass (settleRemoved).
//
// The newest come first, unlike the list noteRemoval keeps: a removal
// whose replacement was itself removed since is still in the deleted
// list, with nothing left that names it, and it is older than the
// removals that wait, which the planner must name first (it takes a
// pool's first).
func (r *Reconciler) carryRemoved() {
	for cluster, ms := range r.machines {
		var list []planner.Removed
		for _, m := range ms {
			if m.rec.Phase != wire.PhaseDeleting {
				continue
			}
			if why := planner.RemovalOf(m.rec.Cause, m.rec.Reason); why != "" {
				list = append(list, planner.Removed{Name: m.rec.Name, Deployment: m.rec.Deployment, Why: why})
			}
		}
		if len(list) > 0 {
			r.removed[cluster] = list
		}
	}
	for cluster, deleted := range r.deleted {
		list := r.removed[cluster]
		for _, d := range deleted {
			if d.Role == "" || slices.ContainsFunc(list, func(rm planner.Removed) bool { return rm.Name == d.Name }) {
				continue
			}
			if why := planner.RemovalOf(d.Cause, d.Reason); why != "" {
				list = append(list, planner.Removed{Name: d.Name, Deployment: d.Deployment, Why: why})
			}
		}
		if len(list) > 0 {
			r.removed[cluster] = list
		}
	}
	for cluster, list := range r.removed {
		for _, m := range r.machines[cluster] {
			if name, ok := replaced(m.rec.Cause); ok {
				list = slices.DeleteFunc(list, func(rm planner.Removed) bool { return rm.Name == name })
			}
		}
		if len(list) == 0 {
			delete(r.removed, cluster)
			continue
		}
		r.removed[cluster] = list[:min(len(list), status.MaxDeleted)]
	}
}

// replaced is the machine a create's cause says it replaces
// ("replaces c1-md-0-x7k2p (gone: NodeExited)"); false for another cause.
func replaced(cause string) (string, bool) {
	rest, ok := strings.CutPrefix(cause, planner.ReplacesPrefix)
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, " (")
	return name, ok
}
