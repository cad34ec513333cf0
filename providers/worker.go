package providers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Worker feeds one provider the tasks on gitfleet.tasks.<provider>.> from a
// durable pull consumer, publishes the resulting events and acknowledges
// each task only once its outcome event is stored.
type Worker struct {
	js        jetstream.JetStream
	p         Provider
	o         WorkerOptions
	hostBound bool
	records   *records // the daemon's machine records, read to refuse stale tasks
	cons      []jetstream.Consumer
	// stall is how long an event publish may wait for room among pending ones.
	stall jetstream.PublishOpt

	malformed, succeeded, failed, retried, stale, inventories atomic.Uint64

	running  atomic.Bool
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// Stats counts what a worker did since it was made.
type Stats struct {
	Malformed uint64 // terminated because they could not be decoded
	Succeeded uint64 // provider call succeeded (acked once the event is stored)
	Failed    uint64 // permanent failure or out of attempts: Failed event, terminated
	Retried   uint64 // transient failure: redelivered after a backoff
	Stale     uint64 // dropped: the machine's record is on other work (Task.Stale)
	// Inventories counts the inventory reports published.
	Inventories uint64
}

// ErrWorker is wrapped by a worker's setup and run errors.
var ErrWorker = errors.New("worker")

// NewWorker creates or updates the provider's durable consumers on
// GITFLEET_TASKS (the stream must exist: natsbus.Ensure). Every worker of a
// provider shares one consumer of the tasks any worker may take; a worker
// of a HostBound provider also has its own, for the tasks routed to it.
// Call Run to work.
func NewWorker(ctx context.Context, js jetstream.JetStream, p Provider, opts WorkerOptions) (*Worker, error) {
	o := opts.withDefaults(p.Name())
	o.Log = o.Log.With().Str("provider", p.Name()).Logger()
	if !validID(o.ID) {
		return nil, fmt.Errorf("%w: worker ID %q: use letters, digits, '-' and '_' (not first), at most %d of them (the part before the first '_' names the worker's NATS credentials)", ErrWorker, o.ID, wire.MaxWorkerID)
	}
	w := &Worker{js: js, p: p, o: o, hostBound: isHostBound(p), stall: jetstream.WithStallWait(o.AckWait / 3),
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := w.consumers(ctx); err != nil {
		return nil, err
	}
	if o.Records != nil {
		w.records = o.Records.r
		return w, nil
	}
	recs, err := NewRecords(ctx, js)
	if err != nil {
		return nil, err
	}
	w.records = recs.r
	return w, nil
}

// consumers creates or updates the worker's consumers: the shared one
// first, so that its filter no longer overlaps the worker's own (a
// work-queue stream refuses overlapping consumers).
func (w *Worker) consumers(ctx context.Context) error {
	base := wire.SubjectTasks + "." + w.p.Name()
	cfgs := []jetstream.ConsumerConfig{{
		Durable:       w.o.Durable,
		Description:   "gitfleet workers of provider " + w.p.Name(),
		FilterSubject: base + ".>",
	}}
	if w.hostBound {
		cfgs[0].FilterSubject = base + ".*.*"
		cfgs = append(cfgs, jetstream.ConsumerConfig{
			Durable:       w.o.Durable + "-" + w.o.ID,
			Description:   "gitfleet worker " + w.o.ID + " of provider " + w.p.Name() + ": tasks about its machines",
			FilterSubject: base + ".*.*." + w.o.ID,
		})
	}
	w.cons = w.cons[:0]
	for _, cfg := range cfgs {
		cfg.AckPolicy = jetstream.AckExplicitPolicy
		cfg.AckWait = w.o.AckWait
		cfg.MaxDeliver = -1 // the worker counts attempts itself and fails the task
		cfg.MaxAckPending = max(4096, 4*w.o.Concurrency)
		// Within a minute unless ctx says otherwise, asking again while
		// a just-formed cluster leaves the request unanswered.
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		var c jetstream.Consumer
		err := natsbus.Attempts(actx, func(ctx context.Context) (err error) {
			c, err = w.js.CreateOrUpdateConsumer(ctx, wire.StreamTasks, cfg)
			return err
		})
		cancel()
		if err != nil {
			return fmt.Errorf("%w: consumer %s: %w", ErrWorker, cfg.Durable, err)
		}
		w.cons = append(w.cons, c)
	}
	return nil
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	return Stats{
		Malformed: w.malformed.Load(),
		Succeeded: w.succeeded.Load(),
		Failed:    w.failed.Load(),
		Retried:   w.retried.Load(),
		Stale:     w.stale.Load(),

		Inventories: w.inventories.Load(),
	}
}

// Close stops Run (draining in-flight work) and waits until it returned.
func (w *Worker) Close() {
	w.stopOnce.Do(func() { close(w.stop) })
	if w.running.Load() {
		<-w.done
	}
}

// Run works until ctx is cancelled or Close is called, then stops fetching,
// hands back queued tasks (Nak), lets in-flight provider calls finish (up to
// DrainTimeout), acks them and returns.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: Run called twice", ErrWorker)
	}
	defer close(w.done)
	workCtx, workCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer workCancel()

	stopped := make(chan struct{})
	acks := make(chan pendingAck, 1024)
	ackDone := make(chan struct{})
	go func() { defer close(ackDone); w.acker(acks) }()

	n := w.o.Concurrency
	queues := make([]chan queued, n)
	slots := make([]*progress, n)
	var wg sync.WaitGroup
	for i := range queues {
		queues[i], slots[i] = make(chan queued, 32), &progress{w: w}
		wg.Add(1)
		go func() { defer wg.Done(); w.shard(workCtx, queues[i], slots[i], stopped, acks) }()
	}
	tickCtx, tickStop := context.WithCancel(context.Background())
	tickDone := make(chan struct{})
	go func() { defer close(tickDone); w.tickProgress(tickCtx, slots) }()
	closeStopped := sync.OnceFunc(func() { close(stopped) })
	finish := func() {
		closeStopped()
		t := time.AfterFunc(w.o.DrainTimeout, workCancel)
		wg.Wait()
		t.Stop()
		tickStop()
		<-tickDone
		close(acks)
		<-ackDone
	}

	handler := func(msg jetstream.Msg) {
		select {
		case queues[shardOf(msg.Subject(), n)] <- queued{msg: msg, at: time.Now()}:
		case <-stopped:
			_ = msg.Nak()
		}
	}
	lost := make(chan struct{}, 1)
	ccs, err := w.consume(handler, lost)
	if err != nil {
		finish()
		return err
	}
	invCtx, invStop := context.WithCancel(context.Background())
	invDone := make(chan struct{}, 1)
	go func() { defer func() { invDone <- struct{}{} }(); w.inventory(invCtx) }()
	releaseRecords := w.records.use()
	w.o.Log.Info().Str("worker", w.o.ID).Bool("hostBound", w.hostBound).
		Int("concurrency", n).Msg("worker started")
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-w.stop:
			running = false
		case <-lost:
			// The consumers are gone (a NATS store was lost or replaced):
			// make them again, and the stream if need be.
			stopAll(ccs)
			ccs = w.recreate(ctx, handler, lost)
		}
	}
	w.o.Log.Info().Msg("worker draining")
	closeStopped()
	stopAll(ccs)
	finish()
	invStop()
	<-invDone
	releaseRecords()
	w.o.Log.Info().Msg("worker stopped")
	return nil
}

// consume starts consuming every consumer of the worker; lost is signalled
// when one of them was deleted.
func (w *Worker) consume(handler jetstream.MessageHandler, lost chan<- struct{}) ([]jetstream.ConsumeContext, error) {
	var ccs []jetstream.ConsumeContext
	for _, c := range w.cons {
		// Short pulls with heartbeats: a pull the server lost (its
		// consumer's leader died with a NATS node) is noticed and made
		// again within seconds, not the default half minute.
		cc, err := c.Consume(handler, jetstream.PullExpiry(10*time.Second), jetstream.PullHeartbeat(2*time.Second), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
				select {
				case lost <- struct{}{}:
				default:
				}
			}
			w.o.Log.Warn().Err(err).Msg("task consumer")
		}))
		if err != nil {
			stopAll(ccs)
			return nil, fmt.Errorf("%w: consume: %w", ErrWorker, err)
		}
		ccs = append(ccs, cc)
	}
	return ccs, nil
}

// recreate makes the consumers again, with backoff, until it works or the
// worker stops.
func (w *Worker) recreate(ctx context.Context, handler jetstream.MessageHandler, lost chan<- struct{}) []jetstream.ConsumeContext {
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := w.ensure(cctx)
		if err == nil {
			err = w.consumers(cctx)
		}
		cancel()
		if err == nil {
			ccs, err := w.consume(handler, lost)
			if err == nil {
				w.o.Log.Info().Msg("task consumers made again")
				return ccs
			}
		}
		d := ExponentialBackoff(time.Second, 30*time.Second)(attempt)
		w.o.Log.Warn().Err(err).Dur("retryIn", d).Msg("cannot make the task consumers again")
		select {
		case <-ctx.Done():
			return nil
		case <-w.stop:
			return nil
		case <-time.After(d):
		}
	}
}

func stopAll(ccs []jetstream.ConsumeContext) {
	for _, cc := range ccs {
		cc.Stop()
	}
	for _, cc := range ccs {
		select {
		case <-cc.Closed():
		case <-time.After(5 * time.Second):
		}
	}
}

// shard runs the tasks of its machines one at a time, so events about one
// machine are published in the order its tasks arrived.
func (w *Worker) shard(ctx context.Context, q <-chan queued, slot *progress, stopped <-chan struct{}, acks chan<- pendingAck) {
	for {
		select {
		case <-stopped:
			for {
				select {
				case m := <-q:
					_ = m.msg.Nak()
				default:
					return
				}
			}
		case m := <-q:
			select {
			case <-stopped:
				_ = m.msg.Nak()
				continue
			default:
			}
			w.handle(ctx, m, slot, acks)
		}
	}
}

// queued is a delivered task waiting for its shard, with the time it
// arrived: JetStream gives a task to another worker once AckWait has passed
// without an ack or an in-progress ack, so one that waited too long here is
// no longer this worker's to run (handle).
type queued struct {
	msg jetstream.Msg
	at  time.Time
}

// shardOf hashes a task subject's machine (FNV-1a of
// gitfleet.tasks.<provider>.<cluster>.<machine>, without the worker of a
// routed task) onto one of n shards.
func shardOf(subject string, n int) int {
	dots := 0
	for i := 0; i < len(subject); i++ {
		if subject[i] == '.' {
			if dots++; dots == 5 {
				subject = subject[:i]
				break
			}
		}
	}
	h := uint32(2166136261)
	for i := 0; i < len(subject); i++ {
		h ^= uint32(subject[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}
