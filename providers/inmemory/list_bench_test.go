package inmemory_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/providertest"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// BenchmarkList20k: List of a cloud of 20,000 machines (the inventory a
// worker reports every minute), 13 a cluster in two pools, each pool's
// machines with their pool's labels as the planner makes them.
// peak-live-MiB is the most live heap seen while one more List ran, above
// what was live before; held-MiB what the list it returns holds.
func BenchmarkList20k(b *testing.B) {
	const n = 20_000
	p := newProvider(b, inmemory.Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		cluster, pool, part := fmt.Sprintf("c-%04d", i/13), "md-0", "md-0"
		if i%13 < 3 {
			pool, part = "", "control-plane"
		}
		m := providertest.Machine(p, cluster, fmt.Sprintf("%s-%s-%05d", cluster, part, i))
		labels := map[string]string{"env": "dev", "region": "eu-0", v1alpha1.LabelCluster: cluster}
		if pool == "" {
			labels[v1alpha1.LabelControlPlane] = "true"
		} else {
			labels[v1alpha1.LabelDeployment] = pool
		}
		m.TemplateHash, m.Labels, m.Version, m.Deployment = "0123456789abcdef", labels, "v1.31.2", pool
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := p.Create(ctx, m); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	for b.Loop() {
		if list, err := p.List(ctx); err != nil || len(list) != n {
			b.Fatalf("List: %d machines, %v; want %d", len(list), err, n)
		}
	}
	// Once more, outside the timing, with the live heap sampled: collect
	// and read every 2 ms.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	stop := make(chan struct{})
	sampled := make(chan uint64)
	go func() {
		var top uint64
		for {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			top = max(top, ms.HeapAlloc)
			select {
			case <-stop:
				sampled <- top
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	list, err := p.List(ctx)
	close(stop)
	top := <-sampled
	if err != nil || len(list) != n {
		b.Fatalf("List: %d machines, %v; want %d", len(list), err, n)
	}
	b.ReportMetric(float64(top-min(top, base))/(1<<20), "peak-live-MiB")
	list = nil
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base = ms.HeapAlloc
	list, err = p.List(ctx)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc-min(ms.HeapAlloc, base))/(1<<20), "held-MiB")
	runtime.KeepAlive(list)
}
