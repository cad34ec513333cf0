// Package providers holds the Provider interface every machine provider
// implements and the worker that feeds it tasks from NATS JetStream.
// Implementations live in subpackages (inmemory, local); providertest is the
// conformance suite they all pass.
package providers

import (
	"context"
	"errors"
	"fmt"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Provider makes machines real. Every operation is idempotent by machine
// (cluster + name): creating an existing machine returns it, deleting a
// missing one succeeds. Errors wrapping ErrPermanent are never retried;
// every other error is retried with backoff (wrap ErrTransient to say so).
type Provider interface {
	// Name is the provider's name in machine templates and task subjects.
	Name() string
	// Create makes the machine and returns once it is running.
	Create(ctx context.Context, m wire.Machine) (Instance, error)
	// Delete removes the machine and returns once it is gone.
	Delete(ctx context.Context, m wire.Machine) error
	// List returns every machine this provider owns.
	List(ctx context.Context) ([]Instance, error)
}

// Walker is a Provider that can hand its machines over as it reads them:
// a worker reporting its inventory then holds one part of the report, not
// the whole List (at 130,000 machines, tens of MiB for each report).
type Walker interface {
	// Walk calls f with every machine List would return, in any order,
	// until f returns an error, which Walk returns. f may keep what it is
	// given.
	Walk(ctx context.Context, f func(Instance) error) error
}

// Instance is a machine as the provider sees it.
type Instance struct {
	Cluster    string
	Name       string
	ProviderID string   // e.g. local://12345, inmemory://cluster/name
	Addresses  []string // e.g. 127.0.0.1:40123
	Version    string   // Kubernetes version it runs
	// What the machine was made from, as far as the provider knows it
	// (from the wire.Machine it was created with): List reports them so a
	// daemon that lost its store can rebuild its records.
	Deployment   string
	Role         wire.Role
	TemplateHash string
	Labels       map[string]string
	Annotations  map[string]string
	// Reason, when set, says the provider has the machine but it is not
	// running (a CamelCase word, like NodeExited); Message says more. List
	// reports such machines; the daemon replaces them.
	Reason  string
	Message string
}

// Watcher is implemented by providers that learn at once when one of their
// machines stops outside a task (a local node's process ended, a docker
// container died or was removed): Changed receives then, and the worker
// reports its inventory right away instead of at its next interval, so the
// daemon replaces the machine within moments, not after a heartbeat timeout
// or an inventory interval.
type Watcher interface {
	Changed() <-chan struct{}
}

// HostBound is implemented by providers whose machines live on the host of
// the worker that made them (local): a task about such a machine is routed
// to that worker, and each worker's inventory covers its own machines.
type HostBound interface {
	HostBound() bool
}

func isHostBound(p Provider) bool {
	hb, ok := p.(HostBound)
	return ok && hb.HostBound()
}

// Sentinel errors classifying provider failures.
var (
	ErrTransient = errors.New("transient")
	ErrPermanent = errors.New("permanent")
)

// Transient marks err as worth retrying.
func Transient(err error) error { return fmt.Errorf("%w: %w", ErrTransient, err) }

// Permanent marks err as final: the task fails and is not retried.
func Permanent(err error) error { return fmt.Errorf("%w: %w", ErrPermanent, err) }

// IsPermanent reports whether err must not be retried.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }
