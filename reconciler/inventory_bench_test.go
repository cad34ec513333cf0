package reconciler

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// BenchmarkInventory130k: the leader takes one worker's inventory of
// 130,000 Running inmemory machines (10,000 clusters of 13), in parts of
// 1,000 as workers send them, each machine with a record. held-MiB is
// the live heap the report holds just before its last part arrives;
// loop-ms/op the time the leader's loop spends on the report (its parts
// are decoded before they reach the loop).
func BenchmarkInventory130k(b *testing.B) {
	const clusters, perCluster, perPart = 10_000, 13, 1000
	srv := natstest.Start(b)
	_, js := natstest.Connect(b, srv.ClientURL())
	r, err := New(Options{JS: js, Log: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	r.machines = map[string]machineList{}
	r.inv = newInventory()
	labels := map[string]string{"env": "dev", "region": "eu-0"}
	var instances []wire.Instance
	for c := range clusters {
		cluster := fmt.Sprintf("c-%05d", c)
		var ms machineList
		for i := range perCluster {
			name := fmt.Sprintf("%s-md-0-%05d", cluster, i)
			ms = append(ms, &machine{rec: &Record{Name: name, Shape: &Shape{Cluster: cluster, Provider: "inmemory",
				Deployment: "md-0", Role: wire.RoleWorker, Version: "v1.31.2"}, Phase: wire.PhaseRunning, Worker: "w1"}})
			instances = append(instances, wire.Instance{Cluster: cluster, Machine: name, Deployment: "md-0", Role: wire.RoleWorker,
				Version: "v1.31.2", TemplateHash: "0123456789abcdef", Labels: labels, ProviderID: "inmemory://" + name,
				Addresses: []string{"10.0.0.1"}})
		}
		r.machines[cluster] = ms
	}
	parts := (len(instances) + perPart - 1) / perPart
	msgs := make([]*nats.Msg, parts)
	for p := range parts {
		inv := wire.Inventory{Provider: "inmemory", Worker: "w1", Report: "r", Part: p, Parts: parts, Time: time.Now(),
			Instances: instances[p*perPart : min((p+1)*perPart, len(instances))]}
		data, err := wire.Encode(&inv)
		if err != nil {
			b.Fatal(err)
		}
		msgs[p] = &nats.Msg{Subject: wire.InventorySubject("inmemory", "w1"), Data: data}
	}
	instances = nil
	var held float64
	var inLoop time.Duration
	n := 0
	for b.Loop() {
		for p, m := range msgs {
			if p == len(msgs)-1 && n == 0 {
				var before runtime.MemStats
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&before)
				held = float64(before.HeapAlloc)
				b.StartTimer()
			}
			part := decodeInventory(m) // on the subscription's goroutine
			start := time.Now()
			r.handleInventory(b.Context(), part)
			inLoop += time.Since(start)
		}
		if n == 0 {
			b.StopTimer()
			var after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&after)
			held -= float64(after.HeapAlloc)
			b.StartTimer()
		}
		n++
	}
	if len(r.inv.orphans) != 0 || len(r.inv.suspects) != 0 {
		b.Fatalf("%d orphans, %d suspects: every machine is listed and has a record", len(r.inv.orphans), len(r.inv.suspects))
	}
	b.ReportMetric(held/(1<<20), "held-MiB")
	b.ReportMetric(float64(inLoop.Milliseconds())/float64(n), "loop-ms/op")
}
