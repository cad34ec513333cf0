package bootstrap

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"

	"time"

	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Issuer is the daemon's side: it makes a cluster's PKI when the cluster
// is first planned, issues each machine creation its token, and seals the
// machine's bootstrap data for the create task.
type Issuer struct {
	store *pki.Store
	keys  *pki.Keyring
	ttl   time.Duration
}

// NewIssuer issues from store, sealing under keys; tokens live ttl
// (0: pki.DefaultTokenTTL).
func NewIssuer(store *pki.Store, keys *pki.Keyring, ttl time.Duration) *Issuer {
	if ttl <= 0 {
		ttl = pki.DefaultTokenTTL
	}
	return &Issuer{store: store, keys: keys, ttl: ttl}
}

// Request is one create's bootstrap: the machine, whether it initialises
// its cluster, the cluster's network and its control plane's provider.
type Request struct {
	Machine              wire.Machine
	TaskID               string
	Init                 bool
	Network              Network
	ControlPlaneProvider string
	Now                  time.Time
	// First: the create's first publication, by the daemon that recorded
	// it, so no token can have been issued to it: one is issued without
	// looking for an earlier one.
	First bool
}

// Seal makes the machine's cluster PKI if it has none and the machine
// initialises it (a joining machine needs the existing one), issues the machine
// a token unless an earlier attempt of its creation has one, and returns
// its bootstrap data sealed under the task's ID.
func (i *Issuer) Seal(ctx context.Context, r Request) ([]byte, error) {
	m := r.Machine
	trust, err := i.trust(ctx, r)
	if err != nil {
		return nil, err
	}
	// One token per machine creation: an attempt published again (a
	// restart, a task timeout) carries the token the first one had, which
	// the machine made by it may already hold; a new one only when that
	// one was used or has expired.
	var tok pki.Token
	found := false
	if !r.First {
		if tok, found, err = i.store.Token(ctx, m.Cluster, m.Name); err != nil {
			return nil, fmt.Errorf("machine %s/%s token: %w", m.Cluster, m.Name, err)
		}
	}
	if !found || !tok.Used.IsZero() || !r.Now.Before(tok.Expires) {
		if tok, err = i.store.IssueToken(ctx, m.Cluster, m.Name, i.ttl, r.Now); err != nil {
			return nil, fmt.Errorf("machine %s/%s token: %w", m.Cluster, m.Name, err)
		}
	}
	ud, err := UserData(Input{Machine: m, Init: r.Init, Endpoint: trust.Endpoint, Network: r.Network, Token: tok, Trust: trust, Now: r.Now})
	if err != nil {
		return nil, err
	}
	return i.keys.Seal(r.TaskID, ud), nil
}

// ErrNoCA: a machine joins a cluster whose CA is not in the gitfleet-pki
// bucket (the bucket was lost). None is made for it: the cluster's
// running control plane trusts only the CA it was made with.
var ErrNoCA = errors.New("no CA")

// trust is the cluster's PKI. Only the machine that initialises the
// cluster makes it; one that joins needs the CA the cluster was made
// with, as Cluster API's kubeadm bootstrap provider looks a joining
// machine's certificates up and never generates them.
func (i *Issuer) trust(ctx context.Context, r Request) (*pki.Cluster, error) {
	c := r.Machine.Cluster
	if r.Init {
		trust, err := i.store.Cluster(ctx, c, DefaultEndpoint(c, r.ControlPlaneProvider), r.Now)
		if err != nil {
			return nil, fmt.Errorf("cluster %s PKI: %w", c, err)
		}
		return trust, nil
	}
	trust, found, err := i.store.HasCluster(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("cluster %s PKI: %w", c, err)
	}
	if !found {
		return nil, fmt.Errorf("%w: cluster %s has no CA in bucket %s, and machine %s joins its running control plane, which trusts only the CA it was made with: "+
			"restore the bucket from its backup (docs/operations.md, \"Backup and restore\"), or, to start the cluster again with a new CA, remove it from the fleet and add it back",
			ErrNoCA, c, wire.BucketPKI, r.Machine.Name)
	}
	return trust, nil
}

// Revoke removes a machine's token: the machine went.
func (i *Issuer) Revoke(ctx context.Context, cluster, machine string) error {
	return i.store.RevokeToken(ctx, cluster, machine)
}

// Forget removes a deleted cluster's PKI and tokens.
func (i *Issuer) Forget(ctx context.Context, cluster string) error {
	return i.store.DeleteCluster(ctx, cluster)
}

// Open is the worker's side: the machine's bootstrap data from a create
// task, with the secrets key the daemon sealed it under.
func Open(keys *pki.Keyring, t *wire.Task) ([]byte, error) {
	if keys == nil {
		return nil, fmt.Errorf("the task carries sealed bootstrap data and this worker has no secrets key; give it the daemon's --secrets-key-file")
	}
	b, _, err := keys.Open(t.ID, t.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("bootstrap data: %w; give the worker the daemon's --secrets-key-file", err)
	}
	return b, nil
}

// RetryWindow is how long after a join the same join, asked again (its
// answer was lost on the way), is answered the same.
const RetryWindow = 2 * time.Minute

// Review checks the token a node presents: it must be the one issued to
// the node's creation, unused and not expired. For a good token reason is
// empty (the caller records the join, then calls Used); otherwise reason
// says why it is refused. again says the token was used by this very
// join less than RetryWindow ago: the answer is the same. err is the
// store's trouble, not the token's.
func (i *Issuer) Review(ctx context.Context, r wire.JoinReview, now time.Time) (reason string, again bool, err error) {
	tok, found, err := i.store.Token(ctx, r.Cluster, r.Node)
	if err != nil {
		return "", false, err
	}
	if !found {
		return fmt.Sprintf("no bootstrap token is outstanding for machine %s/%s: the machine went", r.Cluster, r.Node), false, nil
	}
	if tok.ID != r.TokenID || subtle.ConstantTimeCompare([]byte(tok.Hash()), []byte(r.SecretHash)) != 1 {
		return fmt.Sprintf("the bootstrap token is not the one issued to machine %s/%s", r.Cluster, r.Node), false, nil
	}
	if !tok.Used.IsZero() {
		if now.Sub(tok.Used) < RetryWindow {
			return "", true, nil
		}
		return fmt.Sprintf("machine %s/%s joined at %s; its token is used", r.Cluster, r.Node, tok.Used.Format(time.RFC3339)), false, nil
	}
	if now.After(tok.Expires) {
		return fmt.Sprintf("the bootstrap token of machine %s/%s expired at %s", r.Cluster, r.Node, tok.Expires.Format(time.RFC3339)), false, nil
	}
	return "", false, nil
}

// Used marks the machine's token used: it admits nobody from now on.
func (i *Issuer) Used(ctx context.Context, r wire.JoinReview, now time.Time) error {
	tok, found, err := i.store.Token(ctx, r.Cluster, r.Node)
	if err != nil || !found {
		return err
	}
	return i.store.MarkUsed(ctx, r.Cluster, r.Node, tok, now)
}

// ReviewOf is what a reviewer sends for a node presenting token: its ID
// and the hash of its secret, never the secret.
func ReviewOf(cluster, node, token string) (wire.JoinReview, error) {
	id, secret, err := pki.ParseToken(token)
	if err != nil {
		return wire.JoinReview{}, err
	}
	t := pki.Token{ID: id, Secret: secret}
	return wire.JoinReview{Cluster: cluster, Node: node, TokenID: id, SecretHash: t.Hash()}, nil
}
