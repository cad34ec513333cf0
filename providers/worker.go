package providers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Worker feeds one provider the tasks on gitfleet.tasks.<provider>.> from a
// durable pull consumer, publishes the resulting events and acknowledges
// each task only once its outcome event is stored.
type Worker struct {
	js   jetstream.JetStream
	p    Provider
	o    WorkerOptions
	cons jetstream.Consumer
	// stall is how long an event publish may wait for room among pending ones.
	stall jetstream.PublishOpt

	malformed, succeeded, failed, retried atomic.Uint64

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
}

// ErrWorker is wrapped by a worker's setup and run errors.
var ErrWorker = errors.New("worker")

// NewWorker creates or updates the provider's durable consumer on
// GITFLEET_TASKS (the stream must exist: natsbus.Ensure). Call Run to work.
func NewWorker(ctx context.Context, js jetstream.JetStream, p Provider, opts WorkerOptions) (*Worker, error) {
	o := opts.withDefaults(p.Name())
	cons, err := js.CreateOrUpdateConsumer(ctx, wire.StreamTasks, jetstream.ConsumerConfig{
		Durable:       o.Durable,
		Description:   "gitfleet worker for provider " + p.Name(),
		FilterSubject: wire.SubjectTasks + "." + p.Name() + ".>",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxDeliver:    -1, // the worker counts attempts itself and fails the task
		MaxAckPending: max(4096, 4*o.Concurrency),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: consumer %s: %w", ErrWorker, o.Durable, err)
	}
	return &Worker{js: js, p: p, o: o, cons: cons, stall: jetstream.WithStallWait(o.AckWait / 3),
		stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	return Stats{
		Malformed: w.malformed.Load(),
		Succeeded: w.succeeded.Load(),
		Failed:    w.failed.Load(),
		Retried:   w.retried.Load(),
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
	queues := make([]chan jetstream.Msg, n)
	slots := make([]*progress, n)
	var wg sync.WaitGroup
	for i := range queues {
		queues[i], slots[i] = make(chan jetstream.Msg, 32), &progress{w: w}
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

	cc, err := w.cons.Consume(func(msg jetstream.Msg) {
		select {
		case queues[shardOf(msg.Subject(), n)] <- msg:
		case <-stopped:
			_ = msg.Nak()
		}
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		w.o.Log.Warn().Err(err).Str("provider", w.p.Name()).Msg("task consumer")
	}))
	if err != nil {
		finish()
		return fmt.Errorf("%w: consume: %w", ErrWorker, err)
	}
	w.o.Log.Info().Str("provider", w.p.Name()).Int("concurrency", n).Msg("worker started")
	select {
	case <-ctx.Done():
	case <-w.stop:
	}
	w.o.Log.Info().Str("provider", w.p.Name()).Msg("worker draining")
	closeStopped()
	cc.Stop()
	select {
	case <-cc.Closed():
	case <-time.After(5 * time.Second):
	}
	finish()
	w.o.Log.Info().Str("provider", w.p.Name()).Msg("worker stopped")
	return nil
}

// shard runs the tasks of its machines one at a time, so events about one
// machine are published in the order its tasks arrived.
func (w *Worker) shard(ctx context.Context, q <-chan jetstream.Msg, slot *progress, stopped <-chan struct{}, acks chan<- pendingAck) {
	for {
		select {
		case <-stopped:
			for {
				select {
				case m := <-q:
					_ = m.Nak()
				default:
					return
				}
			}
		case m := <-q:
			select {
			case <-stopped:
				_ = m.Nak()
				continue
			default:
			}
			w.handle(ctx, m, slot, acks)
		}
	}
}

// shardOf hashes a subject (FNV-1a) onto one of n shards.
func shardOf(subject string, n int) int {
	h := uint32(2166136261)
	for i := 0; i < len(subject); i++ {
		h ^= uint32(subject[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}
