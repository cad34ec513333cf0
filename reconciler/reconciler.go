// Package reconciler is the daemon's loop: it turns the current revision of
// the fleet repository and the machines observed through NATS into tasks for
// provider workers, and writes what happened to the status branch.
//
// The loop is level-triggered. Every wake-up — a new revision, a worker
// event, a heartbeat that changed a machine's health, a task left
// unanswered, a timer — marks clusters dirty; the loop then plans the dirty
// clusters alone (planner.PlanCluster, with the class rollout gates computed
// from per-cluster summaries) and publishes only steps that are not already
// in flight. One goroutine owns all state; NATS callbacks only hand messages
// to it.
package reconciler

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/internal/gcfloor"
	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
	"github.com/gitfleet/gitfleet/sources"
)

// DefaultTaskTimeout is how long a task may go unanswered before it is
// published again: a worker that holds it sends in-progress acks, so only
// a task nobody holds (lost with a store, purged) waits this long.
const DefaultTaskTimeout = 2 * time.Minute

// Options wire a Reconciler.
type Options struct {
	// Revisions delivers the spec branch's heads, good and rejected, oldest
	// first; a new leader's first ones are the newest good head and, after
	// it, a newer rejected one.
	Revisions <-chan *sources.Revision
	JS        jetstream.JetStream
	// Status, when set, receives every cluster's status and the fleet's.
	Status  *status.Writer
	Log     zerolog.Logger
	Metrics *Metrics
	// Now is the clock (default time.Now); NewName names new machines
	// (default: <cluster>-<pool>-<5 random characters>, like Cluster API).
	Now     func() time.Time
	NewName func(cluster, pool string) string
	// Tick is how often time-based health is looked at (default 1s).
	Tick time.Duration
	// StartGC lets the heap grow before it is collected while a new
	// leader reads its records and makes its first pass (startFloor): a
	// daemon process sets it; tests sharing a process leave it off.
	StartGC bool
	// TaskTimeout: a task with no answer for this long is published again
	// as its next attempt, under a new message ID (DefaultTaskTimeout).
	TaskTimeout time.Duration
	// HeartbeatTimeout: a machine that sends heartbeats and sent none for
	// this long is recorded unhealthy (default 15s). Whether it is
	// replaced is a MachineHealthCheck's decision.
	HeartbeatTimeout time.Duration
	// Health receives the loop's errors (store, publish, status); the
	// daemon's /readyz reads it. Default: a new one.
	Health *LoopHealth
	// Fence, when set, is asked before every write to the store, every
	// publish and every status commit: a replica whose lease may be gone
	// returns an error and writes nothing.
	Fence func() error
	// RetryInterval is the first wait after a pool's create failed; it
	// doubles with each failure in a row, up to 5 minutes, with jitter
	// (default planner.DefaultRetryInterval).
	RetryInterval time.Duration
	// Orphans is what happens to a machine a provider has and no record
	// wants: OrphansDelete (default) deletes it OrphanGrace after it was
	// confirmed (default 5m), OrphansReport only lists it in fleet.yaml.
	Orphans     string
	OrphanGrace time.Duration
	// InventoryWait is how long the leader of an empty machines bucket
	// waits for the inventories of the fleet's providers before its first
	// plan (default 5s); machines the status branch lists are waited for
	// up to RebuildTimeout (default 10m).
	InventoryWait  time.Duration
	RebuildTimeout time.Duration
	// Bootstrap, when set, gives every create task the machine's sealed
	// bootstrap data (docs/bootstrap.md), revokes a machine's token when
	// it goes, and forgets a deleted cluster's PKI. Nil: machines get none.
	Bootstrap *bootstrap.Issuer
}

// Reconciler is the loop. Run it while this replica is the leader.
type Reconciler struct {
	o       Options
	log     zerolog.Logger
	store   *Store
	pub     *natsbus.Publisher
	metrics *Metrics
	health  *LoopHealth
	// undoFloor ends the collection floor of a start (StartGC).
	undoFloor func()
	// asideWG counts the writes started aside (aside); Run waits for
	// them before it returns.
	asideWG sync.WaitGroup

	rev      *sources.Revision
	rejected string // the last rejected commit, reported (logged, counted) once, also across leaders
	// lastRejected is the newest refusal, shown in fleet.yaml until a
	// commit other than rejectedOver, the one in force when it was
	// refused, is applied. A new leader starts from the branch's
	// (carryRejection): it applies the revision in force again before it
	// refuses the same head once more, and that clears nothing.
	lastRejected *status.Rejection
	rejectedOver string
	// appliedBefore is the lastApplied fleet.yaml showed when this leader
	// started (carryApplied): shown until it applies a revision, so a
	// status written before that does not drop it.
	appliedBefore *status.SourceCommit
	desired       *planner.Desired
	machines      map[string]machineList // each cluster's machines
	counts        *fleetCounts           // machines and clusters by phase, kept by put, remove and writeCluster
	gates         *planner.Gates         // the last pass's rollout gates
	rollouts      []status.ClassRollout  // the gates' class rollouts, for fleet.yaml
	moved         map[string]bool        // classes whose summaries moved since gates were compared
	// unsent are machines whose current attempt is recorded but was not
	// accepted by NATS: published again on the next tick.
	unsent map[string]*machine
	// unanswered are the providers whose tasks went unanswered past the
	// task timeout, with no event of theirs since (TasksAnswered).
	unanswered map[string]*unanswered
	// inflight are publishes awaiting NATS's acknowledgement.
	inflight []published
	// heard is since when this leader hears heartbeats without a gap (its
	// start, the end of its last disconnection from NATS, or the last tick
	// that found heartbeats dropped because the loop fell behind).
	heard time.Time
	// beats is the heartbeat subscription; beatsDropped how many of its
	// messages it had dropped at the last tick.
	beats        *nats.Subscription
	beatsDropped int
	droppedAt    time.Time // the last tick that found heartbeats dropped
	// floodLogged is when a refused heartbeat was last logged (at most
	// one line every floodLogEvery); logged the same for the other kinds
	// of message (floodLog).
	floodLogged time.Time
	logged      map[string]time.Time
	sums        *planner.Summaries
	dirty       map[string]bool
	gone        map[string]bool // clusters whose status file was removed
	planSeq     int

	// decisions are the planner's recorded rollout decisions, as stored
	// in the rollouts bucket (decisions.go).
	decisions decisions
	// scale holds the sizes asked for autoscaled pools, by cluster and
	// pool (scale.go); scaleReqs brings requests into the loop, done is
	// closed when Run returns.
	scale     map[string]map[string]planner.ScaleRequest
	scaleReqs chan scaleReq
	done      chan struct{}
	// wake is when time alone changes a cluster's plan (a backoff ends).
	wake map[string]time.Time
	// clock is when each cluster's machines next need the tick
	// (checkTime): a task that may time out, a heartbeat that may be
	// missed, a health check that may come due. A cluster absent needs none;
	// the zero time means at the next tick. put and markChanged set it to
	// zero, checkTime to the earliest of its machines' times, so a tick
	// costs the clusters with something pending, not the whole fleet.
	clock map[string]time.Time
	// planned is when each cluster with health checks was last planned:
	// checkTime plans it again when one of its checks came due since
	// (cameDue).
	planned map[string]time.Time
	// classesChanged: a new revision may have removed classes.
	classesChanged bool
	// scalesStale: a new revision may have removed clusters or pools that
	// have scale requests.
	scalesStale bool
	// inv is what the providers' inventories said (inventory.go).
	inv inventory
	// deleted are each cluster's last deleted machines, for its status;
	// a new leader starts from the lists the branch holds (carryDeleted).
	deleted map[string][]status.DeletedMachine
	// deletesFrom is when this leader's deletes of Running machines (a
	// scale-down's, a rollout's outdated machine) may start: the end of
	// its first pass plus InventoryWait, so that the inventories it asks
	// for after that pass can say which machines died while no leader was
	// looking (a scale-down then takes the dead one, not a healthy one),
	// as a controller waits for its caches to sync. Zero until the first
	// pass is done: every such delete waits meanwhile.
	// Only machines made before the term (termStart) wait: this leader
	// has seen the others run.
	deletesFrom, termStart time.Time
	// removed are each cluster's machines removed for their health or
	// absence that no create has replaced yet, oldest first: the planner
	// names them in the causes of their replacements (replace.go). Kept
	// in memory; a new leader rebuilds it from the records and the
	// deleted lists (carryRemoved).
	removed map[string][]planner.Removed
}

// New checks opts and returns a Reconciler.
func New(opts Options) (*Reconciler, error) {
	if opts.JS == nil {
		return nil, errors.New("reconciler: no JetStream")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewName == nil {
		opts.NewName = RandomName
	}
	if opts.Tick <= 0 {
		opts.Tick = time.Second
	}
	if opts.TaskTimeout <= 0 {
		opts.TaskTimeout = DefaultTaskTimeout
	}
	if opts.HeartbeatTimeout <= 0 {
		opts.HeartbeatTimeout = 15 * time.Second
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.Health == nil {
		opts.Health = NewLoopHealth()
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = planner.DefaultRetryInterval
	}
	switch opts.Orphans {
	case "":
		opts.Orphans = OrphansDelete
	case OrphansDelete, OrphansReport:
	default:
		return nil, fmt.Errorf("reconciler: orphans %q: use %s or %s", opts.Orphans, OrphansDelete, OrphansReport)
	}
	if opts.OrphanGrace <= 0 {
		opts.OrphanGrace = DefaultOrphanGrace
	}
	if opts.InventoryWait <= 0 {
		opts.InventoryWait = DefaultInventoryWait
	}
	if opts.RebuildTimeout <= 0 {
		opts.RebuildTimeout = DefaultRebuildTimeout
	}
	return &Reconciler{o: opts, log: opts.Log, metrics: opts.Metrics, health: opts.Health,
		pub: natsbus.NewPublisher(opts.JS), scaleReqs: make(chan scaleReq), done: make(chan struct{})}, nil
}

// RandomName names a machine <cluster>-<pool>-<5 random characters>.
func RandomName(cluster, pool string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return cluster + "-" + pool + "-" + string(b)
}

// Run reconciles until ctx ends. It loads the observed state from the
// machines bucket, then follows revisions, events and heartbeats.
func (r *Reconciler) Run(ctx context.Context) error {
	defer close(r.done)
	defer r.asideWG.Wait() // the writes set aside end within their timeout
	kv, err := r.o.JS.KeyValue(ctx, wire.BucketMachines)
	if err != nil {
		return fmt.Errorf("reconciler: machines bucket: %w", err)
	}
	r.store = NewStore(kv, r.o.Fence, r.o.JS)
	rkv, err := r.o.JS.KeyValue(ctx, wire.BucketRollouts)
	if err != nil {
		return fmt.Errorf("reconciler: rollouts bucket: %w", err)
	}
	r.decisions.store = NewStore(rkv, r.o.Fence, nil)
	r.wake = map[string]time.Time{}
	r.clock = map[string]time.Time{}
	r.planned = map[string]time.Time{}
	r.machines = map[string]machineList{}
	r.counts = newFleetCounts()
	r.unsent = map[string]*machine{}
	r.unanswered = map[string]*unanswered{}
	r.heard = r.o.Now()
	r.sums = planner.NewSummaries(0)
	r.scale = map[string]map[string]planner.ScaleRequest{}
	r.dirty = map[string]bool{}
	r.gone = map[string]bool{}
	r.inv = newInventory()
	r.deleted = map[string][]status.DeletedMachine{}
	r.deletesFrom, r.termStart = time.Time{}, r.o.Now()
	r.removed = map[string][]planner.Removed{}
	// Listen to inventories before anything is asked of the workers.
	// Parts are decoded on the subscription's goroutine, not the loop's:
	// a 130,000-machine report is over half a second of JSON.
	reports := make(chan inventoryPart, 1024)
	running := make(chan struct{})
	defer close(running)
	isub, err := r.o.JS.Conn().Subscribe(wire.SubjectInventory+".>", func(m *nats.Msg) {
		select {
		case reports <- decodeInventory(m):
		case <-running:
		}
	})
	if err == nil {
		err = isub.SetPendingLimits(-1, inventoryPendingBytes)
	}
	if err != nil {
		return fmt.Errorf("reconciler: inventories: %w", err)
	}
	defer func() { _ = isub.Unsubscribe() }()
	if r.o.StartGC {
		// The live heap grows from nothing to the records' size while
		// they are read: collecting all along re-marks what is still
		// growing (a fifth of a 10,000-cluster restart's CPU). Until the
		// first pass is done, collect only past startFloor.
		if n, err := r.store.Count(ctx); err == nil {
			if floor := startFloor(n); floor > 0 {
				r.undoFloor = gcfloor.Above(floor)
				defer r.releaseFloor()
				// A start that makes no pass soon (no valid revision
				// yet) gives the floor back all the same.
				defer time.AfterFunc(startFloorFor, r.undoFloor).Stop()
			}
		}
	}
	// The rollout records are read while the machines' are (another
	// bucket, one record a cluster: at 10,000 clusters a fifth of a
	// second that a restart no longer waits for after the machines).
	// Each fills its own maps.
	var decided sync.WaitGroup
	var decErr error
	decided.Go(func() { decErr = r.loadDecisions(ctx) })
	err = r.load(ctx)
	decided.Wait()
	if err = errors.Join(err, decErr); err != nil {
		return err
	}
	if len(r.machines) == 0 {
		r.startRebuild()
	} else {
		// A fresh picture of every provider, asked for once the first
		// pass is done: the records are what the first pass plans from,
		// and 130,000 machines listed by every worker at once would
		// compete with it for the CPU (in gitfleet up, the same process).
		r.inv.next()
		r.inv.holdUntil = r.o.Now().Add(inventoryHold)
	}
	// The status writer has read its branch meanwhile (in parallel with
	// the loading above: both take about a second at 10,000 clusters);
	// nothing is acted on before the status can be written.
	if r.o.Status != nil {
		if err := r.o.Status.Ready(ctx); err != nil {
			return fmt.Errorf("reconciler: %w", err)
		}
		r.carryDeleted()
		r.carryApplied()
		r.carryRejection()
	}
	r.carryRemoved()
	r.resume(ctx)

	events := make(chan jetstream.Msg, 1024)
	cons, err := r.o.JS.CreateOrUpdateConsumer(ctx, wire.StreamEvents, jetstream.ConsumerConfig{
		Durable:       "gitfleet-reconciler",
		FilterSubject: wire.SubjectEvents + ".>",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: 4096,
	})
	if err != nil {
		return fmt.Errorf("reconciler: events consumer: %w", err)
	}
	// Short pulls with heartbeats, as the workers' (providers.Worker).
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case events <- m:
		case <-ctx.Done():
			_ = m.Nak() // for the next leader now, not after the ack wait
		}
	}, jetstream.PullExpiry(10*time.Second), jetstream.PullHeartbeat(2*time.Second))
	if err != nil {
		return fmt.Errorf("reconciler: consume events: %w", err)
	}
	var batch []jetstream.Msg // events waiting, handled together
	defer stopEvents(cc, events, &batch)

	joins := make(chan *nats.Msg, 256)
	if r.o.Bootstrap != nil {
		jsub, err := r.o.JS.Conn().ChanSubscribe(wire.SubjectJoin+".>", joins)
		if err != nil {
			return fmt.Errorf("reconciler: join reviews: %w", err)
		}
		defer func() { _ = jsub.Unsubscribe() }()
	}

	beats := make(chan *nats.Msg, 8192)
	sub, err := r.o.JS.Conn().ChanSubscribe(wire.SubjectHeartbeats+".>", beats)
	if err != nil {
		return fmt.Errorf("reconciler: heartbeats: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	r.beats, r.beatsDropped = sub, 0
	// Drops are this subscription's: none yet, and none once the term ends
	// (a replica that no longer leads must not keep failing /readyz).
	r.health.Report(ProblemHeartbeats, nil)
	defer r.health.Report(ProblemHeartbeats, nil)

	tick := time.NewTicker(r.o.Tick)
	defer tick.Stop()
	var reviews []*nats.Msg // join reviews waiting, handled together
	for {
		r.step(ctx)
		select {
		case <-ctx.Done():
			return nil
		case rev, ok := <-r.o.Revisions:
			if !ok {
				r.o.Revisions = nil
				continue
			}
			r.applyRevision(rev)
		case m := <-events:
			batch = append(batch, m)
		case m := <-beats:
			r.handleHeartbeat(ctx, m)
		case m := <-reports:
			r.handleInventory(ctx, m)
			// Taken: the worker sends its next part now, so each worker
			// has one part in flight, not its whole report waiting here
			// decoded while the loop is busy.
			m.answer(r.o.JS.Conn())
		case req := <-r.scaleReqs:
			r.handleScale(ctx, req)
		case m := <-joins:
			reviews = append(reviews, m)
		case <-tick.C:
			r.checkTime(ctx)
			r.checkOrphans(ctx)
			r.inv.pruneRemoved(r.o.Now())
			r.requestInventory()
			if r.o.Status != nil {
				r.health.Report(ProblemStatus, r.o.Status.Err())
			}
		case <-r.health.Changed():
			r.writeFleet()
		}
		// Take everything else that is waiting before planning, so a burst
		// of events costs one plan, and their records one round trip to
		// the store a batch (a heartbeat, which may write a record too,
		// waits for the events before it).
		for drained := false; !drained; {
			select {
			case m := <-events:
				batch = append(batch, m)
				if len(batch) == maxEventBatch {
					r.handleEvents(ctx, batch)
					batch = batch[:0]
				}
			case m := <-beats:
				if len(batch) > 0 {
					r.handleEvents(ctx, batch)
					batch = batch[:0]
				}
				r.handleHeartbeat(ctx, m)
			case m := <-joins:
				reviews = append(reviews, m)
				if len(reviews) == maxEventBatch {
					r.handleJoins(ctx, reviews)
					reviews = reviews[:0]
				}
			default:
				drained = true
			}
		}
		if len(batch) > 0 {
			r.handleEvents(ctx, batch)
			batch = batch[:0]
		}
		if len(reviews) > 0 {
			r.handleJoins(ctx, reviews)
			reviews = reviews[:0]
		}
	}
}

// maxEventBatch bounds the worker events, or the join reviews, handled as
// one batch.
const maxEventBatch = 512

// load reads every machine record from the bucket. Heartbeats were the
// last leader's, in its memory: every running machine gets one heartbeat
// timeout from now to send a fresh one, and keeps the health recorded for
// it until then.
func (r *Reconciler) load(ctx context.Context) error {
	now := r.o.Now()
	type entry struct {
		key   string
		value []byte
		rev   uint64
		rec   *Record
		err   error
	}
	// Decoding 130,000 records is most of a restart's load: it runs on
	// every core while the bucket is still being read, in batches, each
	// worker with its own interner.
	const batchSize = 512
	var read [][]entry // the batches, decoded in place
	batches := make(chan []entry, 64)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			in := newInterner()
			for batch := range batches {
				for i := range batch {
					e := &batch[i]
					e.rec, e.err = decodeShared(e.key, e.value, in)
					e.value = nil
				}
			}
		})
	}
	batch := make([]entry, 0, batchSize)
	err := r.store.Load(ctx, func(key string, value []byte, rev uint64) {
		batch = append(batch, entry{key: key, value: value, rev: rev})
		if len(batch) == batchSize {
			batches <- batch
			read = append(read, batch)
			batch = make([]entry, 0, batchSize)
		}
	})
	batches <- batch
	read = append(read, batch)
	close(batches)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("reconciler: %w", err)
	}
	for _, batch := range read {
		for _, e := range batch {
			if e.err != nil {
				r.log.Error().Err(e.err).Msg("skipping unreadable machine record")
				continue
			}
			m := &machine{rec: e.rec, rev: e.rev}
			if e.rec.Phase == wire.PhaseRunning {
				m.beat, m.healthy = assumedBeat(now, e.rec.Created.Time()), e.rec.Health == nil || e.rec.Health.Healthy
			}
			r.put(m)
		}
	}
	r.log.Info().Int("clusters", len(r.machines)).Msg("observed state loaded")
	return nil
}

// resume publishes again every task a previous leader left in flight: a
// daemon that died between recording a machine and publishing its task
// must not leave it Pending forever. The message IDs are the same, so an
// attempt that was published is deduplicated, and providers are idempotent
// past the deduplication window.
func (r *Reconciler) resume(ctx context.Context) {
	n := 0
	for _, ms := range r.machines {
		for _, m := range ms {
			if m.rec.InFlight() && m.rec.TaskID != "" {
				r.publish(ctx, m)
				n++
			}
		}
	}
	if n == 0 {
		return
	}
	r.log.Info().Int("tasks", n).Msg("resumed tasks in flight")
	r.waitPublished(ctx)
}

func (r *Reconciler) put(m *machine) {
	ms, old := r.machines[m.rec.Cluster].with(m)
	r.machines[m.rec.Cluster] = ms
	if old != nil {
		r.counts.machine(old.rec.Cluster, phaseOf(old.rec), -1)
	}
	r.counts.machine(m.rec.Cluster, phaseOf(m.rec), 1)
	r.dirty[m.rec.Cluster] = true
	r.clock[m.rec.Cluster] = time.Time{}
}

func (r *Reconciler) remove(cluster, name string) {
	if ms, old := r.machines[cluster].without(name); old != nil {
		r.counts.machine(cluster, phaseOf(old.rec), -1)
		if len(ms) == 0 {
			delete(r.machines, cluster)
		} else {
			r.machines[cluster] = ms
		}
	}
	key := recordKey(cluster, name)
	delete(r.unsent, key)
	delete(r.inv.suspects, key)
	r.inv.removed[key] = r.o.Now()
	r.dirty[cluster] = true
}

func (r *Reconciler) lookup(cluster, name string) *machine {
	return r.machines[cluster].get(name)
}

// applyRevision makes a good revision the desired state, or records why a
// rejected one was not applied; the last good revision stays in force.
func (r *Reconciler) applyRevision(rev *sources.Revision) {
	log := r.log.With().Str(logCommit, short(rev.Commit)).Logger()
	if rev.Rejected() {
		if rev.Commit == r.rejected {
			return
		}
		r.rejected = rev.Commit
		r.metrics.RevisionsRejected.Inc()
		log.Warn().Err(rev.Err).Int("errors", len(rev.Errors)).Msg("revision rejected; keeping the last good one")
		r.lastRejected = rejection(rev)
		if r.rev != nil {
			r.rejectedOver = r.rev.Commit
		}
		r.writeFleet()
		return
	}
	if r.rev != nil && r.rev.Commit == rev.Commit {
		if rev.Returned && r.lastRejected != nil {
			// The branch was reset to the revision in force: the refused
			// head is no longer on it, and neither is its refusal.
			log.Info().Str("refused", short(r.lastRejected.Commit)).Msg("the branch's head is back at the revision in force: its refusal no longer applies")
			r.lastRejected, r.rejected, r.rejectedOver = nil, "", ""
			r.writeFleet()
		}
		return // the same revision again (the source's first head, then its event)
	}
	// Clusters whose objects did not change keep their expansion (the
	// same pointer): markChanged compares them in O(1). When the source
	// read this revision as a change of the one applied, it names the
	// objects that changed, and the others are not even looked at.
	var desired *planner.Desired
	var problems []planner.Problem
	if changed, ok := rev.ChangedSince(r.rev); ok && r.desired != nil {
		refs := make([]planner.ObjectRef, len(changed))
		for i, c := range changed {
			refs[i] = planner.ObjectRef{Kind: c.Kind, Name: c.Name}
		}
		desired, problems = planner.ExpandChanged(r.desired, rev.Fleet, rev.ObjectKey, refs)
	} else {
		desired, problems = planner.ExpandReusing(r.desired, rev.Fleet, rev.ObjectKey)
	}
	for _, p := range problems {
		log.Warn().Str("problem", p.Place(rev.Places.At).Error()).Msg("cluster blocked by the planner's rules")
	}
	desired.Change = planner.Change{Commit: rev.Commit, Author: rev.Author, Subject: rev.Subject()}
	prev := r.desired
	r.rev, r.desired = rev, desired
	if rev.Commit != r.rejectedOver {
		// A newer commit resolved the refusal: the refused commit, made
		// the head again (a reset), is refused and said anew.
		r.lastRejected, r.rejected, r.rejectedOver = nil, "", ""
	}
	r.scalesStale = true
	if prev != nil || r.appliedBefore == nil || r.appliedBefore.Commit != rev.Commit {
		// A new leader's first revision, the one fleet.yaml shows applied
		// (sources.WatchOptions.LastGood), was counted by the leader that
		// applied it: only a revision newly applied is counted
		// (carryApplied).
		r.metrics.RevisionsApplied.Inc()
	}
	changed := r.markChanged(prev, desired)
	log.Info().Str("subject", rev.Subject()).Int("clusters", len(desired.Clusters)).Int("changed", changed).Msg("applying revision")
	r.writeFleet()
}

// markChanged marks dirty the clusters a new revision changes: those whose
// expansion differs from the previous revision's (their own objects, their
// class's templates, variables, patches, health checks, wave), those of a
// class whose rollout changed, and those added or removed. The others keep
// their plan: a one-line commit costs one cluster's plan, and the
// clusters its rollout gates are planned when its summary moves (step).
// The first revision a leader applies marks everything. It returns how
// many clusters were marked.
func (r *Reconciler) markChanged(prev, next *planner.Desired) int {
	n := len(r.dirty)
	if len(r.gone) > 0 {
		for _, c := range next.Clusters {
			delete(r.gone, c.Name)
		}
	}
	if prev == nil {
		for _, c := range next.Clusters {
			r.dirty[c.Name] = true
			r.clock[c.Name] = time.Time{} // its health checks may be new
		}
		for name := range r.machines {
			r.dirty[name] = true
		}
		for name := range r.decisions.records.Clusters {
			r.dirty[name] = true
		}
		r.classesChanged = true
		return len(r.dirty) - n
	}
	classes := map[string]bool{}
	for _, c := range next.Classes {
		if old := prev.Class(c.Name); old == nil || !reflect.DeepEqual(old, c) {
			classes[c.Name] = true
		}
	}
	for _, c := range prev.Classes {
		if next.Class(c.Name) == nil {
			classes[c.Name] = true
			r.classesChanged = true
		}
	}
	mark := func(c *planner.DesiredCluster) {
		if old := prev.Cluster(c.Name); classes[c.Class] || old == nil || (old != c && !reflect.DeepEqual(old, c)) {
			r.dirty[c.Name] = true
			r.clock[c.Name] = time.Time{}
		}
	}
	// Every cluster the expansion kept is the previous one itself, the
	// same class included (a class that changed re-expands its clusters):
	// only those it made anew are compared, not all 10,000.
	if expanded, removed, ok := next.Changes(); ok {
		for _, name := range expanded {
			mark(next.Cluster(name))
		}
		for _, name := range removed {
			r.dirty[name] = true
		}
		return len(r.dirty) - n
	}
	for _, c := range next.Clusters {
		mark(c)
	}
	for _, c := range prev.Clusters {
		if next.Cluster(c.Name) == nil {
			r.dirty[c.Name] = true
		}
	}
	return len(r.dirty) - n
}

// step plans every dirty cluster and publishes its new steps. Decisions
// come first: the class rollouts, then each cluster's record, are saved
// before any step that depends on them is published. A pass runs for a
// dirty cluster, or for a class whose summaries the last pass moved: a
// cluster done in the pass that admitted it (a class change that moves
// none of its machines) sends no event, and its wave's end must still
// open the next wave, on the next wake-up (the tick at the latest).
func (r *Reconciler) step(ctx context.Context) {
	if r.rebuilding() || r.desired == nil || (len(r.dirty) == 0 && len(r.moved) == 0) {
		return
	}
	start := r.o.Now()
	now := start
	if r.classesChanged {
		r.forgetClasses(ctx)
		r.classesChanged = false
	}
	if r.scalesStale && len(r.scale) > 0 {
		r.scalesStale = !r.forgetScales(ctx)
	}
	// A cluster's summary gates the other clusters of its class (waves):
	// when one changes, the clusters whose gate it changes are planned
	// again too (below). moved outlives a pass that stops before
	// planning (a rollout decision that cannot be saved): the summaries
	// have moved by then, and the next pass must still find the clusters
	// they gate.
	if r.moved == nil {
		r.moved = map[string]bool{}
	}
	moved := r.moved
	// The machines of each dirty cluster as the planner sees them, and
	// its summary, are worked out on every core when the pass is large (a
	// leader's first plans every cluster); their effects are applied here,
	// in order. Machines do not change within a pass: the planning below
	// reuses them.
	names := make([]string, 0, len(r.dirty))
	for name := range r.dirty {
		names = append(names, name)
	}
	obs := make([][]planner.ObservedMachine, len(names))
	sums := make([]planner.Summary, len(names))
	parallel(len(names), func(i int) {
		obs[i] = r.observed(names[i])
		if dc := r.desired.Cluster(names[i]); dc != nil {
			sums[i] = planner.Summarize(planner.Scaled(dc, r.scale[dc.Name]), r.decisions.records.Cluster(dc.Name), obs[i], now)
		}
	})
	observed := make(map[string][]planner.ObservedMachine, len(names))
	for i, name := range names {
		observed[name] = obs[i]
		dc := r.desired.Cluster(name)
		if dc == nil {
			if s, ok := r.sums.Delete(name); ok {
				moved[s.Class] = true // one cluster fewer in its wave
			}
			continue
		}
		if r.sums.Set(name, sums[i]) {
			moved[dc.Class] = true
		}
	}
	recs := &r.decisions.records
	// Classes whose inputs did not change keep the last pass's decision.
	gates := planner.RolloutsSince(r.gates, r.desired, r.sums, recs.Rollouts, now)
	changed := gates.Changed()
	if !r.saveRollouts(ctx, changed) {
		return // everything stays dirty; planned again on the next wake-up
	}
	for _, rec := range changed {
		// A new revision that moves no summary (a class change no
		// cluster's machines show) is still a new rollout for fleet.yaml.
		moved[rec.Class] = true
	}
	// A cluster's plan depends on the others only through its gate: of
	// the classes whose summaries moved, plan the clusters whose gate
	// changed (a wave opened, a rollout halted), not all 10,000.
	if len(moved) > 0 || r.gates == nil {
		for _, dc := range r.desired.Clusters {
			if moved[dc.Class] && (r.gates == nil || r.gates.For(dc.Name) != gates.For(dc.Name)) {
				r.dirty[dc.Name] = true
			}
		}
		clear(moved)
		r.countRollouts(gates.Classes()) // only when a rollout may have moved
		r.rollouts = statusRollouts(gates.Classes())
		r.writeFleet()
	}
	r.gates = gates
	r.planSeq++
	planID := fmt.Sprintf("%s-%d", short(r.rev.Commit), r.planSeq)
	var intents []*intent
	var planned []plannedCluster
	var held []string // clusters with a delete held (holdDelete)
	backoff := planner.Backoff{Base: r.o.RetryInterval, Jitter: jitter}
	locate := r.rev.Places.At // a Blocked condition names its field's line
	// Plans too are made on every core for a large pass (the planner is
	// pure; NewName, the caller's, is called one at a time), and carried
	// out here, in order.
	names = names[:0]
	for name := range r.dirty {
		names = append(names, name)
	}
	var nameMu sync.Mutex
	newName := func(cluster, pool string) string {
		nameMu.Lock()
		defer nameMu.Unlock()
		return r.o.NewName(cluster, pool)
	}
	results := make([]planner.ClusterResult, len(names))
	parallel(len(names), func(i int) {
		name := names[i]
		ms, ok := observed[name]
		if !ok {
			ms = r.observed(name) // dirtied by its gate, above
		}
		results[i] = planner.PlanCluster(planner.ClusterInput{
			Name: name, Desired: r.desired.Cluster(name), Machines: ms, Record: recs.Cluster(name),
			Gate: gates.For(name), Now: now, NewName: newName, Backoff: backoff, Scale: r.scale[name],
			Locate: locate, Removed: r.removed[name],
		})
	})
	for i, name := range names {
		res := results[i]
		r.settleRemoved(name, res.Settled)
		if res.RecordChanged {
			if !r.saveClusterRecord(ctx, res.Record) {
				continue // stays dirty: no step before its decision is recorded
			}
			if dc := r.desired.Cluster(name); dc != nil && r.summarize(dc, now) {
				moved[dc.Class] = true // the next pass looks at its class's gates
			}
		}
		delete(r.dirty, name)
		r.metrics.ClustersPlanned.Inc()
		if r.checkedCluster(name) != nil {
			r.planned[name] = now // checkTime plans it again when a check comes due
		} else {
			delete(r.planned, name)
		}
		var alike shapes // the cluster's steps share their records' shapes
		hold := false
		for _, s := range res.Steps {
			if r.holdDelete(s, now) {
				hold = true
				continue
			}
			if in := r.intend(s, planID, &alike); in != nil {
				intents = append(intents, in)
			}
		}
		r.setWake(name, res.Wake)
		if hold {
			held = append(held, name)
		}
		planned = append(planned, plannedCluster{name, res.Status})
	}
	// Every record of the pass is saved before any of its tasks is
	// published, and before the status shows them.
	if r.carryOut(ctx, intents) > 0 {
		r.waitPublished(ctx)
	}
	r.writeClusters(planned, planID)
	r.metrics.PlanDuration.Observe(r.o.Now().Sub(start).Seconds())
	r.inv.holdUntil = time.Time{} // the first pass is done: ask for inventories
	if r.deletesFrom.IsZero() {
		// Counted from now, not from the pass's start: a first pass may
		// take longer than InventoryWait, and nothing was asked before.
		r.deletesFrom = r.o.Now().Add(r.o.InventoryWait)
	}
	for _, name := range held {
		if w, ok := r.wake[name]; !ok || r.deletesFrom.Before(w) {
			r.wake[name] = r.deletesFrom // planned again then
		}
	}
	r.releaseFloor()
	r.counts.export(r.metrics)
}

// holdDelete says whether step s waits for deletesFrom: the delete of a
// machine made before this term that it takes as Running, not removed for
// its health or absence, before its first inventories are in.
func (r *Reconciler) holdDelete(s planner.Step, now time.Time) bool {
	if s.Op != wire.OpDelete || s.Removal != "" || (!r.deletesFrom.IsZero() && !now.Before(r.deletesFrom)) {
		return false
	}
	m := r.lookup(s.Machine.Cluster, s.Machine.Name)
	return m != nil && m.rec.Phase == wire.PhaseRunning && m.rec.Created.Time().Before(r.termStart)
}

// startFloor is how much a new leader lets its heap grow, beyond what the
// process holds already, before collecting while it reads n records and
// makes its first pass: 8 KiB a record (twice what a machine holds once
// running), at most 4 GiB, none under 64 MiB (8,192 records: a small
// fleet's start is quick anyway).
func startFloor(n uint64) int64 {
	floor := int64(min(n, 1<<19)) * 8 << 10
	if floor < 64<<20 {
		return 0
	}
	return floor
}

// startFloorFor is the longest a start keeps its collection floor: a
// first pass comes within seconds of a start, unless there is no valid
// revision to plan.
const startFloorFor = 2 * time.Minute

// releaseFloor gives collection back to Go's default (StartGC).
func (r *Reconciler) releaseFloor() {
	if r.undoFloor != nil {
		r.undoFloor()
		r.undoFloor = nil
	}
}

// summarize recomputes a cluster's summary and reports whether it changed.
func (r *Reconciler) summarize(dc *planner.DesiredCluster, now time.Time) bool {
	sum := planner.Summarize(planner.Scaled(dc, r.scale[dc.Name]), r.decisions.records.Cluster(dc.Name), r.observed(dc.Name), now)
	return r.sums.Set(dc.Name, sum)
}

// setWake remembers when time alone changes a cluster's plan.
func (r *Reconciler) setWake(cluster string, at time.Time) {
	if at.IsZero() {
		delete(r.wake, cluster)
		return
	}
	r.wake[cluster] = at
}

// observed returns a cluster's machines as the planner sees them.
func (r *Reconciler) observed(cluster string) []planner.ObservedMachine {
	ms := r.machines[cluster]
	out := make([]planner.ObservedMachine, 0, len(ms))
	for _, m := range ms {
		out = append(out, r.observe(m))
	}
	return out
}

// observe returns m as the planner sees it.
func (r *Reconciler) observe(m *machine) planner.ObservedMachine {
	o := m.observed()
	if !o.LastHeartbeat.IsZero() && o.LastHeartbeat.Before(r.heard) {
		// Heartbeats missed while this leader could not hear them
		// (disconnected from NATS) count from when it could again.
		o.LastHeartbeat = r.heard
	}
	return o
}

// countRollouts sets the rollout gauges from a pass's class rollouts.
func (r *Reconciler) countRollouts(classes []planner.ClassRollout) {
	r.metrics.RolloutWave.Reset()
	for _, c := range classes {
		var done, updating, waiting int
		for _, w := range c.Waves {
			done += w.Done
			updating += len(w.Updating)
			waiting += len(w.Waiting)
		}
		for state, n := range map[string]int{"done": done, "updating": updating, "waiting": waiting, "failed": len(c.Failed)} {
			r.metrics.RolloutClusters.WithLabelValues(c.Class, state).Set(float64(n))
		}
		if c.CurrentWave != "" {
			r.metrics.RolloutWave.WithLabelValues(c.Class, c.CurrentWave).Set(1)
		}
		halted := 0.0
		if c.Halted {
			halted = 1
		}
		r.metrics.RolloutHalted.WithLabelValues(c.Class).Set(halted)
	}
}

// Log field names.
const (
	logCommit  = "commit"
	logCluster = "cluster"
	logMachine = "machine"
)

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// stopEvents ends a term's consumption of events: it stops pulling and
// waits until the subscription is gone, so that the server, which reads
// the connection in order, delivers nothing published after the loop
// returned to a pull of this term, where it would wait the consumer's
// ack wait (30 s) before the next leader got it; then it hands back the
// events taken but not handled (batch, and those still in events), for
// the next leader at once.
func stopEvents(cc jetstream.ConsumeContext, events chan jetstream.Msg, batch *[]jetstream.Msg) {
	cc.Stop()
	select {
	case <-cc.Closed():
	case <-time.After(5 * time.Second):
	}
	for _, m := range *batch {
		_ = m.Nak()
	}
	for {
		select {
		case m := <-events:
			_ = m.Nak()
		default:
			return
		}
	}
}
