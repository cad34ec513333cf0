package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unique"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Why an event or heartbeat is refused (the reason label of
// gitfleet_refused_messages_total).
const (
	refusedSubject  = "subject"   // the subject names another cluster or machine than the body
	refusedNoTask   = "no-task"   // an event that names no task
	refusedTask     = "task"      // an event about a task the record does not know
	refusedPhase    = "phase"     // a phase that cannot come from the record's task
	refusedNoRecord = "no-record" // about a machine with no record
	refusedRate     = "rate"      // a heartbeat too soon after the machine's last one
	refusedReview   = "review"    // a join review refused, for whatever reason
)

// floodLogEvery is how often at most a refused heartbeat is logged: a node
// that floods its subject must not flood the log too.
const floodLogEvery = 10 * time.Second

// handleEvents checks each worker event of a batch against its machine's
// record and applies it to a copy of the record, as one event at a time
// would; the copies' writes (a delete, for a Deleted event) are started
// together and waited for together, so a burst of events costs one round
// trip to the store, not one per event. Then, in order, each saved copy is
// swapped in and its event acknowledged; a write that fails leaves memory
// as it was and its event is redelivered. A second event about a machine
// already written in the batch waits for the next one. Malformed events
// are terminated; events the record refutes are counted, logged and
// acknowledged, never applied. A replica whose lease may be gone hands
// every event back.
func (r *Reconciler) handleEvents(ctx context.Context, msgs []jetstream.Msg) {
	for len(msgs) > 0 {
		var writes []*eventWrite
		busy := map[string]bool{}
		n := 0
		for _, m := range msgs {
			if w := r.checkEvent(m); w != nil {
				if busy[w.cur.rec.key()] {
					break // after this batch's write of the same machine
				}
				busy[w.cur.rec.key()] = true
				if w.ev.Phase == wire.PhaseDeleted {
					w.saving = r.store.DeleteAsync(w.cur.rec.key(), w.cur.rev)
				} else {
					w.saving = r.store.SaveAsync(w.next.key(), w.next, w.cur.rev)
				}
				writes = append(writes, w)
			}
			n++
		}
		for _, w := range writes {
			rev, err := w.saving.Wait(ctx)
			r.eventWritten(ctx, w, rev, err)
		}
		msgs = msgs[n:]
	}
}

// eventWrite is an event whose record is being written.
type eventWrite struct {
	m      jetstream.Msg
	ev     wire.Event
	cur    *machine
	next   *Record
	saving *Saving
}

// checkEvent settles an event that changes no record (acknowledged or
// terminated here) and returns the others, with their record's next
// version.
func (r *Reconciler) checkEvent(m jetstream.Msg) *eventWrite {
	if r.o.Fence != nil && r.o.Fence() != nil {
		// A deposed leader (paused past its lease) still holds events it
		// was given; it must not settle any, not even one about a machine
		// it never heard of, which the new leader may have created. The
		// delay keeps it from spinning on them until its loop stops.
		_ = m.NakWithDelay(time.Second)
		return nil
	}
	ev, err := wire.DecodeEvent(m.Data())
	if err != nil {
		if r.floodLog("event") {
			r.log.Warn().Err(err).Str("subject", m.Subject()).
				Msg("terminating malformed event (malformed and refused events after this one are counted and logged at most every 10s)")
		}
		r.metrics.Malformed.WithLabelValues("event").Inc()
		_ = m.Term()
		return nil
	}
	if !wire.EventPublishedFor(m.Subject(), ev.Cluster, ev.Machine, ev.Worker) {
		r.refuse("event", refusedSubject, ev.Cluster, ev.Machine, fmt.Sprintf("published on %s", m.Subject()))
		_ = m.Term()
		return nil
	}
	cur := r.lookup(ev.Cluster, ev.Machine)
	switch {
	case cur == nil:
		// A machine this daemon no longer tracks (deleted, and this is a
		// repeat of its Deleted event), one it never had, or an orphan
		// being deleted.
		if ev.Phase != wire.PhaseDeleted && !strings.HasPrefix(ev.TaskID, orphanTaskPrefix) {
			r.refuse("event", refusedNoRecord, ev.Cluster, ev.Machine, string(ev.Phase))
		}
		_ = m.Ack()
		return nil
	case ev.TaskID == "":
		r.refuse("event", refusedNoTask, ev.Cluster, ev.Machine, string(ev.Phase))
		_ = m.Ack()
		return nil
	case ev.TaskID != cur.rec.TaskID:
		// A late event about an earlier task (a Running that arrives once
		// the machine is being deleted) is expected; a task the machine
		// never had is not.
		// So is the delete of a second copy on another worker (an orphan
		// task, secondCopy).
		if ev.TaskID != taskID(wire.OpCreate, ev.Cluster, ev.Machine) && !strings.HasPrefix(ev.TaskID, orphanTaskPrefix) {
			r.refuse("event", refusedTask, ev.Cluster, ev.Machine, ev.TaskID)
		}
		_ = m.Ack()
		return nil
	case !ev.Phase.For(cur.rec.operation()):
		r.refuse("event", refusedPhase, ev.Cluster, ev.Machine,
			fmt.Sprintf("%s for task %s", ev.Phase, cur.rec.TaskID))
		_ = m.Ack()
		return nil
	}
	next := cur.rec.clone()
	if !r.applyEvent(next, ev) {
		if ev.Phase == wire.PhaseRunning {
			r.noteRunning(cur, false)
		}
		_ = m.Ack()
		return nil
	}
	return &eventWrite{m: m, ev: ev, cur: cur, next: next}
}

// eventWritten finishes an event once its record's write is done (err nil)
// or failed.
func (r *Reconciler) eventWritten(ctx context.Context, w *eventWrite, rev uint64, err error) {
	cur, ev, m := w.cur, w.ev, w.m
	if err == nil && r.lookup(cur.rec.Cluster, cur.rec.Name) != cur {
		// Memory cannot move while the loop waits for the batch; were it
		// to, the store's version wins, read again.
		err = ErrConflict
	}
	if err != nil {
		r.saveFailed(ctx, w.next, err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	if r.answered(cur.rec.Provider, ev.Worker) {
		r.writeFleet()
	}
	if ev.Phase == wire.PhaseDeleted {
		r.health.Report(ProblemStore, nil)
		r.dropped(ctx, cur)
		r.countOutcome(cur.rec, ev.Phase)
		r.timeTask(cur.rec, ev.Phase)
		_ = m.Ack()
		return
	}
	saved := r.stored(cur, w.next, rev)
	next := w.next
	if cur.rec.Phase != saved.rec.Phase {
		r.timeTask(cur.rec, ev.Phase)
		r.log.Info().Str(logCluster, next.Cluster).Str(logMachine, next.Name).
			Str("from", string(cur.rec.Phase)).Str("to", string(next.Phase)).Str("detail", ev.Message).Msg("machine phase")
		r.countOutcome(cur.rec, ev.Phase)
	}
	if ev.Phase == wire.PhaseRunning {
		r.noteRunning(saved, cur.rec.Phase != wire.PhaseRunning)
	}
	_ = m.Ack()
}

// noteRunning takes a Running event as the machine's first sign of health:
// the only one from providers whose machines send no heartbeats (inmemory).
// A machine that became Running is healthy until a heartbeat says not:
// the heartbeats its node sent while it booted ("not healthy yet") came
// before the provider found it up, and say nothing of it running.
func (r *Reconciler) noteRunning(m *machine, became bool) {
	switch {
	case m.lastHeartbeat().Before(m.rec.Created.Add(time.Nanosecond)):
		m.beat, m.healthy = assumedBeat(r.o.Now(), m.rec.Created.Time()), true
		r.dirty[m.rec.Cluster] = true
	case became && !m.healthy:
		m.healthy = true
		r.dirty[m.rec.Cluster] = true
	}
}

// timeTask observes how long the task of rec (as it was before the event)
// took from its publication: to its first event, for a create still
// Pending, and to its outcome (Running, Deleted or Failed).
func (r *Reconciler) timeTask(rec *Record, to wire.Phase) {
	r.metrics.Events.WithLabelValues(string(to)).Inc()
	if rec.Published.IsZero() {
		return
	}
	d := r.o.Now().Sub(rec.Published.Time()).Seconds()
	op := string(rec.operation())
	if rec.Phase == wire.PhasePending {
		r.metrics.TaskSeconds.WithLabelValues(rec.Provider, op, "first_event").Observe(d)
	}
	switch to {
	case wire.PhaseRunning, wire.PhaseDeleted, wire.PhaseFailed:
		r.metrics.TaskSeconds.WithLabelValues(rec.Provider, op, "done").Observe(d)
	}
}

func (r *Reconciler) countOutcome(rec *Record, to wire.Phase) {
	switch to {
	case wire.PhaseRunning, wire.PhaseDeleted:
		r.metrics.TasksCompleted.WithLabelValues(string(rec.operation())).Inc()
	case wire.PhaseFailed:
		r.metrics.TasksFailed.WithLabelValues(string(rec.operation())).Inc()
		if rec.operation() == wire.OpCreate {
			class := ""
			if dc := r.desired.Cluster(rec.Cluster); dc != nil {
				class = dc.Class
			}
			r.metrics.CreateFailures.WithLabelValues(class, rec.Provider).Inc()
		}
	}
}

// refuseBeat is refuse for a heartbeat: counted each time, logged at most
// every floodLogEvery, since a node can send thousands a second.
func (r *Reconciler) refuseBeat(now time.Time, reason, cluster, machine, detail string) {
	if now.Sub(r.floodLogged) < floodLogEvery {
		r.metrics.Refused.WithLabelValues("heartbeat", reason).Inc()
		return
	}
	r.floodLogged = now
	r.refuse("heartbeat", reason, cluster, machine, detail+" (heartbeats refused after this one are counted and logged at most every 10s)")
}

func (r *Reconciler) refuse(kind, reason, cluster, machine, detail string) {
	r.metrics.Refused.WithLabelValues(kind, reason).Inc()
	ev := r.log.Warn()
	switch {
	case reason == refusedNoRecord:
		ev = r.log.Debug() // late repeats of a deleted machine's events
	case kind == "heartbeat": // refuseBeat's
	case !r.floodLog(kind):
		return
	default:
		detail += fmt.Sprintf(" (malformed and refused %ss after this one are counted and logged at most every 10s)", kind)
	}
	ev.Str("kind", kind).Str("reason", reason).Str(logCluster, cluster).Str(logMachine, machine).
		Str("detail", detail).Msg("refusing message: it does not match the machine's record")
}

// floodLog reports whether a malformed or refused message of kind
// (event, inventory, join) may be logged now: at most one of each kind
// every floodLogEvery. Workers' and nodes' credentials publish them, and
// the loop reads each at once: 50,000 events sent in a second logged
// 50,000 lines. The metrics count every one.
func (r *Reconciler) floodLog(kind string) bool {
	now := r.o.Now()
	if now.Sub(r.logged[kind]) < floodLogEvery {
		return false
	}
	if r.logged == nil {
		r.logged = map[string]time.Time{}
	}
	r.logged[kind] = now
	return true
}

// applyEvent updates rec, a copy, from an event about its current task and
// reports whether anything changed. Phases only move forward: once a create
// reached Running or Failed, a late progress event changes nothing, and a
// machine the inventory found missing is not brought back by an old
// Running.
func (r *Reconciler) applyEvent(rec *Record, ev wire.Event) bool {
	changed := false
	terminal := rec.Phase == wire.PhaseRunning || rec.Phase == wire.PhaseFailed
	if terminal && rec.operation() == wire.OpCreate {
		return false
	}
	if ev.ProviderID != "" && !rec.hasProviderID(ev.ProviderID) {
		rec.setProviderID(ev.ProviderID)
		changed = true
	}
	if len(ev.Addresses) > 0 && !equalStrings(rec.addresses(), ev.Addresses) {
		rec.setAddresses(ev.Addresses)
		changed = true
	}
	if ev.Worker != "" && ev.Worker != rec.Worker {
		rec.Worker, changed = unique.Make(ev.Worker).Value(), true // one copy for a worker's machines
	}
	reason := rec.Reason
	if ev.Phase != rec.Phase {
		rec.Phase, changed = ev.Phase, true
		reason = ""
		if ev.Phase == wire.PhaseRunning {
			rec.Running = StampOf(r.o.Now())
		}
	}
	if ev.Phase == wire.PhaseRunning && ev.Version != "" && ev.Version != rec.Version {
		rec.reshape(func(sh *Shape) { sh.Version = ev.Version })
		changed = true
	}
	if reason != rec.Reason || ev.Message != rec.Message {
		rec.setWhy(reason, ev.Message)
		changed = true
	}
	return changed
}

// handleHeartbeat notes a machine's heartbeat in memory. The cluster is
// re-planned only when the heartbeat changes what the planner sees: the
// first heartbeat after creation (the machine becomes ready) or a change
// of health or version. A heartbeat whose subject names another machine
// than its body is refused.
//
// A node sends a heartbeat every interval, and no interval is shorter than
// wire.MinHeartbeatInterval; one on a machine's subject sooner than half
// of that after the machine's last is dropped unread. A node that floods
// its subject then costs the loop a map lookup a message, and can make its
// record written (a change of health) at most that often.
func (r *Reconciler) handleHeartbeat(ctx context.Context, msg *nats.Msg) {
	now := r.o.Now()
	if m := r.bySubject(msg.Subject); m != nil && m.rec.Heartbeats && now.Sub(m.lastHeartbeat()) < wire.MinHeartbeatInterval/2 {
		r.refuseBeat(now, refusedRate, m.rec.Cluster, m.rec.Name, fmt.Sprintf("less than %s after its last", wire.MinHeartbeatInterval/2))
		return
	}
	hb, err := wire.DecodeHeartbeat(msg.Data)
	if err != nil {
		// Heartbeats are not stored, so there is nothing to terminate;
		// logged at debug level, since a broken node sends one every few
		// seconds.
		r.log.Debug().Err(err).Str("subject", msg.Subject).Msg("ignoring malformed heartbeat")
		r.metrics.Malformed.WithLabelValues("heartbeat").Inc()
		return
	}
	if msg.Subject != wire.HeartbeatSubject(hb.Cluster, hb.Machine) {
		r.refuseBeat(now, refusedSubject, hb.Cluster, hb.Machine, "published on "+msg.Subject)
		return
	}
	m := r.lookup(hb.Cluster, hb.Machine)
	if m == nil {
		return
	}
	r.metrics.Heartbeats.Inc()
	fresh := m.lastHeartbeat().Before(m.rec.Created.Time()) || m.lastHeartbeat().IsZero()
	if fresh || m.healthy != hb.Healthy || (hb.Version != "" && m.rec.Version != hb.Version) {
		r.dirty[m.rec.Cluster] = true
		r.clock[m.rec.Cluster] = time.Time{}
	}
	m.beat, m.healthy = beatOf(now), hb.Healthy
	if !m.rec.Heartbeats || (m.rec.Phase == wire.PhaseRunning && hb.Version != "" && m.rec.Version != hb.Version) {
		next := m.rec.clone()
		next.Heartbeats = true
		if m.rec.Phase == wire.PhaseRunning && hb.Version != "" && hb.Version != next.Version {
			next.reshape(func(sh *Shape) { sh.Version = hb.Version })
		}
		m = r.commit(ctx, m, next)
		if m == nil {
			return
		}
	}
	r.judge(ctx, m, now, hb.Message)
}

// bySubject returns the machine a heartbeat subject names, without
// decoding the message (nil when the subject names none).
func (r *Reconciler) bySubject(subject string) *machine {
	rest, ok := strings.CutPrefix(subject, wire.SubjectHeartbeats+".")
	if !ok {
		return nil
	}
	cluster, name, ok := strings.Cut(rest, ".")
	if !ok {
		return nil
	}
	return r.lookup(cluster, name)
}

// maxHealthMessage is how much of a heartbeat's message a record keeps:
// the node writes it, at any length NATS carries, and it goes into every
// later write of the record and into the status branch.
const maxHealthMessage = 1 << 10

// judge records a change of a running machine's health: unhealthy when its
// heartbeats stopped for the heartbeat timeout or the newest said so,
// healthy again when a heartbeat says so. Status shows it whether or not a
// MachineHealthCheck selects the machine.
func (r *Reconciler) judge(ctx context.Context, m *machine, now time.Time, msg string) {
	rec := m.rec
	if rec.Phase != wire.PhaseRunning || !rec.Heartbeats {
		return
	}
	want := Health{Healthy: true}
	last := m.lastHeartbeat()
	if last.Before(r.heard) {
		last = r.heard
	}
	switch {
	case now.Sub(last) > r.o.HeartbeatTimeout:
		want = Health{Reason: ReasonHeartbeatMissing, Since: m.lastHeartbeat(),
			Message: fmt.Sprintf("no heartbeat since %s", m.lastHeartbeat().UTC().Format(time.RFC3339))}
		if m.lastHeartbeat().IsZero() {
			want.Since, want.Message = last, "no heartbeat since this leader started"
		}
	case !m.healthy:
		want = Health{Reason: ReasonNodeUnhealthy, Since: now, Message: wire.Cut(msg, maxHealthMessage)}
		if want.Message == "" {
			want.Message = "its heartbeat says it is not healthy"
		}
	}
	old := rec.Health
	if old == nil {
		old = &Health{Healthy: true}
	}
	if old.Healthy == want.Healthy && old.Reason == want.Reason {
		return
	}
	next := rec.clone()
	want.Since = want.Since.UTC().Truncate(time.Second)
	if want.Healthy {
		want.Since = now.UTC().Truncate(time.Second)
	}
	next.Health = &want
	if want.Reason == ReasonHeartbeatMissing {
		// A silent machine may be gone: ask its provider now rather than
		// wait for the next periodic inventory.
		if _, ok := r.inv.suspects[rec.key()]; !ok {
			r.inv.suspects[rec.key()] = r.inv.next()
		}
	}
	if r.commit(ctx, m, next) != nil {
		ev := r.log.Warn()
		if want.Healthy {
			ev = r.log.Info()
		}
		ev.Str(logCluster, rec.Cluster).Str(logMachine, rec.Name).Bool("healthy", want.Healthy).
			Str("reason", want.Reason).Msg("machine health")
	}
}

// checkTime wakes clusters whose machines time may have made unhealthy,
// records machines whose heartbeats stopped, publishes again what NATS did
// not accept, and the tasks left unanswered past the task timeout as their
// next attempt. It visits only the clusters whose clock time has come
// (r.clock), and sets each one's next.
func (r *Reconciler) checkTime(ctx context.Context) {
	now := r.o.Now()
	for cluster, at := range r.wake {
		if !now.Before(at) {
			delete(r.wake, cluster)
			r.dirty[cluster] = true
		}
	}
	if !r.o.JS.Conn().IsConnected() {
		r.heard = now // heartbeats are not reaching us: none is missed
	}
	r.checkDropped(now)
	r.republish(ctx)
	var due []string
	for cluster, at := range r.clock {
		if !now.Before(at) {
			due = append(due, cluster)
		}
	}
	retried := false
	for _, cluster := range due {
		checked := r.checkedCluster(cluster)
		planned := r.planned[cluster]
		for _, m := range r.machines[cluster] {
			if m.rec.InFlight() && !m.rec.Published.IsZero() && now.Sub(m.rec.Published.Time()) > r.o.TaskTimeout {
				r.retry(ctx, m)
				retried = true
				continue
			}
			r.judge(ctx, m, now, "")
			if checked != nil && r.cameDue(m, checked, planned, now) {
				r.dirty[cluster] = true
			}
		}
		next := time.Time{}
		for _, m := range r.machines[cluster] {
			if at := r.clockOf(m, checked, now); !at.IsZero() && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
		if next.IsZero() {
			delete(r.clock, cluster)
		} else {
			r.clock[cluster] = next
		}
	}
	if retried {
		r.waitPublished(ctx)
	}
}

// checkDropped looks whether the heartbeat subscription dropped messages
// since the last tick: its buffer fills when the loop falls behind (a
// long planning pass, or a node flooding its subject faster than the
// loop reads). Any machine's heartbeats may be among them, so heartbeats
// missed until now do not count, as for a disconnection: a flood must not
// make healthy machines look dead and have them replaced.
//
// While it goes on, no machine can be found silent: the loop reports it
// (a Reconciling condition in fleet.yaml, reason HeartbeatsFailing), and
// clears it once heartbeatsQuiet has passed without a drop, so that a
// flood that comes and goes does not rewrite fleet.yaml every second.
func (r *Reconciler) checkDropped(now time.Time) {
	if r.beats == nil {
		return
	}
	n, err := r.beats.Dropped()
	if err != nil || n <= r.beatsDropped {
		if !r.droppedAt.IsZero() && now.Sub(r.droppedAt) >= heartbeatsQuiet {
			r.droppedAt = time.Time{}
			r.health.Report(ProblemHeartbeats, nil)
		}
		return
	}
	dropped := n - r.beatsDropped
	r.metrics.HeartbeatsDropped.Add(float64(dropped))
	r.log.Warn().Int("dropped", dropped).
		Msg("heartbeats dropped unread: the loop fell behind; heartbeats missed until now do not count")
	r.beatsDropped = n
	r.heard, r.droppedAt = now, now
	r.health.Report(ProblemHeartbeats, fmt.Errorf("%d heartbeats dropped unread at %s: the loop falls behind them (a node flooding its subject? gitfleet_refused_messages_total{reason=\"rate\"}); until it keeps up, a machine whose heartbeats stop is not noticed",
		dropped, now.UTC().Format(time.RFC3339)))
}

// heartbeatsQuiet is how long heartbeats must come without a drop before
// the loop's Heartbeats problem clears.
const heartbeatsQuiet = 10 * time.Second

// clockOf is the earliest time after now at which time alone may change
// what checkTime does with m — its task times out, its heartbeat counts
// as missed, a health check of its cluster (checked: the cluster, when
// it has health checks) comes due for it — or now itself when it is so
// already (checkTime then looks again at the next tick); zero when time
// alone changes nothing (a running machine that sends no heartbeats in a
// cluster without health checks: the steady state of most of a fleet).
// Heartbeats only move these times later, so a time computed before one
// is early, never late.
func (r *Reconciler) clockOf(m *machine, checked *planner.DesiredCluster, now time.Time) time.Time {
	var at time.Time
	earliest := func(t time.Time) {
		if !t.After(now) {
			t = now
		}
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	rec := m.rec
	if rec.InFlight() && !rec.Published.IsZero() {
		earliest(rec.Published.Add(r.o.TaskTimeout + time.Nanosecond))
	}
	if rec.Phase == wire.PhaseRunning && rec.Heartbeats {
		last := m.lastHeartbeat()
		if last.Before(r.heard) {
			last = r.heard
		}
		earliest(last.Add(r.o.HeartbeatTimeout + time.Nanosecond))
	}
	if checked != nil {
		o := r.observe(m)
		if due := planner.UnhealthyAt(&o, checked, now); !due.IsZero() {
			earliest(due)
		}
	}
	return at
}

// cameDue reports whether, since its cluster was last planned (planned),
// time alone has made a health check of checked (m's cluster) find m
// unhealthy: the planner decides on that now. A machine that stays
// unhealthy comes due once, not at every tick (before, one silent for 3 s
// had its cluster planned at every tick until it was remediated, or for
// ever while nothing remediated it).
func (r *Reconciler) cameDue(m *machine, checked *planner.DesiredCluster, planned, now time.Time) bool {
	o := r.observe(m)
	due := planner.UnhealthyAt(&o, checked, planned)
	return !due.IsZero() && !due.After(now)
}

// checkedCluster is the cluster as it acts now — the desired one, with
// the rules and health checks of its admission until its wave admits it
// to the desired ones — when it has health checks: time alone may make
// its machines unhealthy. Nil otherwise.
func (r *Reconciler) checkedCluster(name string) *planner.DesiredCluster {
	if r.desired == nil {
		return nil
	}
	dc, rec := r.desired.Cluster(name), r.decisions.records.Cluster(name)
	if !planner.Checked(dc, rec) {
		return nil
	}
	return planner.Acting(dc, rec)
}

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
