package reconciler

import (
	"slices"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/reconciler/status"
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
