// Package inmemory is a provider whose machines are records with a
// configurable provisioning delay and failure rate, like Cluster API's
// in-memory provider. It exists for scale tests, benchmarks and faults.
//
// The records live in a NATS KV bucket (gitfleet-inmemory), not in the
// worker's memory: the bucket is one shared "cloud" for every inmemory
// worker, which outlives their restarts as a real cloud outlives its
// clients, and which any worker may list and delete from.
package inmemory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Name of the provider in machine templates and task subjects.
const Name = "inmemory"

// Bucket is the KV bucket that holds the machines.
const Bucket = wire.BucketInmemory

// BucketDescription is the bucket's description, as the daemon makes it
// (natsbus.Ensure).
const BucketDescription = "machines of the inmemory provider"

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
	// Bucket overrides the bucket name (tests use one per provider).
	Bucket string
	// Replicas of the bucket when New makes it (0: 1). An existing one
	// keeps its settings: the daemon owns them (natsbus.Ensure, with
	// --nats-replicas), and a worker's credentials may not change them.
	Replicas int
}

// ErrSimulatedFailure is the permanent error of a machine that failed by
// FailureRate.
var ErrSimulatedFailure = errors.New("inmemory: simulated provisioning failure")

// Provider keeps machines in a KV bucket; safe for concurrent use, and any
// number of Providers (in any number of processes) on one bucket are one
// cloud.
type Provider struct {
	opts Options
	kv   jetstream.KeyValue
	js   jetstream.JetStream
	nc   *nats.Conn // asks the leader to review machines' bootstrap tokens
	// legacy is true when the bucket held machines under keys of their
	// own as the provider started: Create looks for them too.
	legacy bool
	writes clusterWrites
}

var _ providers.Provider = (*Provider)(nil)

// New opens the provider's bucket on js as it is, making it only when it
// is missing (which a worker's credentials may not: their worker waits for
// the daemon to make it, natsbus.EnsureMissing).
func New(ctx context.Context, js jetstream.JetStream, opts Options) (*Provider, error) {
	if opts.Bucket == "" {
		opts.Bucket = Bucket
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, opts.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: opts.Bucket,
			Description: BucketDescription, History: 1, Storage: jetstream.FileStorage, Replicas: max(opts.Replicas, 1)})
	}
	if err != nil {
		return nil, fmt.Errorf("inmemory: bucket %s: %w", opts.Bucket, err)
	}
	p := &Provider{opts: opts, kv: kv, js: js, nc: js.Conn()}
	legacy, err := p.hasLegacy(ctx)
	if err != nil {
		return nil, fmt.Errorf("inmemory: bucket %s: %w", opts.Bucket, err)
	}
	p.legacy = legacy
	return p, nil
}

// hasLegacy reports whether the bucket holds a machine under a key of its
// own ("<cluster>.<machine>"), as the provider wrote them before. Deleted
// keys leave a marker, which is not one.
func (p *Provider) hasLegacy(ctx context.Context) (bool, error) {
	stream := "KV_" + p.kv.Bucket()
	cons, err := p.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy,
		DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, FilterSubject: "$KV." + p.kv.Bucket() + ".*.*",
		MemoryStorage: true, InactiveThreshold: time.Minute})
	if err != nil {
		return false, err
	}
	defer p.deleteConsumer(ctx, stream, cons)
	if cons.CachedInfo().NumPending == 0 {
		return false, nil
	}
	for {
		found, done := false, false
		err := fetch(ctx, cons, func(msg jetstream.Msg) {
			found = found || msg.Headers().Get("KV-Operation") == ""
		}, &done)
		if err != nil || found || done {
			return found, err
		}
	}
}

func (p *Provider) deleteConsumer(ctx context.Context, stream string, cons jetstream.Consumer) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = p.js.DeleteConsumer(dctx, stream, cons.CachedInfo().Name)
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// The cloud keeps one key a cluster: its value (cloudCluster) holds the
// cluster's machines in groups of those alike (everything but the name).
// A key a machine cost the embedded NATS server an entry of its subject
// index for every machine, and every inventory read one message a
// machine; a key a cluster costs a thirteenth of that at 13 machines a
// cluster (docs/providers.md). Writes to a cluster's key are
// compare-and-set, so providers in any number of processes are one cloud,
// and the writes one process makes to one cluster at the same time are
// made together (clusterWrites).
//
// Keys of the form "<cluster>.<machine>" (record) are what the provider
// wrote before: List reports them, Delete removes them, and Create finds
// them when the bucket had any as the provider started (legacy).

// record is one machine under a key of its own, as the provider wrote
// machines before it kept one key a cluster.
type record struct {
	Machine wire.Machine `json:"machine"`
	Created time.Time    `json:"created"`
}

func legacyKey(cluster, name string) string { return cluster + "." + name }

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

func instance(m wire.Machine) providers.Instance {
	return providers.Instance{Cluster: m.Cluster, Name: m.Name, ProviderID: "inmemory://" + m.Cluster + "/" + m.Name,
		Version: m.Version, Deployment: m.Deployment, Role: m.Role, TemplateHash: m.TemplateHash, Labels: m.Labels, Annotations: m.Annotations}
}

// readCluster reads a cluster's key: its machines and the key's revision
// (0: the cloud has no machine of the cluster under it).
func (p *Provider) readCluster(ctx context.Context, cluster string) (cloudCluster, uint64, error) {
	return p.readClusterIf(ctx, cluster, nil)
}

// readClusterIf is readCluster, which decodes the value only if it has
// the bytes want (nil: always); a value without them reads as no machine.
func (p *Provider) readClusterIf(ctx context.Context, cluster string, want []byte) (cloudCluster, uint64, error) {
	e, err := p.kv.Get(ctx, cluster)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return cloudCluster{}, 0, nil
	}
	if err != nil {
		return cloudCluster{}, 0, providers.Transient(fmt.Errorf("inmemory: read %s: %w", cluster, err))
	}
	if want != nil && !bytes.Contains(e.Value(), want) {
		return cloudCluster{}, e.Revision(), nil
	}
	c, err := decodeCluster(e.Value())
	if err != nil {
		return cloudCluster{}, 0, providers.Permanent(fmt.Errorf("inmemory: cluster %s's machines: %w", cluster, err))
	}
	return c, e.Revision(), nil
}

// getLegacy reads a machine under a key of its own; ok is false when the
// cloud has no such key.
func (p *Provider) getLegacy(ctx context.Context, cluster, name string) (wire.Machine, bool, error) {
	k := legacyKey(cluster, name)
	e, err := p.kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return wire.Machine{}, false, nil
	}
	if err != nil {
		return wire.Machine{}, false, providers.Transient(fmt.Errorf("inmemory: read %s: %w", k, err))
	}
	var r record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return wire.Machine{}, false, providers.Permanent(fmt.Errorf("inmemory: machine %s: %w", k, err))
	}
	return r.Machine, true, nil
}

// get reads a machine; ok is false when the cloud does not have it. A
// machine under a key of its own is looked for when withLegacy is true.
//
// The cluster's value is decoded only when it has the bytes a machine of
// that name is written as (names are tokens, which JSON writes as they
// are): the lookup before every create no longer decodes the cluster's
// every machine. Another writer's spacing would only make Create look
// further: its write reads the value whole (writeCluster).
func (p *Provider) get(ctx context.Context, cluster, name string, withLegacy bool) (m wire.Machine, ok, legacy bool, err error) {
	c, _, err := p.readClusterIf(ctx, cluster, []byte(`"name":"`+name+`"`))
	if err != nil {
		return wire.Machine{}, false, false, err
	}
	if m, ok, err := c.find(name); err != nil || ok {
		if err != nil {
			err = providers.Permanent(fmt.Errorf("inmemory: machine %s/%s: %w", cluster, name, err))
		}
		return m, ok, false, err
	}
	if !withLegacy {
		return wire.Machine{}, false, false, nil
	}
	m, ok, err = p.getLegacy(ctx, cluster, name)
	return m, ok, ok, err
}

// Create implements providers.Provider: the machine is written with
// compare-and-set, so concurrent creates by any workers make one machine.
func (p *Provider) Create(ctx context.Context, m wire.Machine) (providers.Instance, error) {
	if !wire.ValidToken(m.Cluster) || !wire.ValidToken(m.Name) {
		return providers.Instance{}, providers.Permanent(fmt.Errorf("inmemory: %q/%q is not usable as a machine name", m.Cluster, m.Name))
	}
	o, err := p.settings(m)
	d := delay(o)
	// A machine the cloud has already is what a create gets, without the
	// delay, failure or join review of a new one. When none of those
	// applies, the write below finds it (w.found), and a read first would
	// cost every create a round trip for nothing.
	if p.legacy || err != nil || d > 0 || o.FailureRate > 0 || len(m.Bootstrap) > 0 {
		if have, ok, _, gerr := p.get(ctx, m.Cluster, m.Name, p.legacy); gerr != nil || ok {
			return instance(have), gerr
		}
	}
	if err != nil {
		return providers.Instance{}, err
	}
	if err := sleep(ctx, d); err != nil {
		return providers.Instance{}, err
	}
	if o.FailureRate > 0 && rand.Float64() < o.FailureRate {
		return providers.Instance{}, providers.Permanent(fmt.Errorf("%w of %s/%s", ErrSimulatedFailure, m.Cluster, m.Name))
	}
	if err := p.join(ctx, m); err != nil {
		return providers.Instance{}, err
	}
	stored := m
	stored.Spec, stored.Bootstrap = nil, nil // the cloud keeps what List reports, not the request
	machine, err := groupMachine(stored)
	if err != nil {
		return providers.Instance{}, providers.Permanent(fmt.Errorf("inmemory: machine %s/%s: %w", m.Cluster, m.Name, err))
	}
	w := &clusterWrite{add: machine, name: m.Name, created: time.Now().UTC()}
	if err := p.writes.apply(ctx, p, m.Cluster, w); err != nil {
		return providers.Instance{}, err
	}
	if w.found {
		return instance(w.have), nil // another create made it first
	}
	return instance(stored), nil
}

// join plays the machine's join without a network: the machine's token,
// from its bootstrap data, is reviewed by the leader as its control plane
// would review it (docs/bootstrap.md). A refused token fails the create.
func (p *Provider) join(ctx context.Context, m wire.Machine) error {
	if len(m.Bootstrap) == 0 {
		return nil
	}
	d, err := bootstrap.Parse(m.Bootstrap)
	if err != nil {
		return providers.Permanent(fmt.Errorf("inmemory: %w", err))
	}
	if d.Node != m.Name {
		return providers.Permanent(fmt.Errorf("inmemory: the bootstrap data is machine %s's, not %s's", d.Node, m.Name))
	}
	req, err := bootstrap.ReviewOf(m.Cluster, m.Name, d.Token)
	if err != nil {
		return providers.Permanent(fmt.Errorf("inmemory: refused by its cluster: %w", err))
	}
	data, err := wire.Encode(&req)
	if err != nil {
		return providers.Permanent(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	msg, err := p.nc.RequestWithContext(rctx, wire.JoinSubject(m.Cluster, Name), data)
	if err != nil {
		return providers.Transient(fmt.Errorf("inmemory: join review: %w", err))
	}
	v, err := wire.DecodeJoinVerdict(msg.Data)
	switch {
	case err != nil:
		return providers.Transient(fmt.Errorf("inmemory: join review: %w", err))
	case v.Joined:
		return nil
	case v.Retry:
		return providers.Transient(fmt.Errorf("inmemory: join review: %s", v.Reason))
	}
	return providers.Permanent(fmt.Errorf("inmemory: refused by its cluster: %s", v.Reason))
}

// Delete implements providers.Provider.
func (p *Provider) Delete(ctx context.Context, m wire.Machine) error {
	o, err := p.settings(m)
	if err != nil {
		o = p.opts // a spec that no longer parses must not block deletion
	}
	if d := delay(o); d > 0 {
		// The delay is spent on a machine the cloud has, not on one gone.
		_, ok, _, err := p.get(ctx, m.Cluster, m.Name, true)
		if err != nil || !ok {
			return err
		}
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
	w := &clusterWrite{name: m.Name}
	if err := p.writes.apply(ctx, p, m.Cluster, w); err != nil || w.found {
		return err
	}
	// Not in its cluster's key: it may be under a key of its own.
	if _, ok, err := p.getLegacy(ctx, m.Cluster, m.Name); err != nil || !ok {
		return err
	}
	k := legacyKey(m.Cluster, m.Name)
	if err := p.kv.Delete(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return providers.Transient(fmt.Errorf("inmemory: delete %s: %w", k, err))
	}
	return nil
}

// List implements providers.Provider; sorted by cluster, then name.
func (p *Provider) List(ctx context.Context) ([]providers.Instance, error) {
	var out []providers.Instance
	if err := p.Walk(ctx, func(in providers.Instance) error { out = append(out, in); return nil }); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cluster != out[j].Cluster {
			return out[i].Cluster < out[j].Cluster
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Walk implements providers.Walker: List's machines, a cluster's at a
// time, in the order the bucket keeps them.
func (p *Provider) Walk(ctx context.Context, f func(providers.Instance) error) error {
	fail := func(err error) error {
		return providers.Transient(fmt.Errorf("inmemory: list: %w", err))
	}
	st, err := p.kv.Status(ctx)
	if err != nil {
		return fail(err)
	}
	if st.Values() == 0 {
		return nil
	}
	// Every value, fetched listBatch at a time: a watch of the bucket
	// would take all of them as fast as the server sends them, and hold
	// them until they are decoded. The bucket keeps one value a key (New
	// makes it so), so every message is a key's newest.
	stream := "KV_" + p.kv.Bucket()
	cons, err := p.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy,
		MemoryStorage: true, InactiveThreshold: time.Minute})
	if err != nil {
		return fail(err)
	}
	defer p.deleteConsumer(ctx, stream, cons)
	prefix := "$KV." + p.kv.Bucket() + "."
	// each hands a value's machines to f.
	each := func(msg jetstream.Msg) error {
		// A deleted or purged key's marker has a KV-Operation.
		if msg.Headers().Get("KV-Operation") != "" {
			return nil
		}
		key := strings.TrimPrefix(msg.Subject(), prefix)
		if strings.Contains(key, ".") {
			if m, ok := decodeLegacy(msg.Data()); ok {
				return f(instance(m))
			}
			return nil
		}
		c, err := decodeCluster(msg.Data())
		if err != nil {
			return nil // not the provider's: left out, as a record that is no record
		}
		machines := make([]wire.Machine, len(c.Groups))
		for i := range c.Groups {
			if machines[i], err = c.Groups[i].machine(""); err != nil {
				return nil // as above: the value is left out whole
			}
		}
		for gi, g := range c.Groups {
			for _, m := range g.Machines {
				i := instance(machines[gi])
				i.Name, i.ProviderID = m.Name, "inmemory://"+machines[gi].Cluster+"/"+m.Name
				if err := f(i); err != nil {
					return err
				}
			}
		}
		return nil
	}
	// A batch is fetched whole before f sees any of it: f may wait (a
	// worker's part for the leader's answer) longer than a fetch may
	// last, and a fetch cut short would lose the messages still coming.
	batch := make([]jetstream.Msg, 0, listBatch)
	for done := false; !done; {
		batch = batch[:0]
		if err := fetch(ctx, cons, func(msg jetstream.Msg) { batch = append(batch, msg) }, &done); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fail(err)
		}
		for i, msg := range batch {
			batch[i] = nil // handed on: the value goes once decoded
			if err := each(msg); err != nil {
				return err
			}
		}
	}
	return nil
}

// fetch fetches up to listBatch messages of cons and hands each to f;
// done is set once the last message was read.
func fetch(ctx context.Context, cons jetstream.Consumer, f func(jetstream.Msg), done *bool) error {
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	batch, err := cons.Fetch(listBatch, jetstream.FetchContext(fctx))
	if err != nil {
		return err
	}
	got := 0
	for msg := range batch.Messages() {
		got++
		md, err := msg.Metadata()
		if err != nil {
			return err
		}
		f(msg)
		if md.NumPending == 0 {
			*done = true // the last message: a batch that is not full ends only at its timeout
			return nil
		}
	}
	if err := batch.Error(); err != nil && (got == 0 || !errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	return nil
}

// listBatch is how many keys List fetches at once.
const listBatch = 500

// decodeLegacy decodes a machine under a key of its own; false: not a
// record (it is left out of the list). Labels or annotations that are not
// an object of strings are left out.
func decodeLegacy(data []byte) (wire.Machine, bool) {
	var r struct {
		Machine struct {
			Name         string          `json:"name"`
			Cluster      string          `json:"cluster"`
			Role         wire.Role       `json:"role"`
			Deployment   string          `json:"deployment"`
			Version      string          `json:"version"`
			TemplateHash string          `json:"templateHash"`
			Labels       json.RawMessage `json:"labels"`
			Annotations  json.RawMessage `json:"annotations"`
		} `json:"machine"`
	}
	if json.Unmarshal(data, &r) != nil {
		return wire.Machine{}, false
	}
	strs := func(raw json.RawMessage) map[string]string {
		var m map[string]string
		if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
			return nil
		}
		return m
	}
	l := r.Machine
	return wire.Machine{Name: l.Name, Cluster: l.Cluster, Role: l.Role, Deployment: l.Deployment, Version: l.Version,
		TemplateHash: l.TemplateHash, Labels: strs(l.Labels), Annotations: strs(l.Annotations)}, true
}

// clusterWrite is one machine added to or taken from a cluster's key.
type clusterWrite struct {
	add     []byte // the machine's group encoding (groupMachine); nil: take the machine named name
	name    string
	created time.Time
	found   bool         // the cloud had the machine: add found it there already, a take took it
	have    wire.Machine // add: the machine it found
	err     error
	done    chan struct{}
}

// clusterWrites makes the writes a process has for one cluster's key at
// one time in one compare-and-set: the first to come writes, for itself
// and whoever comes while it writes, until none waits. Workers take a
// cluster's tasks together (a pass publishes them together), so one write
// each would mostly read again and retry after one another's.
type clusterWrites struct {
	mu      sync.Mutex
	pending map[string]*[]*clusterWrite
}

// writeTimeout bounds one round of writes for a cluster; the writes of
// others ride on it, so it does not end with the context of whoever
// writes.
const writeTimeout = 15 * time.Second

func (cw *clusterWrites) apply(ctx context.Context, p *Provider, cluster string, w *clusterWrite) error {
	w.done = make(chan struct{})
	cw.mu.Lock()
	if cw.pending == nil {
		cw.pending = map[string]*[]*clusterWrite{}
	}
	q, busy := cw.pending[cluster]
	if !busy {
		q = new([]*clusterWrite)
		cw.pending[cluster] = q
	}
	*q = append(*q, w)
	cw.mu.Unlock()
	if busy {
		<-w.done
		return w.err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	var last written // what this round wrote last: the next batch needs not read it
	for {
		cw.mu.Lock()
		batch := *q
		*q = nil
		if len(batch) == 0 {
			delete(cw.pending, cluster)
			cw.mu.Unlock()
			return w.err
		}
		cw.mu.Unlock()
		if err := p.writeCluster(wctx, cluster, batch, &last); err != nil {
			for _, b := range batch {
				b.err = err
			}
		}
		for _, b := range batch {
			close(b.done)
		}
	}
}

// writeAttempts bounds how often a cluster's writes read its key again
// after another process wrote it first.
const writeAttempts = 50

// written is a cluster's value as this process last wrote it, and its
// revision; ok is false when there is none to trust.
type written struct {
	c   cloudCluster
	rev uint64
	ok  bool
}

// writeCluster applies writes to the cluster's key with compare-and-set,
// reading it again as long as another process wrote it in between. It
// starts from last when last.ok (what the same round wrote before), and
// leaves in last what it wrote.
func (p *Provider) writeCluster(ctx context.Context, cluster string, writes []*clusterWrite, last *written) error {
	for attempt := 1; ; attempt++ {
		c, rev, err := last.c, last.rev, error(nil)
		if !last.ok {
			if c, rev, err = p.readCluster(ctx, cluster); err != nil {
				return err
			}
		}
		last.ok = false
		changed := false
		for _, w := range writes {
			w.found = false
			if w.add == nil {
				w.found = c.remove(w.name)
				changed = w.found || changed
			} else if have, ok, err := c.find(w.name); err != nil {
				return providers.Permanent(fmt.Errorf("inmemory: machine %s/%s: %w", cluster, w.name, err))
			} else if ok {
				w.found, w.have = true, have
			} else {
				c.add(w.add, w.name, w.created)
				changed = true
			}
		}
		if !changed {
			return nil
		}
		next := uint64(0)
		if len(c.Groups) == 0 {
			err = p.kv.Delete(ctx, cluster, jetstream.LastRevision(rev))
		} else {
			data := c.appendJSON(nil)
			if rev == 0 {
				next, err = p.kv.Create(ctx, cluster, data)
			} else {
				next, err = p.kv.Update(ctx, cluster, data, rev)
			}
		}
		switch {
		case err == nil:
			*last = written{c: c, rev: next, ok: next != 0}
			return nil
		case errors.Is(err, nats.ErrMaxPayload):
			return providers.Permanent(fmt.Errorf("inmemory: cluster %s's machines no longer fit one NATS message "+
				"(the server's max_payload, %d bytes): %w", cluster, p.nc.MaxPayload(), err))
		case !writtenBefore(err) || attempt == writeAttempts:
			return providers.Transient(fmt.Errorf("inmemory: write %s: %w", cluster, err))
		}
		if err := sleep(ctx, time.Duration(rand.N(attempt))*time.Millisecond); err != nil {
			return err
		}
	}
}

// writtenBefore reports whether a compare-and-set failed because the key
// changed since it was read.
func writtenBefore(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Len is the number of machines in the cloud.
func (p *Provider) Len(ctx context.Context) (int, error) {
	list, err := p.List(ctx)
	return len(list), err
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
