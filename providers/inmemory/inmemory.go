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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/internal/jsonscan"
	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Name of the provider in machine templates and task subjects.
const Name = "inmemory"

// Bucket is the KV bucket that holds the machines.
const Bucket = "gitfleet-inmemory"

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
	// Replicas of the bucket when it is made (0: 1), and, with
	// ReplicasSet (--nats-replicas given), of an existing one; otherwise an
	// existing bucket keeps its replicas, as gitfleet's own do.
	Replicas    int
	ReplicasSet bool
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
}

var _ providers.Provider = (*Provider)(nil)

// New opens (creating it if need be) the provider's bucket on js.
func New(ctx context.Context, js jetstream.JetStream, opts Options) (*Provider, error) {
	if opts.Bucket == "" {
		opts.Bucket = Bucket
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	replicas := max(opts.Replicas, 1)
	if s, err := js.Stream(ctx, "KV_"+opts.Bucket); err == nil && !opts.ReplicasSet {
		replicas = s.CachedInfo().Config.Replicas
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: opts.Bucket,
		Description: "machines of the inmemory provider", History: 1, Storage: jetstream.FileStorage, Replicas: replicas})
	if err != nil {
		return nil, fmt.Errorf("inmemory: bucket %s: %w", opts.Bucket, err)
	}
	return &Provider{opts: opts, kv: kv, js: js, nc: js.Conn()}, nil
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// record is one machine in the bucket.
type record struct {
	Machine wire.Machine `json:"machine"`
	Created time.Time    `json:"created"`
}

func key(cluster, name string) string { return cluster + "." + name }

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

// get reads a machine; ok is false when the cloud does not have it.
func (p *Provider) get(ctx context.Context, k string) (wire.Machine, bool, error) {
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

// Create implements providers.Provider: the machine is written with
// compare-and-set, so concurrent creates by any workers make one machine.
func (p *Provider) Create(ctx context.Context, m wire.Machine) (providers.Instance, error) {
	if !wire.ValidToken(m.Cluster) || !wire.ValidToken(m.Name) {
		return providers.Instance{}, providers.Permanent(fmt.Errorf("inmemory: %q/%q is not usable as a machine name", m.Cluster, m.Name))
	}
	k := key(m.Cluster, m.Name)
	if have, ok, err := p.get(ctx, k); err != nil || ok {
		return instance(have), err
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
	if err := p.join(ctx, m); err != nil {
		return providers.Instance{}, err
	}
	stored := m
	stored.Spec = nil // the cloud keeps what List reports, not the request
	data, err := json.Marshal(record{Machine: stored, Created: time.Now().UTC()})
	if err != nil {
		return providers.Instance{}, providers.Permanent(err)
	}
	if _, err := p.kv.Create(ctx, k, data); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			have, ok, gerr := p.get(ctx, k)
			if gerr == nil && ok {
				return instance(have), nil
			}
		}
		return providers.Instance{}, providers.Transient(fmt.Errorf("inmemory: create %s: %w", k, err))
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
	k := key(m.Cluster, m.Name)
	_, ok, err := p.get(ctx, k)
	if err != nil || !ok {
		return err
	}
	o, err := p.settings(m)
	if err != nil {
		o = p.opts // a spec that no longer parses must not block deletion
	}
	if err := sleep(ctx, delay(o)); err != nil {
		return err
	}
	if err := p.kv.Delete(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return providers.Transient(fmt.Errorf("inmemory: delete %s: %w", k, err))
	}
	return nil
}

// List implements providers.Provider; sorted by cluster, then name.
func (p *Provider) List(ctx context.Context) ([]providers.Instance, error) {
	fail := func(err error) ([]providers.Instance, error) {
		return nil, providers.Transient(fmt.Errorf("inmemory: list: %w", err))
	}
	st, err := p.kv.Status(ctx)
	if err != nil {
		return fail(err)
	}
	if st.Values() == 0 {
		return nil, nil
	}
	// Every value, fetched listBatch at a time: a watch of the bucket
	// would take all of them as fast as the server sends them, and hold
	// them until they are decoded (at 130,000 machines, ~140 MB for a
	// moment every inventory). The bucket keeps one value a key (New
	// makes it so), so every message is a key's newest.
	stream := "KV_" + p.kv.Bucket()
	cons, err := p.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy,
		MemoryStorage: true, InactiveThreshold: time.Minute})
	if err != nil {
		return fail(err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = p.js.DeleteConsumer(dctx, stream, cons.CachedInfo().Name)
	}()
	out := make([]providers.Instance, 0, st.Values())
	in := jsonscan.NewInterner()
	for done := false; !done; {
		if done, err = fetchInstances(ctx, cons, in, &out); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return fail(err)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cluster != out[j].Cluster {
			return out[i].Cluster < out[j].Cluster
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// fetchInstances fetches up to listBatch records and adds their machines
// to out, sharing through in what machines have alike; done is true once
// the last record of the bucket was read.
func fetchInstances(ctx context.Context, cons jetstream.Consumer, in *jsonscan.Interner, out *[]providers.Instance) (done bool, _ error) {
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	batch, err := cons.Fetch(listBatch, jetstream.FetchContext(fctx))
	if err != nil {
		return false, err
	}
	got := 0
	for msg := range batch.Messages() {
		got++
		md, err := msg.Metadata()
		if err != nil {
			return false, err
		}
		// A deleted or purged key's marker has a KV-Operation.
		if msg.Headers().Get("KV-Operation") == "" {
			if m, ok := decodeListed(msg.Data(), in); ok {
				*out = append(*out, instance(m))
			}
		}
		if md.NumPending == 0 {
			return true, nil // the last record: a batch that is not full ends only at its timeout
		}
	}
	if err := batch.Error(); err != nil && (got == 0 || !errors.Is(err, context.DeadlineExceeded)) {
		return false, err
	}
	return false, nil
}

// listBatch is how many machines List fetches at once.
const listBatch = 500

// listed is what List reads of a record: the machine's spec and the
// record's creation time are skipped.
type listed struct {
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

// Every inventory reads every record of the bucket (130,000 at 10,000
// clusters, every minute), which with encoding/json's reflection was ~80 %
// of List's CPU. decodeListed reads the shape the provider writes (a
// record of the machine and its creation time) with internal/jsonscan,
// and hands anything else to encoding/json (decodeListedJSON), whose
// result is the reference: FuzzDecodeListed checks that whatever the fast
// path reads, encoding/json reads the same.
//
// Through in, the machines of a List share what a pool's machines have
// alike (cluster, pool, version, template hash, labels, annotations), read
// once from their encoded bytes. Without it, every inventory of 130,000
// machines held a labels map and five strings for each (~80 MiB of maps
// alone) for as long as the report took. The maps are shared, so callers
// of List must not change them (none does: they are copied into wire
// messages).

// decodeListed decodes a record's machine; false: not a record (it is
// left out of the list).
func decodeListed(data []byte, in *jsonscan.Interner) (wire.Machine, bool) {
	if m, ok := fastListed(data, in); ok {
		return m, true
	}
	return decodeListedJSON(data)
}

// fastListed is decodeListed for the provider's own shape; false: not
// that shape.
func fastListed(data []byte, in *jsonscan.Interner) (m wire.Machine, ok bool) {
	s := jsonscan.New(data, in)
	ok = s.Object(recordKeys, func(key string) bool {
		if key == "created" {
			var t time.Time
			return s.Time(&t)
		}
		return s.Object(machineKeys, func(key string) bool { return machineField(&s, key, &m) })
	}) && s.End()
	return m, ok
}

// recordKeys and machineKeys are the JSON names of record's and
// wire.Machine's fields, each with a bit for "seen".
var (
	recordKeys  = jsonscan.KeyBits("machine", "created")
	machineKeys = jsonscan.KeyBits("name", "cluster", "role", "deployment", "version", "provider", "spec",
		"failureDomain", "templateHash", "labels", "annotations")
)

func machineField(s *jsonscan.Scanner, key string, m *wire.Machine) bool {
	var ok bool
	switch key {
	case "name":
		m.Name, ok = s.Str()
	case "cluster":
		m.Cluster, ok = s.Shared()
	case "role":
		var v string
		v, ok = s.Shared()
		m.Role = wire.Role(v)
	case "deployment":
		m.Deployment, ok = s.Shared()
	case "version":
		m.Version, ok = s.Shared()
	case "templateHash":
		m.TemplateHash, ok = s.Shared()
	case "labels":
		ok = s.SharedMap(&m.Labels)
	case "annotations":
		ok = s.SharedMap(&m.Annotations)
	case "provider", "failureDomain": // not listed, but read: it must be a string
		_, ok = s.Str()
	case "spec":
		_, ok = s.RawValue()
	}
	return ok
}

// decodeListedJSON is decodeListed by encoding/json, sharing nothing: a
// record the provider did not write in its own shape. Labels or
// annotations that are not an object of strings are left out.
func decodeListedJSON(data []byte) (wire.Machine, bool) {
	var r listed
	if json.Unmarshal(data, &r) != nil {
		return wire.Machine{}, false
	}
	strings := func(raw json.RawMessage) map[string]string {
		var m map[string]string
		if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
			return nil
		}
		return m
	}
	l := r.Machine
	return wire.Machine{Name: l.Name, Cluster: l.Cluster, Role: l.Role, Deployment: l.Deployment, Version: l.Version,
		TemplateHash: l.TemplateHash, Labels: strings(l.Labels), Annotations: strings(l.Annotations)}, true
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
