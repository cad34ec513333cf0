package reconciler

import "github.com/gitfleet/gitfleet/reconciler/status"

// orphanList is fleet.yaml's list of orphans.
func (r *Reconciler) orphanList() []status.Orphan { return nil }
