package reconciler

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// handleEvent applies a worker's event to the machine's record and acks it
// once the record is stored. Malformed events are terminated: they can
// never be applied and must not block the stream.
func (r *Reconciler) handleEvent(ctx context.Context, m jetstream.Msg) {
	ev, err := wire.DecodeEvent(m.Data())
	if err != nil {
		r.log.Warn().Err(err).Str("subject", m.Subject()).Msg("terminating malformed event")
		r.metrics.Malformed.WithLabelValues("event").Inc()
		_ = m.Term()
		return
	}
	rec := r.machines[ev.Cluster][ev.Machine]
	if rec == nil {
		// A machine this daemon no longer tracks (deleted, or a stray
		// worker): nothing to update.
		_ = m.Ack()
		return
	}
	if !r.applyEvent(rec, ev) {
		_ = m.Ack()
		return
	}
	if ev.Phase == wire.PhaseDeleted {
		if err := r.kv.Delete(ctx, rec.key()); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			r.log.Error().Err(err).Msg("cannot remove machine record; event will be redelivered")
			_ = m.Nak()
			return
		}
		r.remove(rec.Cluster, rec.Name)
	} else {
		if !r.save(ctx, rec) {
			_ = m.Nak()
			return
		}
		r.dirty[rec.Cluster] = true
	}
	_ = m.Ack()
}

// applyEvent updates rec from ev and reports whether anything changed.
// An event about another task than the record's current one (a late
// "Running" of a machine already being deleted) only updates what the
// provider knows of the machine, never its phase.
func (r *Reconciler) applyEvent(rec *Record, ev wire.Event) bool {
	changed := false
	set := func(dst *string, v string) {
		if v != "" && *dst != v {
			*dst = v
			changed = true
		}
	}
	set(&rec.ProviderID, ev.ProviderID)
	if len(ev.Addresses) > 0 && !equalStrings(rec.Addresses, ev.Addresses) {
		rec.Addresses, changed = ev.Addresses, true
	}
	current := ev.TaskID == "" || ev.TaskID == rec.TaskID
	if !current {
		return changed
	}
	if ev.Phase != rec.Phase {
		r.log.Info().Str(logCluster, rec.Cluster).Str(logMachine, rec.Name).
			Str("from", string(rec.Phase)).Str("to", string(ev.Phase)).Str("message", ev.Message).Msg("machine phase")
		switch ev.Phase {
		case wire.PhaseRunning, wire.PhaseDeleted:
			r.metrics.TasksCompleted.WithLabelValues(string(rec.task().Operation)).Inc()
		case wire.PhaseFailed:
			r.metrics.TasksFailed.WithLabelValues(string(rec.task().Operation)).Inc()
		}
		rec.Phase, changed = ev.Phase, true
	}
	if ev.Phase == wire.PhaseRunning && rec.LastHeartbeat.Before(rec.Created.Add(time.Nanosecond)) {
		// The worker saw the machine come up after it was created: that is
		// the first sign of health, and the only one from providers whose
		// machines send no heartbeats (inmemory).
		rec.LastHeartbeat, rec.Healthy = r.o.Now(), true
	}
	set(&rec.Version, ev.Version)
	if rec.Message != ev.Message {
		rec.Message, changed = ev.Message, true
	}
	return changed
}

// handleHeartbeat notes a machine's heartbeat in memory. The cluster is
// re-planned only when the heartbeat changes what the planner sees: the
// first heartbeat after creation (the machine becomes ready) or a change
// of health or version.
func (r *Reconciler) handleHeartbeat(m *nats.Msg) {
	hb, err := wire.DecodeHeartbeat(m.Data)
	if err != nil {
		// Heartbeats are not stored, so there is nothing to terminate;
		// logged at debug level, since a broken node sends one every few
		// seconds.
		r.log.Debug().Err(err).Str("subject", m.Subject).Msg("ignoring malformed heartbeat")
		r.metrics.Malformed.WithLabelValues("heartbeat").Inc()
		return
	}
	rec := r.machines[hb.Cluster][hb.Machine]
	if rec == nil {
		return
	}
	at := r.o.Now()
	fresh := rec.LastHeartbeat.Before(rec.Created) || rec.LastHeartbeat.IsZero()
	if fresh || rec.Healthy != hb.Healthy || (hb.Version != "" && rec.Version != hb.Version) {
		r.dirty[rec.Cluster] = true
	}
	rec.LastHeartbeat, rec.Healthy = at, hb.Healthy
	if hb.Version != "" {
		rec.Version = hb.Version
	}
}

// checkTime wakes clusters whose machines time may have made unhealthy,
// and publishes again the tasks left unanswered past the task timeout.
func (r *Reconciler) checkTime(ctx context.Context) {
	now := r.o.Now()
	for cluster, ms := range r.machines {
		checked := r.desired != nil && r.desired.Cluster(cluster) != nil && len(r.desired.Cluster(cluster).HealthChecks) > 0
		for _, rec := range ms {
			if rec.InFlight() && !rec.Published.IsZero() && now.Sub(rec.Published) > r.o.TaskTimeout {
				r.log.Warn().Str(logCluster, cluster).Str(logMachine, rec.Name).Str("task", rec.TaskID).Msg("no answer to task; publishing it again")
				r.publish(ctx, rec)
			}
			if checked && r.stale(rec, now) {
				r.dirty[cluster] = true
			}
		}
	}
}

// stale reports whether the machine's health may have changed by the
// passing of time alone: a running machine whose heartbeats stopped, or a
// machine still not running. The planner decides with the real timeouts.
func (r *Reconciler) stale(rec *Record, now time.Time) bool {
	switch rec.Phase {
	case wire.PhaseRunning:
		return !rec.LastHeartbeat.IsZero() && now.Sub(rec.LastHeartbeat) > staleAfter
	case wire.PhasePending, wire.PhaseProvisioning:
		return now.Sub(rec.Created) > staleAfter
	}
	return false
}

// staleAfter is below any sensible unhealthyTimeout, so no timeout is missed
// by more than one tick.
const staleAfter = 3 * time.Second

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
