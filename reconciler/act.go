package reconciler

import (
	"context"
	"errors"
	"time"
	"unique"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/internal/workers"
	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// intent is one step of a planning pass: the machine's next record,
// being saved.
type intent struct {
	cur  *machine // nil: a new machine
	next *Record
	save *Saving
	// removal and replaces are the step's Removal and Replaces: once the
	// record is stored, the machine is kept, or forgotten, as one to
	// replace (replace.go).
	removal, replaces string
}

// intend starts one step: the machine's next record is built on a copy
// (Pending for a create, Deleting for a delete) and its save is started;
// nil when the step needs nothing. The pass waits for every save, then
// puts the records in memory and publishes their tasks (carryOut). A
// daemon that dies in between finds the record at start and publishes the
// same attempt again (same message ID, deduplicated) instead of inventing
// another machine; a save that fails changes nothing, and the cluster is
// planned again.
func (r *Reconciler) intend(s planner.Step, planID string, alike *shapes) *intent {
	m := s.Machine
	cur := r.lookup(m.Cluster, m.Name)
	var next *Record
	// The planner words a cause afresh for each step ("md-0 has 3 of 10
	// machines"); the records of a pass share one copy of each.
	cause := unique.Make(s.Reason).Value()
	switch s.Op {
	case wire.OpCreate:
		if cur != nil {
			// The planner draws names no machine of the cluster has
			// (TestATakenNameIsDrawnAgain): a create under a name in use
			// would be lost, and its pool would stay short.
			r.log.Error().Str(logCluster, m.Cluster).Str(logMachine, m.Name).
				Msg("not creating a machine under a name a machine of the cluster has")
			return nil
		}
		sh := Shape{Cluster: m.Cluster, Deployment: m.Deployment, Role: m.Role, Provider: m.Provider,
			Version: m.Version, TemplateHash: m.TemplateHash, Labels: m.Labels, Annotations: m.Annotations,
			Spec: m.Spec, PlanID: planID, Cause: cause, FailureDomain: m.FailureDomain}
		if r.rev != nil {
			sh.SourceCommit = r.rev.Commit
		}
		next = &Record{Name: m.Name, Shape: alike.share(sh),
			Phase: wire.PhasePending, Created: StampOf(r.o.Now())}
		next.Init = m.Role == wire.RoleControlPlane && !r.hasControlPlane(m.Cluster)
	case wire.OpDelete:
		if cur == nil || cur.rec.Phase == wire.PhaseDeleting {
			return nil
		}
		next = cur.rec.clone()
		sh := *cur.rec.Shape
		sh.PlanID, sh.Cause = planID, cause
		if sh.SourceCommit == "" && r.rev != nil {
			sh.SourceCommit = r.rev.Commit
		}
		next.Shape = alike.share(sh)
		next.Phase = wire.PhaseDeleting
	default:
		return nil
	}
	next.setTask(s.Op)
	next.Attempt = 1
	next.Published = StampOf(r.o.Now())
	r.log.Info().Str(logCluster, m.Cluster).Str(logMachine, m.Name).Str("op", string(s.Op)).
		Str("reason", s.Reason).Msg("publishing task")
	var rev uint64
	if cur != nil {
		rev = cur.rev
	}
	return &intent{cur: cur, next: next, save: r.store.SaveAsync(next.key(), next, rev),
		removal: s.Removal, replaces: s.Replaces}
}

// shapes shares the shapes of one cluster's steps in a pass: the creates
// of a pool get one, and so do the deletes of machines that had one alike.
type shapes []*Shape

// share returns the shape of ss equal to sh, adding sh when there is none.
func (ss *shapes) share(sh Shape) *Shape {
	for _, s := range *ss {
		if s.equal(&sh) {
			return s
		}
	}
	*ss = append(*ss, &sh)
	return &sh
}

// carryOut waits for the pass's saves; each record stored is put in
// memory and its task published. It returns how many were published.
func (r *Reconciler) carryOut(ctx context.Context, intents []*intent) int {
	var ms []*machine
	for _, in := range intents {
		rev, err := in.save.Wait(ctx)
		if err != nil {
			r.saveFailed(ctx, in.next, err)
			continue
		}
		m := &machine{rec: in.next, rev: rev}
		if in.cur != nil {
			m.keep(in.cur)
		}
		r.put(m)
		r.noteRemoval(in)
		ms = append(ms, m)
	}
	if len(ms) > 0 {
		r.health.Report(ProblemStore, nil)
	}
	seals := r.sealAll(ctx, ms)
	for i, m := range ms {
		var s *sealed
		if seals != nil {
			s = &seals[i]
		}
		r.publishWith(ctx, m, s)
	}
	return len(ms)
}

// aside runs a write the loop need not wait for on its own goroutine: a
// bootstrap token's revocation or its mark of use, which the machine's
// record already makes moot (a machine without a record, or recorded as
// joined, is refused whatever its token says). A token left by a lost
// write expires.
func (r *Reconciler) aside(ctx context.Context, write func(context.Context)) {
	r.asideWG.Go(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		write(ctx)
	})
}

// sealed is a create task's bootstrap data, made before its publication.
type sealed struct {
	data []byte
	err  error
}

// sealAll makes the bootstrap data of a pass's new creates on several
// goroutines at once: each costs the PKI store round trips (the cluster's
// CA, the machine's token), which one at a time in the loop made a class
// bump with bootstrap three times as long. nil when there is nothing to
// seal (no issuer, or this replica may no longer lead: publishing will
// say so).
func (r *Reconciler) sealAll(ctx context.Context, ms []*machine) []sealed {
	if r.o.Bootstrap == nil || len(ms) == 0 || (r.o.Fence != nil && r.o.Fence() != nil) {
		return nil
	}
	out := make([]sealed, len(ms))
	workers.Each(len(ms), pkiAtOnce, func(i int) {
		// A record this pass made: its first publication, so no token
		// was issued to it yet.
		out[i].data, out[i].err = r.bootstrapOf(ctx, ms[i].rec.task(ms[i].rev), ms[i].rec, true)
	})
	return out
}

// pkiAtOnce bounds the bootstrap tokens sealed or reviewed at once (each
// costs the PKI store round trips).
const pkiAtOnce = 16

// commit saves next as the new version of cur's record (cur nil: a new
// machine) and, once it is stored, swaps it into memory and returns the
// machine. When the save fails, memory is left as it was, the error is
// reported as the loop's, and the cluster is planned again; a conflict (the
// record changed underneath) reloads the record first.
func (r *Reconciler) commit(ctx context.Context, cur *machine, next *Record) *machine {
	var rev uint64
	if cur != nil {
		rev = cur.rev
	}
	newRev, err := r.store.Save(ctx, next.key(), next, rev)
	if err != nil {
		r.saveFailed(ctx, next, err)
		return nil
	}
	return r.stored(cur, next, newRev)
}

// stored puts next, saved at revision rev, in memory in place of cur (nil:
// a new machine), keeping what only memory knows of cur (heartbeats).
func (r *Reconciler) stored(cur *machine, next *Record, rev uint64) *machine {
	r.health.Report(ProblemStore, nil)
	m := &machine{rec: next, rev: rev}
	if cur != nil {
		m.keep(cur)
	}
	r.put(m)
	return m
}

// dropped forgets cur once its record is deleted from the store.
func (r *Reconciler) dropped(ctx context.Context, cur *machine) {
	if r.o.Bootstrap != nil {
		cluster, name := cur.rec.Cluster, cur.rec.Name
		r.aside(ctx, func(ctx context.Context) {
			if err := r.o.Bootstrap.Revoke(ctx, cluster, name); err != nil {
				r.log.Warn().Err(err).Str(logCluster, cluster).Str(logMachine, name).Msg("revoking the machine's bootstrap token")
			}
		})
	}
	r.remove(cur.rec.Cluster, cur.rec.Name)
	d := status.DeletedMachine{Name: cur.rec.Name, Role: string(cur.rec.Role), Deployment: cur.rec.Deployment,
		Cause: cur.rec.Cause, Reason: deletedReason(cur.rec),
		Deleted: r.o.Now().UTC().Truncate(time.Second)}
	list := append([]status.DeletedMachine{d}, r.deleted[cur.rec.Cluster]...)
	r.deleted[cur.rec.Cluster] = list[:min(len(list), status.MaxDeleted)]
}

// deletedReason is the reason of rec's entry in its cluster's deleted
// list, rec being the record of a machine whose delete finished: its
// provider's reason when it was gone (NodeExited, MachineMissing), else
// the word for why the planner deleted it (Remediated, ScaledDown,
// RollingUpdate, …), so that each entry says in a word why it went. The
// record itself has no reason once its task put it in its phase.
func deletedReason(rec *Record) string {
	if rec.Reason != "" {
		return rec.Reason
	}
	return planner.DeleteReason(rec.Cause)
}

// carryDeleted starts each cluster's deleted list from what its file on
// the status branch lists, at most status.MaxDeleted: a new leader goes on
// with the list rather than starting it again, which cut every earlier
// removal from the file at its first status commit. The writer read the
// lists with the files' summaries (from its summary cache for the files
// it knows), so this reads no file; and a status made from the same list
// has the key its file was made from, so nothing is built again for it.
func (r *Reconciler) carryDeleted() {
	for name, list := range r.o.Status.Deleted() {
		r.deleted[name] = list[:min(len(list), status.MaxDeleted)]
	}
}

func (r *Reconciler) saveFailed(ctx context.Context, rec *Record, err error) {
	r.log.Error().Err(err).Str(logCluster, rec.Cluster).Str(logMachine, rec.Name).
		Msg("cannot record machine; nothing changed, it will be tried again")
	r.dirty[rec.Cluster] = true
	switch {
	case errors.Is(err, ErrNotLeader):
		return // the lease is going; the next leader reads the store
	case errors.Is(err, ErrConflict):
		r.reload(ctx, rec.Cluster, rec.Name)
	}
	r.health.ReportFor(ProblemStore, rec.Cluster, err)
}

// reload reads one record again after a conflict: the stored version wins.
func (r *Reconciler) reload(ctx context.Context, cluster, name string) {
	data, rev, err := r.store.Get(ctx, recordKey(cluster, name))
	if err != nil {
		return
	}
	cur := r.lookup(cluster, name)
	if data == nil {
		r.remove(cluster, name)
		return
	}
	rec, err := decodeRecord(recordKey(cluster, name), data)
	if err != nil {
		r.log.Error().Err(err).Msg("unreadable machine record")
		return
	}
	m := &machine{rec: rec, rev: rev}
	if cur != nil {
		m.keep(cur)
	}
	r.log.Warn().Str(logCluster, cluster).Str(logMachine, name).Msg("machine record changed underneath; reloaded it")
	r.put(m)
}

// publish sends the task m's record says is in progress. An attempt NATS
// does not accept is published again on the next tick.
func (r *Reconciler) publish(ctx context.Context, m *machine) { r.publishWith(ctx, m, nil) }

// publishWith is publish with the task's bootstrap data made beforehand
// (sealAll); nil: made here.
func (r *Reconciler) publishWith(ctx context.Context, m *machine, s *sealed) {
	key := m.rec.key()
	if r.o.Fence != nil {
		if err := r.o.Fence(); err != nil {
			r.log.Warn().Err(err).Str("task", m.rec.TaskID).Msg("not publishing")
			return
		}
	}
	t := m.rec.task(m.rev)
	if s == nil {
		s = &sealed{}
		s.data, s.err = r.bootstrapOf(ctx, t, m.rec, false)
	}
	if s.err != nil {
		// Tried again every tick: said once, until it is published.
		ev := r.log.Error()
		if _, again := r.unsent[key]; again {
			ev = r.log.Debug()
		}
		ev.Err(s.err).Str("task", t.ID).Msg("bootstrap data; the task will be published once it can be made")
		r.unsent[key] = m
		r.health.ReportFor(ProblemBootstrap, m.rec.Cluster, s.err)
		return
	}
	if s.data != nil {
		r.health.Report(ProblemBootstrap, nil)
		t.Bootstrap = s.data
	}
	f, err := r.pub.Publish(ctx, t)
	if err != nil {
		r.log.Error().Err(err).Str("task", t.ID).Msg("publish failed; it will be retried")
		r.unsent[key] = m
		r.health.ReportFor(ProblemPublish, m.rec.Cluster, err)
		return
	}
	delete(r.unsent, key)
	r.inflight = append(r.inflight, published{m: m, f: f})
	r.metrics.TasksPublished.WithLabelValues(string(t.Operation)).Inc()
}

// hasControlPlane says whether a cluster has a control-plane machine
// record: a new control-plane machine then joins it.
func (r *Reconciler) hasControlPlane(cluster string) bool {
	for _, m := range r.machines[cluster] {
		if m.rec.Role == wire.RoleControlPlane {
			return true
		}
	}
	return false
}

// bootstrapOf is a create task's sealed bootstrap data (nil for a delete,
// or without an issuer). first: the task's first publication, by the
// leader that recorded it (no token can have been issued to it). Safe on
// several goroutines: it reads the desired state and the PKI store only.
func (r *Reconciler) bootstrapOf(ctx context.Context, t *wire.Task, rec *Record, first bool) ([]byte, error) {
	if r.o.Bootstrap == nil || t.Operation != wire.OpCreate {
		return nil, nil
	}
	req := bootstrap.Request{Machine: t.Machine, TaskID: t.ID, Init: rec.Init, Now: r.o.Now(), First: first,
		Network: bootstrap.NetworkOf(nil, nil, ""), ControlPlaneProvider: rec.Provider}
	if dc := r.desired.Cluster(rec.Cluster); dc != nil {
		req.ControlPlaneProvider = dc.ControlPlane.Provider
		if n := dc.Network; n != nil {
			var pods, services []string
			if n.Pods != nil {
				pods = n.Pods.CIDRBlocks
			}
			if n.Services != nil {
				services = n.Services.CIDRBlocks
			}
			req.Network = bootstrap.NetworkOf(pods, services, n.ServiceDomain)
		}
	}
	return r.o.Bootstrap.Seal(ctx, req)
}

// forgetPKI removes a deleted cluster's PKI and tokens.
func (r *Reconciler) forgetPKI(cluster string) {
	if r.o.Bootstrap == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.o.Bootstrap.Forget(ctx, cluster); err != nil {
		r.log.Warn().Err(err).Str(logCluster, cluster).Msg("removing the cluster's PKI")
	}
}

// published is a task publish awaiting NATS's acknowledgement.
type published struct {
	m *machine
	f jetstream.PubAckFuture
}

// waitPublished waits for NATS to acknowledge the tasks published since
// the last wait; those it did not store are published again on the next
// tick.
func (r *Reconciler) waitPublished(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	failed := 0
	var last error
	for _, p := range r.inflight {
		select {
		case <-p.f.Ok():
			continue
		case err := <-p.f.Err():
			last = err
		case <-wctx.Done():
			last = wctx.Err()
		}
		failed++
		if r.lookup(p.m.rec.Cluster, p.m.rec.Name) == p.m {
			r.unsent[p.m.rec.key()] = p.m
		}
	}
	// Nil, not [:0]: a pass of 130,000 creates would otherwise keep every
	// acknowledged message, with its data, alive in the backing array.
	r.inflight = nil
	if failed > 0 {
		r.log.Error().Err(last).Int("tasks", failed).Msg("tasks not acknowledged by NATS; they will be published again")
		r.health.Report(ProblemPublish, last)
		return
	}
	r.health.Report(ProblemPublish, nil)
}

// republish sends again the attempts NATS did not accept.
func (r *Reconciler) republish(ctx context.Context) {
	if len(r.unsent) == 0 {
		return
	}
	for _, m := range r.unsent {
		if r.lookup(m.rec.Cluster, m.rec.Name) != m || !m.rec.InFlight() {
			delete(r.unsent, m.rec.key())
			continue
		}
		r.publish(ctx, m)
	}
	r.waitPublished(ctx)
}

// retry publishes an unanswered task again as its next attempt: a new
// message ID, so JetStream does not drop it as a duplicate, and a worker
// that still holds the older attempt drops it.
func (r *Reconciler) retry(ctx context.Context, cur *machine) {
	next := cur.rec.clone()
	next.Attempt++
	next.Published = StampOf(r.o.Now())
	r.log.Warn().Str(logCluster, next.Cluster).Str(logMachine, next.Name).Str("task", next.TaskID).
		Int32("attempt", next.Attempt).Msg("no answer to task; publishing it again")
	if r.noAnswer(cur) {
		r.writeFleet()
	}
	if m := r.commit(ctx, cur, next); m != nil {
		r.publish(ctx, m)
	}
}
