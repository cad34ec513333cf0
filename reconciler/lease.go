package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// leaderKey is the one key of the gitfleet-leader bucket.
const leaderKey = "leader"

// Lease elects one leader among daemon replicas that share a NATS server.
// The leader holds a key in a KV bucket whose TTL expires it; it renews the
// key every ttl/3 and steps down as soon as a renewal fails, so a follower
// can only take over once the old leader has stopped acting as one.
//
// Fence tells the leader's writers whether the lease is surely still held:
// until one TTL (less a margin) after the last renewal was sent. A leader
// that was paused (SIGSTOP) past that point writes nothing when it resumes,
// even before its next renewal fails.
type Lease struct {
	kv  jetstream.KeyValue
	id  string
	ttl time.Duration
	log zerolog.Logger

	mu    sync.Mutex
	until time.Time // the lease is surely ours before this (monotonic)
}

// NewLease returns a lease on kv for the replica named id. ttl must match the
// bucket's TTL: it is how long a dead leader keeps the lease.
func NewLease(kv jetstream.KeyValue, id string, ttl time.Duration, log zerolog.Logger) *Lease {
	return &Lease{kv: kv, id: id, ttl: ttl, log: log.With().Str("replica", id).Logger()}
}

// Run campaigns until ctx ends. Each time this replica becomes leader, lead
// runs with a context that is cancelled when leadership is lost; Run waits for
// lead to return before it campaigns again. On the way out the lease is
// released so a follower takes over at once.
func (l *Lease) Run(ctx context.Context, lead func(ctx context.Context)) error {
	retry := l.ttl / 3
	for {
		sent := time.Now()
		rev, err := l.acquire(ctx)
		switch {
		case err == nil:
			l.held(sent)
			l.log.Info().Msg("elected leader")
			if err := l.hold(ctx, rev, lead); err != nil {
				return err
			}
		case ctx.Err() != nil:
			return nil
		case !errors.Is(err, jetstream.ErrKeyExists):
			l.log.Warn().Err(err).Msg("leader election failed; retrying")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
	}
}

// acquire takes the lease if it is free, or if it is still ours (a renewal
// that failed on a dropped connection).
func (l *Lease) acquire(ctx context.Context) (uint64, error) {
	rev, err := l.kv.Create(ctx, leaderKey, []byte(l.id))
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return rev, err
	}
	e, gerr := l.kv.Get(ctx, leaderKey)
	if gerr != nil || string(e.Value()) != l.id {
		return 0, err
	}
	return l.kv.Update(ctx, leaderKey, []byte(l.id), e.Revision())
}

// hold runs lead while renewing the lease. It returns nil when leadership
// was lost (Run campaigns again) and when ctx ended (Run returns).
func (l *Lease) hold(ctx context.Context, rev uint64, lead func(ctx context.Context)) error {
	leadCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(leadCtx)
	}()
	stop := func() {
		cancel()
		<-done
	}
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			stop()
			l.held(time.Time{})
			l.release()
			return nil
		case <-done:
			// lead gave up on its own: let another replica try.
			cancel()
			l.held(time.Time{})
			l.release()
			return nil
		case <-tick.C:
			sent := time.Now()
			rctx, rcancel := context.WithTimeout(ctx, l.ttl/3)
			next, err := l.kv.Update(rctx, leaderKey, []byte(l.id), rev)
			rcancel()
			if err != nil && ctx.Err() != nil {
				// Stopped while a renewal was on its way: hand over
				// at once, as on any other way out.
				stop()
				l.held(time.Time{})
				l.release()
				return nil
			}
			if err != nil {
				l.held(time.Time{})
				l.log.Warn().Err(err).Msg("lost leadership: lease renewal failed")
				stop()
				return nil
			}
			l.held(sent)
			rev = next
		}
	}
}

// held notes a renewal sent at sent (zero: the lease is not held).
func (l *Lease) held(sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sent.IsZero() {
		l.until = time.Time{}
		return
	}
	l.until = sent.Add(l.ttl - l.ttl/5)
}

// Fence returns nil while the lease is surely held, ErrNotLeader otherwise.
// Writers of the leader call it before each write.
func (l *Lease) Fence() error {
	l.mu.Lock()
	until := l.until
	l.mu.Unlock()
	if until.IsZero() {
		return fmt.Errorf("%w: this replica holds no lease", ErrNotLeader)
	}
	if late := time.Since(until); late > 0 {
		return fmt.Errorf("%w: lease not renewed for %s", ErrNotLeader, (l.ttl - l.ttl/5 + late).Round(time.Millisecond))
	}
	return nil
}

// release deletes the lease if this replica still holds it, so a follower
// takes over at its next try instead of after the TTL. It reads the key's
// revision rather than trusting the last renewal's: a renewal whose answer
// was lost (stopped mid-flight) may still have landed.
func (l *Lease) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for range 3 {
		e, err := l.kv.Get(ctx, leaderKey)
		if err != nil || string(e.Value()) != l.id {
			if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
				l.log.Debug().Err(err).Msg("releasing lease")
			}
			return
		}
		// The revision guard keeps a lease another replica took since.
		err = l.kv.Delete(ctx, leaderKey, jetstream.LastRevision(e.Revision()))
		if err == nil {
			l.log.Info().Msg("released leadership")
			return
		}
		l.log.Debug().Err(err).Msg("releasing lease")
		if ctx.Err() != nil {
			return
		}
	}
}

// Holder says who holds the lease: this replica (leading), another
// (holder, its id), or nobody (holder ""). err says the bucket could not be
// read.
func (l *Lease) Holder(ctx context.Context) (holder string, leading bool, err error) {
	if l.Fence() == nil {
		return l.id, true, nil
	}
	e, err := l.kv.Get(ctx, leaderKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return string(e.Value()), false, nil
}
