package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Store is a KV bucket of JSON values written with compare-and-set: every
// write names the revision it replaces (0: the key must not exist), so a
// write based on a stale read — another leader's, or one of ours that was
// lost — fails instead of overwriting. The reconciler keeps its machine
// records in one; other state the leader must not lose across a restart
// (rollout decisions) belongs in one too.
//
// The rule for callers: build the next value on a copy, Save it, and only
// when Save succeeded put the copy and the returned revision in memory. A
// failed Save leaves memory as it was, and the caller tries again later.
type Store struct {
	kv      jetstream.KeyValue
	js      jetstream.JetStream // for SaveAsync; nil: SaveAsync saves at once
	timeout time.Duration
	// fence, when set, is asked before every write: a replica that is no
	// longer sure to be the leader writes nothing.
	fence func() error
}

// ErrConflict: the key's revision is not the one the write was based on.
var ErrConflict = errors.New("stored value changed underneath")

// ErrNotLeader is returned by writes of a replica whose lease may be gone.
var ErrNotLeader = errors.New("not the leader")

// NewStore wraps kv. fence may be nil; js, when set, lets SaveAsync keep
// many writes in flight.
func NewStore(kv jetstream.KeyValue, fence func() error, js jetstream.JetStream) *Store {
	return &Store{kv: kv, js: js, timeout: 10 * time.Second, fence: fence}
}

// Saving is a write started by SaveAsync.
type Saving struct {
	s   *Store
	key string
	f   jetstream.PubAckFuture
	rev uint64 // when it is already done
	err error
}

// SaveAsync starts writing v under key if the key is at revision rev (0:
// absent), the same compare-and-set as Save, without waiting: a planning
// pass starts all its writes, then waits for them together, so intent
// costs one round trip per pass rather than one per machine.
func (s *Store) SaveAsync(key string, v any, rev uint64) *Saving {
	sv := &Saving{s: s, key: key}
	if s.js == nil {
		sv.rev, sv.err = s.Save(context.Background(), key, v, rev)
		return sv
	}
	data, err := encode(v)
	if err == nil {
		err = s.check()
	}
	if err != nil {
		sv.err = fmt.Errorf("save %s: %w", key, err)
		return sv
	}
	// A KV put is a message on $KV.<bucket>.<key>; the expected last
	// sequence of the subject is the revision it replaces.
	msg := nats.NewMsg("$KV." + s.kv.Bucket() + "." + key)
	msg.Data = data
	sv.f, err = s.js.PublishMsgAsync(msg, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithStallWait(s.timeout))
	if err != nil {
		sv.err = fmt.Errorf("save %s: %w", key, err)
	}
	return sv
}

// Wait returns the new revision once the write is stored.
func (sv *Saving) Wait(ctx context.Context) (uint64, error) {
	if sv.f == nil {
		return sv.rev, sv.err
	}
	ctx, cancel := context.WithTimeout(ctx, sv.s.timeout)
	defer cancel()
	select {
	case ack := <-sv.f.Ok():
		return ack.Sequence, nil
	case err := <-sv.f.Err():
		return 0, fmt.Errorf("save %s: %w", sv.key, conflict(err))
	case <-ctx.Done():
		return 0, fmt.Errorf("save %s: %w", sv.key, ctx.Err())
	}
}

// DeleteAsync starts deleting key if it is at revision rev, the same
// compare-and-set as Delete, without waiting (Wait's revision is the
// delete marker's).
func (s *Store) DeleteAsync(key string, rev uint64) *Saving {
	sv := &Saving{s: s, key: key}
	if s.js == nil {
		sv.err = s.Delete(context.Background(), key, rev)
		return sv
	}
	if err := s.check(); err != nil {
		sv.err = fmt.Errorf("delete %s: %w", key, err)
		return sv
	}
	// A KV delete is a marker message on the key's subject.
	msg := nats.NewMsg("$KV." + s.kv.Bucket() + "." + key)
	msg.Header.Set(kvOperation, kvDelete)
	f, err := s.js.PublishMsgAsync(msg, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithStallWait(s.timeout))
	if err != nil {
		sv.err = fmt.Errorf("delete %s: %w", key, err)
		return sv
	}
	sv.f = f
	return sv
}

// The header and value of a KV delete marker (as nats.go's KeyValue.Delete
// writes it).
const (
	kvOperation = "KV-Operation"
	kvDelete    = "DEL"
)

// encode is v's JSON as stored: a Record's own (storedJSON), anything
// else encoding/json's.
func encode(v any) ([]byte, error) {
	if r, ok := v.(*Record); ok {
		return r.storedJSON()
	}
	return json.Marshal(v)
}

// Save writes v under key if the key is at revision rev (0: absent), and
// returns the new revision.
func (s *Store) Save(ctx context.Context, key string, v any, rev uint64) (uint64, error) {
	data, err := encode(v)
	if err != nil {
		return 0, fmt.Errorf("save %s: %w", key, err)
	}
	if err := s.check(); err != nil {
		return 0, fmt.Errorf("save %s: %w", key, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var next uint64
	if rev == 0 {
		next, err = s.kv.Create(ctx, key, data)
	} else {
		next, err = s.kv.Update(ctx, key, data, rev)
	}
	if err != nil {
		return 0, fmt.Errorf("save %s: %w", key, conflict(err))
	}
	return next, nil
}

// Delete removes key if it is at revision rev. A key that is already gone
// is not an error.
func (s *Store) Delete(ctx context.Context, key string, rev uint64) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := s.kv.Delete(ctx, key, jetstream.LastRevision(rev))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("delete %s: %w", key, conflict(err))
	}
	return nil
}

// Get reads one key: its value (nil when absent) and revision.
func (s *Store) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", key, err)
	}
	return e.Value(), e.Revision(), nil
}

// Load calls fn for every key in the bucket with its value and revision.
func (s *Store) Load(ctx context.Context, fn func(key string, value []byte, rev uint64)) error {
	w, err := s.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("read %s: %w", s.kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				return nil // initial values done
			}
			fn(e.Key(), e.Value(), e.Revision())
		case <-ctx.Done():
			return fmt.Errorf("read %s: %w", s.kv.Bucket(), ctx.Err())
		}
	}
}

// Count is how many values the bucket holds (its status; deleted keys'
// markers included until purged).
func (s *Store) Count(ctx context.Context) (uint64, error) {
	st, err := s.kv.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("status of %s: %w", s.kv.Bucket(), err)
	}
	return st.Values(), nil
}

func (s *Store) check() error {
	if s.fence == nil {
		return nil
	}
	return s.fence()
}

// conflict maps JetStream's "wrong last sequence" and "key exists" to
// ErrConflict.
func conflict(err error) error {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) || wrongLastSequence(err) {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}

// wrongLastSequence: a publish whose expected last subject sequence did not
// hold (a compare-and-set that lost).
func wrongLastSequence(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		var jerr jetstream.JetStreamError
		if !errors.As(err, &jerr) || jerr.APIError() == nil {
			return false
		}
		api = jerr.APIError()
	}
	return api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}
