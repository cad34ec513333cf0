// Package inmemory is a provider whose machines are records in memory, with
// a configurable provisioning delay and failure rate. It exists for scale
// tests and benchmarks, like Cluster API's in-memory provider.
package inmemory

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Name of the provider in machine templates and task subjects.
const Name = "inmemory"

// Spec is a machine's inmemory spec; every field overrides the provider's
// Options for that machine.
type Spec struct {
	ProvisioningDelay    *providers.Duration `json:"provisioningDelay,omitempty"`
	ProvisioningDelayMax *providers.Duration `json:"provisioningDelayMax,omitempty"` // random in [delay, max]
	FailureRate          *float64            `json:"failureRate,omitempty"`          // 0..1
}

// Options are the provider-wide defaults.
type Options struct {
	ProvisioningDelay    time.Duration
	ProvisioningDelayMax time.Duration
	FailureRate          float64
}

// ErrSimulatedFailure is the permanent error of a machine that failed by
// FailureRate.
var ErrSimulatedFailure = errors.New("inmemory: simulated provisioning failure")

type key struct{ cluster, name string }

// Provider keeps machines in a map; safe for concurrent use.
type Provider struct {
	opts     Options
	mu       sync.RWMutex
	machines map[key]string // → Kubernetes version
}

var _ providers.Provider = (*Provider)(nil)

// New returns an empty provider with the given defaults.
func New(opts Options) *Provider {
	return &Provider{opts: opts, machines: make(map[key]string)}
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// Len is the number of machines.
func (p *Provider) Len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.machines)
}

func (p *Provider) settings(m wire.Machine) (Options, error) {
	var s Spec
	if err := providers.DecodeSpec(Name, m.Spec, &s); err != nil {
		return Options{}, err
	}
	o := p.opts
	if s.ProvisioningDelay != nil {
		o.ProvisioningDelay = time.Duration(*s.ProvisioningDelay)
	}
	if s.ProvisioningDelayMax != nil {
		o.ProvisioningDelayMax = time.Duration(*s.ProvisioningDelayMax)
	}
	if s.FailureRate != nil {
		o.FailureRate = *s.FailureRate
	}
	if o.FailureRate < 0 || o.FailureRate > 1 {
		return Options{}, providers.Permanent(fmt.Errorf("inmemory: machine spec: failureRate %v must be between 0 and 1", o.FailureRate))
	}
	return o, nil
}

func instance(k key, version string) providers.Instance {
	return providers.Instance{Cluster: k.cluster, Name: k.name, ProviderID: "inmemory://" + k.cluster + "/" + k.name, Version: version}
}

// Create implements providers.Provider.
func (p *Provider) Create(ctx context.Context, m wire.Machine) (providers.Instance, error) {
	k := key{m.Cluster, m.Name}
	p.mu.RLock()
	v, ok := p.machines[k]
	p.mu.RUnlock()
	if ok {
		return instance(k, v), nil
	}
	o, err := p.settings(m)
	if err != nil {
		return providers.Instance{}, err
	}
	if err := sleep(ctx, delay(o)); err != nil {
		return providers.Instance{}, err
	}
	if o.FailureRate > 0 && rand.Float64() < o.FailureRate {
		return providers.Instance{}, providers.Permanent(fmt.Errorf("%w of %s/%s", ErrSimulatedFailure, m.Cluster, m.Name))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.machines[k]; ok {
		return instance(k, v), nil
	}
	p.machines[k] = m.Version
	return instance(k, m.Version), nil
}

// Delete implements providers.Provider.
func (p *Provider) Delete(ctx context.Context, m wire.Machine) error {
	k := key{m.Cluster, m.Name}
	p.mu.RLock()
	_, ok := p.machines[k]
	p.mu.RUnlock()
	if !ok {
		return nil
	}
	o, err := p.settings(m)
	if err != nil {
		o = p.opts // a spec that no longer parses must not block deletion
	}
	if err := sleep(ctx, delay(o)); err != nil {
		return err
	}
	p.mu.Lock()
	delete(p.machines, k)
	p.mu.Unlock()
	return nil
}

// List implements providers.Provider; sorted by cluster, then name.
func (p *Provider) List(ctx context.Context) ([]providers.Instance, error) {
	p.mu.RLock()
	out := make([]providers.Instance, 0, len(p.machines))
	for k, v := range p.machines {
		out = append(out, instance(k, v))
	}
	p.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cluster != out[j].Cluster {
			return out[i].Cluster < out[j].Cluster
		}
		return out[i].Name < out[j].Name
	})
	return out, ctx.Err()
}

func delay(o Options) time.Duration {
	d := o.ProvisioningDelay
	if o.ProvisioningDelayMax > d {
		d += rand.N(o.ProvisioningDelayMax - d + 1)
	}
	return d
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return providers.Transient(fmt.Errorf("inmemory: %w", ctx.Err()))
	}
}
