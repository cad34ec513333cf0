package providers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// records is what a worker knows of the daemon's machine records: a copy
// of their task fields kept by a watch on the bucket, so that checking a
// task (wire.Task.Stale) costs no round trip in the common case. The copy
// only ever says "current": a task it does not know, or knows as stale, is
// checked again with a read of the record itself before it is dropped. It
// holds only the records with a task in flight, the only ones on which a
// task can be current (the leader records Pending or Deleting before it
// publishes): a fleet that runs costs it nothing.
type records struct {
	kv jetstream.KeyValue

	mu     sync.RWMutex
	m      map[string]cachedRecord
	peak   int // the most records m held since it was last made anew
	maxRev uint64

	// The watch runs while a worker uses the copy (use): workers of one
	// process may share one (Records).
	life  sync.Mutex
	users int
	stop  context.CancelFunc
	done  chan struct{}
}

// Records is a copy of the daemon's machine records that several workers
// of one process share (WorkerOptions.Records), as gitfleet up's workers
// do: one watch of the bucket and one copy in memory (about 200 bytes a
// machine with a task in flight) for all of them, not one each.
type Records struct{ r *records }

// NewRecords makes a copy to share; it is kept up to date while a worker
// that has it runs.
func NewRecords(ctx context.Context, js jetstream.JetStream) (*Records, error) {
	kv, err := js.KeyValue(ctx, wire.BucketMachines)
	if err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %w", ErrWorker, wire.BucketMachines, err)
	}
	return &Records{newRecords(kv)}, nil
}

// use starts the watch for its first user; release stops it after the
// last user, once it has ended.
func (r *records) use() (release func()) {
	r.life.Lock()
	defer r.life.Unlock()
	if r.users == 0 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		r.stop, r.done = cancel, done
		go func() {
			defer close(done)
			r.watch(ctx)
		}()
	}
	r.users++
	var once sync.Once
	return func() {
		once.Do(func() {
			r.life.Lock()
			defer r.life.Unlock()
			if r.users--; r.users == 0 {
				r.stop()
				<-r.done
			}
		})
	}
}

type cachedRecord struct {
	rec wire.TaskRecord
	rev uint64
}

func newRecords(kv jetstream.KeyValue) *records {
	return &records{kv: kv, m: map[string]cachedRecord{}}
}

// watch keeps the copy up to date until ctx ends, starting again (empty)
// whenever the watch stops.
func (r *records) watch(ctx context.Context) {
	for attempt := 1; ctx.Err() == nil; attempt++ {
		r.reset()
		w, err := r.kv.WatchAll(ctx)
		if err == nil {
			attempt = 0
			r.follow(ctx, w)
			_ = w.Stop()
		}
		select {
		case <-ctx.Done():
		case <-time.After(ExponentialBackoff(100*time.Millisecond, 10*time.Second)(max(attempt, 1))):
		}
	}
}

func (r *records) follow(ctx context.Context, w jetstream.KeyWatcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue // the initial values are in
			}
			r.apply(e)
		}
	}
}

func (r *records) apply(e jetstream.KeyValueEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Revision() < r.maxRev {
		// Revisions went back: the bucket was made again (a lost store).
		r.m, r.peak = map[string]cachedRecord{}, 0
	}
	r.maxRev = e.Revision()
	if e.Operation() != jetstream.KeyValuePut {
		r.forget(e.Key())
		return
	}
	rec, err := wire.DecodeTaskRecord(e.Value())
	if err != nil || !rec.Phase.InFlight() {
		r.forget(e.Key())
		return
	}
	r.m[e.Key()] = cachedRecord{rec: rec, rev: e.Revision()}
	r.peak = max(r.peak, len(r.m))
}

// forget drops key from the copy. A Go map keeps the room of the most it
// ever held: once a fleet's creates are done (130,000 records in flight,
// then none) m is made anew at its size.
func (r *records) forget(key string) {
	delete(r.m, key)
	if r.peak >= 1024 && len(r.m) < r.peak/8 {
		m := make(map[string]cachedRecord, len(r.m))
		maps.Copy(m, r.m) // not maps.Clone, which keeps the room
		r.m, r.peak = m, len(m)
	}
}

func (r *records) reset() {
	r.mu.Lock()
	r.m, r.peak = map[string]cachedRecord{}, 0
	r.maxRev = 0
	r.mu.Unlock()
}

// staleness says why task is stale ("" when it is the record's current
// work). An error means the record could not be read; the task is retried.
func (r *records) staleness(ctx context.Context, task *wire.Task) (string, error) {
	key := wire.RecordKey(task.Machine.Cluster, task.Machine.Name)
	r.mu.RLock()
	c, ok := r.m[key]
	r.mu.RUnlock()
	if ok && c.rev >= task.Revision && task.Stale(&c.rec, c.rev) == "" {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	e, err := r.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return task.Stale(nil, 0), nil
	}
	if err != nil {
		return "", fmt.Errorf("read the machine's record: %w", err)
	}
	rec, err := wire.DecodeTaskRecord(e.Value())
	if err != nil {
		return "", err
	}
	return task.Stale(&rec, e.Revision()), nil
}
