package inmemory_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/providers/providertest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// newProvider is an inmemory provider on a real NATS server, in a bucket
// of its own.
func newProvider(t testing.TB, opts inmemory.Options) *inmemory.Provider {
	t.Helper()
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv.ClientURL())
	p, err := inmemory.New(context.Background(), js, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providers.Provider { return newProvider(t, inmemory.Options{}) })
}

// Two providers on one bucket — two workers, maybe in two processes — are
// one cloud: a machine one made, the other lists, creates again as the
// same machine, and deletes.
func TestProvidersOnOneBucketAreOneCloud(t *testing.T) {
	srv := natstest.Start(t)
	_, js1 := natstest.Connect(t, srv.ClientURL())
	_, js2 := natstest.Connect(t, srv.ClientURL())
	a, err := inmemory.New(context.Background(), js1, inmemory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := inmemory.New(context.Background(), js2, inmemory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := providertest.Machine(a, "c1", "m-1")
	m.TemplateHash, m.Labels = "h1", map[string]string{"pool": "md-0"}
	first, err := a.Create(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	list, err := b.List(context.Background())
	if err != nil || len(list) != 1 || list[0].ProviderID != first.ProviderID || list[0].TemplateHash != "h1" || list[0].Deployment != "md-0" {
		t.Fatalf("the other provider lists %+v (%v); want the machine the first made", list, err)
	}
	if again, err := b.Create(context.Background(), m); err != nil || again.ProviderID != first.ProviderID {
		t.Fatalf("the other provider's Create: %+v, %v; want the same machine", again, err)
	}
	if err := b.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Len(context.Background()); err != nil || n != 0 {
		t.Fatalf("after the other provider deleted it: %d machines (%v)", n, err)
	}
}

// List gives each machine its own pool's labels and annotations, however
// many machines have the same ones, and none to a machine made without.
func TestListKeepsEachMachinesLabels(t *testing.T) {
	p := newProvider(t, inmemory.Options{})
	want := map[string]map[string]string{}
	for i := range 7 {
		name := "m-" + strconv.Itoa(i)
		m := providertest.Machine(p, "c"+strconv.Itoa(i%2), name)
		m.Annotations = nil
		switch i % 3 {
		case 0:
			m.Labels = map[string]string{"pool": "md-0", "cluster": "c" + strconv.Itoa(i%2)}
		case 1:
			m.Labels = map[string]string{"pool": "md-1", "cluster": "c" + strconv.Itoa(i%2)}
			m.Annotations = map[string]string{"note": "x"}
		default:
			m.Labels = nil
		}
		want[name] = m.Labels
		if _, err := p.Create(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	list, err := p.List(context.Background())
	if err != nil || len(list) != len(want) {
		t.Fatalf("List: %d machines, %v; want %d", len(list), err, len(want))
	}
	for _, in := range list {
		w := want[in.Name]
		if len(in.Labels) != len(w) || in.Labels["pool"] != w["pool"] || in.Labels["cluster"] != w["cluster"] || in.Labels["cluster"] != in.Cluster && w != nil {
			t.Errorf("%s/%s: labels %v, want %v", in.Cluster, in.Name, in.Labels, w)
		}
		if hasNote := in.Annotations["note"] == "x"; hasNote != (w["pool"] == "md-1") || len(in.Annotations) > 1 {
			t.Errorf("%s/%s: annotations %v", in.Cluster, in.Name, in.Annotations)
		}
	}
}

func TestSpecOverridesDefaults(t *testing.T) {
	p := newProvider(t, inmemory.Options{FailureRate: 0})
	m := providertest.Machine(p, "c1", "doomed")
	m.Spec = json.RawMessage(`{"failureRate": 1, "provisioningDelay": "5ms", "provisioningDelayMax": "10ms"}`)
	start := time.Now()
	_, err := p.Create(context.Background(), m)
	if !errors.Is(err, inmemory.ErrSimulatedFailure) || !providers.IsPermanent(err) {
		t.Fatalf("Create with failureRate 1: %v; want a permanent simulated failure", err)
	}
	if d := time.Since(start); d < 5*time.Millisecond {
		t.Errorf("Create returned after %s; want the 5ms provisioning delay first", d)
	}
	if n, err := p.Len(context.Background()); n != 0 || err != nil {
		t.Errorf("a failed machine was kept: Len = %d (%v)", n, err)
	}
	m.Spec = json.RawMessage(`{"failureRate": 2}`)
	if _, err := p.Create(context.Background(), m); !providers.IsPermanent(err) || !strings.Contains(err.Error(), "failureRate 2 must be between 0 and 1") {
		t.Fatalf("failureRate 2: %v; want a permanent error naming the field", err)
	}
	m.Spec = json.RawMessage(`{"provisioningDelay": 5}`)
	if _, err := p.Create(context.Background(), m); !providers.IsPermanent(err) || !strings.Contains(err.Error(), `like "2s"`) {
		t.Fatalf("provisioningDelay 5: %v; want a permanent error showing the format", err)
	}
}

func TestCreateHonoursCancel(t *testing.T) {
	p := newProvider(t, inmemory.Options{ProvisioningDelay: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Create(ctx, providertest.Machine(p, "c1", "slow"))
	if !errors.Is(err, providers.ErrTransient) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Create with a cancelled ctx: %v; want a transient cancellation", err)
	}
}

// BenchmarkCreate10k measures how fast 10,000 machines are made in the
// bucket, 16 at a time as a worker would, in clusters of 13 machines (a
// control plane of 3 and a pool of 10, as the benchmarks' fleets) and of
// 100 (one pool, every create of the 16 in the same cluster).
func BenchmarkCreate10k(b *testing.B) {
	const n = 10_000
	for _, size := range []int{13, 100} {
		b.Run(strconv.Itoa(size)+"-a-cluster", func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				p := newProvider(b, inmemory.Options{})
				ctx := context.Background()
				b.StartTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for w := range 16 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						m := providertest.Machine(p, "", "")
						for i := w; i < n; i += 16 {
							m.Cluster, m.Name = "cluster-"+strconv.Itoa(i/size), "machine-"+strconv.Itoa(i%size)
							m.Role, m.Deployment = wire.RoleWorker, "md-0"
							if i%size < 3 && size == 13 {
								m.Role, m.Deployment = wire.RoleControlPlane, ""
							}
							if _, err := p.Create(ctx, m); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				if got, err := p.Len(ctx); err != nil || got != n {
					b.Fatalf("Len = %d (%v)", got, err)
				}
				b.ReportMetric(n/elapsed.Seconds(), "machines/s")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}

// The cloud keeps one key a cluster, however many machines it has, and
// two providers (two workers) making machines of one cluster at once make
// each once: their writes to the key are compare-and-set.
func TestOneKeyACluster(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv.ClientURL())
	var ps []*inmemory.Provider
	for range 2 {
		_, js := natstest.Connect(t, srv.ClientURL())
		p, err := inmemory.New(t.Context(), js, inmemory.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	var wg sync.WaitGroup
	for i := range 40 {
		for _, p := range ps { // both make every machine
			wg.Go(func() {
				m := providertest.Machine(p, "c"+strconv.Itoa(i%2), "m-"+strconv.Itoa(i))
				m.Deployment = "md-" + strconv.Itoa(i%3)
				if _, err := p.Create(t.Context(), m); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	list, err := ps[0].List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, in := range list {
		seen[in.Cluster+"/"+in.Name]++
		i, _ := strconv.Atoi(strings.TrimPrefix(in.Name, "m-"))
		if want := "md-" + strconv.Itoa(i%3); in.Deployment != want || in.ProviderID != "inmemory://"+in.Cluster+"/"+in.Name {
			t.Errorf("%+v: want pool %s and its own provider ID", in, want)
		}
	}
	if len(list) != 40 || len(seen) != 40 {
		t.Errorf("List: %d machines, %d distinct; want 40, each once", len(list), len(seen))
	}
	kv, err := js.KeyValue(t.Context(), inmemory.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		k, err := kv.Keys(t.Context())
		if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
			t.Fatal(err)
		}
		slices.Sort(k)
		return k
	}
	if k := keys(); !slices.Equal(k, []string{"c0", "c1"}) {
		t.Errorf("keys %v; want one a cluster", k)
	}
	for i := 0; i < 40; i += 2 {
		p := ps[i%4/2]
		if err := p.Delete(t.Context(), providertest.Machine(p, "c0", "m-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if k := keys(); !slices.Equal(k, []string{"c1"}) {
		t.Errorf("keys %v once c0 has no machine; want c1 alone", k)
	}
	if n, err := ps[1].Len(t.Context()); err != nil || n != 20 {
		t.Errorf("%d machines (%v); want c1's 20", n, err)
	}
}

// A bucket written by the provider before it kept one key a cluster (a
// key a machine) is read as it was: its machines are listed, found by
// Create rather than made twice, and deleted; deleted keys are no machine.
func TestMachinesUnderKeysOfTheirOwn(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv.ClientURL())
	kv, err := js.KeyValue(t.Context(), inmemory.Bucket) // as the daemon made it (natsbus.Ensure)
	if err != nil {
		t.Fatal(err)
	}
	old := func(name string) []byte {
		data, _ := json.Marshal(map[string]any{"machine": map[string]any{"name": name, "cluster": "c1", "role": "worker",
			"deployment": "md-0", "version": "v1.31.2", "provider": "inmemory", "labels": map[string]string{"pool": "md-0"}},
			"created": time.Now()})
		return data
	}
	for _, name := range []string{"m-1", "m-gone"} {
		if _, err := kv.Create(t.Context(), "c1."+name, old(name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Delete(t.Context(), "c1.m-gone"); err != nil {
		t.Fatal(err)
	}
	p, err := inmemory.New(t.Context(), js, inmemory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := p.List(t.Context())
	if err != nil || len(list) != 1 || list[0].Name != "m-1" || list[0].Labels["pool"] != "md-0" || list[0].Deployment != "md-0" {
		t.Fatalf("List: %+v (%v); want m-1 as it was written", list, err)
	}
	again, err := p.Create(t.Context(), providertest.Machine(p, "c1", "m-1"))
	if err != nil || again.ProviderID != "inmemory://c1/m-1" || again.Deployment != "md-0" {
		t.Fatalf("Create of m-1: %+v, %v; want the machine the cloud has", again, err)
	}
	if _, err := p.Create(t.Context(), providertest.Machine(p, "c1", "m-2")); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Len(t.Context()); err != nil || n != 2 {
		t.Fatalf("%d machines (%v); want m-1 and m-2", n, err)
	}
	if err := p.Delete(t.Context(), providertest.Machine(p, "c1", "m-1")); err != nil {
		t.Fatal(err)
	}
	list, err = p.List(t.Context())
	if err != nil || len(list) != 1 || list[0].Name != "m-2" {
		t.Fatalf("after deleting m-1: %+v (%v); want m-2 alone", list, err)
	}
	if _, err := kv.Get(t.Context(), "c1.m-1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("m-1's own key after its delete: %v; want it gone", err)
	}
}
