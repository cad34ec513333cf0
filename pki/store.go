package pki

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Keys of the gitfleet-pki bucket.
const (
	metaKey     = "meta.key" // a sealed marker: which key seals the bucket
	metaMarker  = "gitfleet-pki"
	caPrefix    = "ca."    // ca.<cluster>: a sealed Cluster
	tokenPrefix = "token." // token.<cluster>.<machine>: a sealed Token
)

// Store keeps clusters' trust material and bootstrap tokens in the
// gitfleet-pki bucket, every value sealed under the keyring's current key.
type Store struct {
	kv   jetstream.KeyValue
	keys *Keyring
}

// OpenStore opens the bucket (made by natsbus.Ensure) with keys. A bucket
// sealed under a key the ring does not hold is an error that changes
// nothing; one sealed under a previous key of the ring is sealed again
// under the current key, value by value, and resealed reports how many.
func OpenStore(ctx context.Context, js jetstream.JetStream, keys *Keyring) (s *Store, resealed int, err error) {
	kv, err := js.KeyValue(ctx, wire.BucketPKI)
	if err != nil {
		return nil, 0, fmt.Errorf("bucket %s: %w", wire.BucketPKI, err)
	}
	s = &Store{kv: kv, keys: keys}
	e, err := kv.Get(ctx, metaKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		// A new bucket, or one whose values were all made before the
		// marker (none): mark it with the current key.
		if _, err := kv.Create(ctx, metaKey, keys.Seal(metaKey, []byte(metaMarker))); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, 0, fmt.Errorf("bucket %s: %w", wire.BucketPKI, err)
		}
		return s, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("bucket %s: %w", wire.BucketPKI, err)
	}
	_, rotated, err := keys.Open(metaKey, e.Value())
	if err != nil {
		if errors.Is(err, ErrWrongKey) {
			return nil, 0, fmt.Errorf("the secrets in bucket %s were sealed under another key than --secrets-key-file's (%w); start with the key they were sealed under, or, to rotate, give the new key as --secrets-key-file and the old one as --secrets-previous-key-file", wire.BucketPKI, err)
		}
		return nil, 0, err
	}
	if !rotated {
		return s, 0, nil
	}
	if resealed, err = s.reseal(ctx); err != nil {
		return nil, resealed, err
	}
	// The marker goes last: a rotation cut short is finished at the next
	// start, which still needs the previous key.
	if _, err := kv.Update(ctx, metaKey, keys.Seal(metaKey, []byte(metaMarker)), e.Revision()); err != nil {
		return nil, resealed, fmt.Errorf("bucket %s: marking the new key: %w", wire.BucketPKI, err)
	}
	return s, resealed, nil
}

// OpenStoreReadOnly opens the bucket to read it, as a command line tool
// does: it writes nothing, and a bucket sealed under another key is an
// error.
func OpenStoreReadOnly(ctx context.Context, js jetstream.JetStream, keys *Keyring) (*Store, error) {
	kv, err := js.KeyValue(ctx, wire.BucketPKI)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", wire.BucketPKI, err)
	}
	e, err := kv.Get(ctx, metaKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return nil, fmt.Errorf("bucket %s: %w", wire.BucketPKI, err)
	default:
		if _, _, err := keys.Open(metaKey, e.Value()); err != nil {
			return nil, fmt.Errorf("the secrets in bucket %s were sealed under another key than --secrets-key-file's: %w", wire.BucketPKI, err)
		}
	}
	return &Store{kv: kv, keys: keys}, nil
}

// reseal seals every value sealed under a previous key again under the
// current one.
func (s *Store) reseal(ctx context.Context) (int, error) {
	keys, err := s.kv.ListKeys(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for k := range keys.Keys() {
		if k == metaKey {
			continue
		}
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return n, err
		}
		plain, rotated, err := s.keys.Open(k, e.Value())
		if err != nil {
			return n, err
		}
		if !rotated {
			continue
		}
		if _, err := s.kv.Update(ctx, k, s.keys.Seal(k, plain), e.Revision()); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return n, fmt.Errorf("resealing %s: %w", k, err)
		}
		n++
	}
	return n, nil
}

// get opens the value at k into v; found is false when there is none.
func (s *Store) get(ctx context.Context, k string, v any) (found bool, err error) {
	e, err := s.kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	plain, _, err := s.keys.Open(k, e.Value())
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(plain, v)
}

func (s *Store) seal(k string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return s.keys.Seal(k, b), nil
}

// Cluster returns the cluster's trust material, making it (for a control
// plane at endpoint) the first time it is asked for. Two daemons asking at
// once get the same material: the first to store it wins.
func (s *Store) Cluster(ctx context.Context, cluster, endpoint string, now time.Time) (*Cluster, error) {
	k := caPrefix + cluster
	var c Cluster
	if found, err := s.get(ctx, k, &c); err != nil || found {
		return &c, err
	}
	made, err := NewClusterAt(cluster, endpoint, now)
	if err != nil {
		return nil, err
	}
	b, err := s.seal(k, made)
	if err != nil {
		return nil, err
	}
	if _, err := s.kv.Create(ctx, k, b); errors.Is(err, jetstream.ErrKeyExists) {
		_, err = s.get(ctx, k, &c)
		return &c, err
	} else if err != nil {
		return nil, err
	}
	return made, nil
}

// HasCluster says whether the cluster's material exists, without making it.
func (s *Store) HasCluster(ctx context.Context, cluster string) (*Cluster, bool, error) {
	var c Cluster
	found, err := s.get(ctx, caPrefix+cluster, &c)
	return &c, found, err
}

// IssueToken makes and stores a bootstrap token for one machine's
// creation, replacing one it had.
func (s *Store) IssueToken(ctx context.Context, cluster, machine string, ttl time.Duration, now time.Time) (Token, error) {
	t := NewToken(machine, ttl, now)
	k := tokenPrefix + cluster + "." + machine
	b, err := s.seal(k, t)
	if err != nil {
		return Token{}, err
	}
	_, err = s.kv.Put(ctx, k, b)
	return t, err
}

// Token returns a machine's token, if it has one.
func (s *Store) Token(ctx context.Context, cluster, machine string) (Token, bool, error) {
	var t Token
	found, err := s.get(ctx, tokenPrefix+cluster+"."+machine, &t)
	return t, found, err
}

// MarkUsed records that the machine joined with its token.
func (s *Store) MarkUsed(ctx context.Context, cluster, machine string, t Token, now time.Time) error {
	t.Used = now.UTC()
	k := tokenPrefix + cluster + "." + machine
	b, err := s.seal(k, t)
	if err != nil {
		return err
	}
	_, err = s.kv.Put(ctx, k, b)
	return err
}

// RevokeToken removes a machine's token: the machine went.
func (s *Store) RevokeToken(ctx context.Context, cluster, machine string) error {
	err := s.kv.Delete(ctx, tokenPrefix+cluster+"."+machine)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	return err
}

// DeleteCluster removes a deleted cluster's material and tokens.
func (s *Store) DeleteCluster(ctx context.Context, cluster string) error {
	keys, err := s.kv.ListKeysFiltered(ctx, caPrefix+cluster, tokenPrefix+cluster+".*")
	if err != nil {
		return err
	}
	for k := range keys.Keys() {
		if err := s.kv.Delete(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
	}
	return nil
}
