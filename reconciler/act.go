package reconciler

import (
	"context"
	"encoding/json"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// act carries out one step: the machine's record is written first (Pending
// for a create, Deleting for a delete), then the task is published. A daemon
// that dies in between finds the record at start and publishes the same task
// again (same ID, deduplicated) instead of inventing another machine.
func (r *Reconciler) act(ctx context.Context, s planner.Step, planID string) bool {
	m := s.Machine
	log := r.log.With().Str(logCluster, m.Cluster).Str(logMachine, m.Name).Logger()
	rec := r.machines[m.Cluster][m.Name]
	switch s.Op {
	case wire.OpCreate:
		if rec != nil {
			return false // the planner never reuses a name; already intended
		}
		rec = &Record{
			ObservedMachine: planner.ObservedMachine{
				Name: m.Name, Cluster: m.Cluster, Deployment: m.Deployment, Role: m.Role,
				Provider: m.Provider, Version: m.Version, TemplateHash: m.TemplateHash,
				Phase: wire.PhasePending, Created: r.o.Now(), Labels: m.Labels,
			},
			Spec: m.Spec, FailureDomain: m.FailureDomain,
		}
	case wire.OpDelete:
		if rec == nil || rec.Phase == wire.PhaseDeleting {
			return false
		}
		rec.Phase = wire.PhaseDeleting
	default:
		return false
	}
	rec.TaskID = taskID(s.Op, m.Cluster, m.Name)
	rec.PlanID = planID
	if r.rev != nil && (s.Op == wire.OpCreate || rec.SourceCommit == "") {
		rec.SourceCommit = r.rev.Commit
	}
	log.Info().Str("op", string(s.Op)).Str("reason", s.Reason).Msg("publishing task")
	if !r.save(ctx, rec) {
		return false
	}
	r.put(rec)
	return r.publish(ctx, rec)
}

// save writes a record to the machines bucket.
func (r *Reconciler) save(ctx context.Context, rec *Record) bool {
	data, err := json.Marshal(rec)
	if err == nil {
		_, err = r.kv.Put(ctx, rec.key(), data)
	}
	if err != nil {
		r.log.Error().Err(err).Str(logCluster, rec.Cluster).Str(logMachine, rec.Name).Msg("cannot record machine; step skipped, will be planned again")
		r.dirty[rec.Cluster] = true
		return false
	}
	return true
}

// publish sends the task the record says is in progress.
func (r *Reconciler) publish(ctx context.Context, rec *Record) bool {
	t := rec.task()
	if _, err := r.pub.Publish(ctx, t); err != nil {
		r.log.Error().Err(err).Str("task", t.ID).Msg("publish failed; it will be retried after the task timeout")
		return false
	}
	rec.Published = r.o.Now()
	r.metrics.TasksPublished.WithLabelValues(string(t.Operation)).Inc()
	return true
}
