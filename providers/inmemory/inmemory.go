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
	in := newListInterner()
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
func fetchInstances(ctx context.Context, cons jetstream.Consumer, in *listInterner, out *[]providers.Instance) (done bool, _ error) {
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
		var r listed
		// A deleted or purged key's marker has a KV-Operation.
		if msg.Headers().Get("KV-Operation") == "" && json.Unmarshal(msg.Data(), &r) == nil {
			m := r.Machine
			*out = append(*out, instance(wire.Machine{Name: m.Name, Cluster: in.str(m.Cluster), Role: wire.Role(in.str(string(m.Role))),
				Deployment: in.str(m.Deployment), Version: in.str(m.Version), TemplateHash: in.str(m.TemplateHash),
				Labels: in.labels(m.Labels), Annotations: in.labels(m.Annotations)}))
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

// listInterner gives the machines of one List one copy of what they have
// alike: a pool's machines share their cluster, pool, version, template
// hash, labels and annotations. Without it, every inventory of 130,000
// machines held a labels map and five strings for each (~80 MiB of maps
// alone) for as long as the report took. The maps are shared, so callers of List must
// not change them (none does: they are copied into wire messages).
type listInterner struct {
	strs map[string]string
	maps map[string]map[string]string
}

func newListInterner() *listInterner {
	return &listInterner{strs: map[string]string{}, maps: map[string]map[string]string{}}
}

func (in *listInterner) str(s string) string {
	if v, ok := in.strs[s]; ok {
		return v
	}
	in.strs[s] = s
	return s
}

// labels decodes a JSON object of strings once per distinct encoding;
// null or absent gives nil. The records are the provider's own writes, so
// one that is not such an object (never written) gives nil as well.
func (in *listInterner) labels(raw json.RawMessage) map[string]string {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if m, ok := in.maps[string(raw)]; ok {
		return m
	}
	var m map[string]string
	if json.Unmarshal(raw, &m) != nil {
		m = nil
	}
	in.maps[string(raw)] = m
	return m
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
