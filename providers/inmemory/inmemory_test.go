package inmemory_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"time"

	"testing"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/providertest"
)

func TestConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) providers.Provider { return inmemory.New(inmemory.Options{}) })
}

func TestSpecOverridesDefaults(t *testing.T) {
	p := inmemory.New(inmemory.Options{FailureRate: 0})
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
	if p.Len() != 0 {
		t.Errorf("a failed machine was kept: Len = %d", p.Len())
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
	p := inmemory.New(inmemory.Options{ProvisioningDelay: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Create(ctx, providertest.Machine(p, "c1", "slow"))
	if !errors.Is(err, providers.ErrTransient) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Create with a cancelled ctx: %v; want a transient cancellation", err)
	}
}

// BenchmarkHold100k measures the memory 100,000 machines take.
func BenchmarkHold100k(b *testing.B) {
	const n = 100_000
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p := inmemory.New(inmemory.Options{})
		ctx := context.Background()
		m := providertest.Machine(p, "", "")
		for i := range n {
			m.Cluster, m.Name = "cluster-"+strconv.Itoa(i/100), "machine-"+strconv.Itoa(i%100)
			if _, err := p.Create(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if p.Len() != n {
			b.Fatalf("Len = %d", p.Len())
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/machine")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB/100k")
		runtime.KeepAlive(p)
	}
}
