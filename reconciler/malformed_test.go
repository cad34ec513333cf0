package reconciler

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A malformed event is terminated and counted and does not stop the loop;
// a malformed heartbeat is counted.
func TestMalformedMessages(t *testing.T) {
	nc, js, m, _ := runBareLeader(t)

	for _, body := range []string{"not json", `{"apiVersion":"gitfleet.io/wire/v9","cluster":"c","machine":"m","phase":"Running"}`} {
		if _, err := js.Publish(t.Context(), wire.EventSubject("c", "w1"), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ev := counter(t, m.Malformed.WithLabelValues("event"))
		hb := counter(t, m.Malformed.WithLabelValues("heartbeat"))
		cons, err := js.Consumer(t.Context(), wire.StreamEvents, "gitfleet-reconciler")
		pending := -1
		if err == nil {
			if info, err := cons.Info(t.Context()); err == nil {
				pending = int(info.NumAckPending) + int(info.NumPending)
			}
		}
		if ev == 2 && hb >= 1 && pending == 0 {
			return
		}
		if hb == 0 {
			// Heartbeats are not stored: send again until the loop has
			// subscribed, as a node would.
			if err := nc.Publish(wire.HeartbeatSubject("c", "m"), []byte("{")); err != nil {
				t.Fatal(err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("malformed events counted %v (want 2), heartbeats %v (want ≥ 1), events still pending %d", ev, hb, pending)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runBareLeader runs a reconciler with no repository on a new NATS
// server until the test ends; stopped is closed should Run return
// before (its error fails the test).
func runBareLeader(t *testing.T) (_ *nats.Conn, _ jetstream.JetStream, _ *Metrics, stopped <-chan struct{}) {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv.ClientURL())
	m := NewMetrics(nil)
	r, err := New(Options{JS: js, Log: zerolog.Nop(), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return nc, js, m, done
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// Inventory parts that cannot be part of a worker's report are counted as
// malformed and leave the leader running: one that claims 2^40
// parts (the leader once made a slot for each: out of memory), one
// whose part number is past its count, one that is not JSON, a part
// received twice, and a last part whose count is below a part received.
func TestForgedInventories(t *testing.T) {
	nc, _, m, done := runBareLeader(t)

	malformed := func() float64 { return counter(t, m.Malformed.WithLabelValues("inventory")) }
	publish := func(worker string, data []byte) {
		t.Helper()
		if err := nc.Publish(wire.InventorySubject("inmemory", worker), data); err != nil {
			t.Fatal(err)
		}
	}
	part := func(worker string, n, of int) []byte {
		data, err := wire.Encode(&wire.Inventory{Provider: "inmemory", Worker: worker, Report: "r1", Part: n, Parts: of, Time: time.Now(),
			Instances: []wire.Instance{{Cluster: "c", Machine: "c-m"}}})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	wait := func(what string, want float64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for malformed() < want {
			select {
			case <-done:
				t.Fatalf("%s: the leader stopped", what)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: malformed inventories counted %v, want %v", what, malformed(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Plain NATS: send until the loop has subscribed.
	for deadline := time.Now().Add(10 * time.Second); malformed() == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("an inventory that is not JSON is not counted as malformed")
		}
		publish("w1", []byte("not json"))
	}
	time.Sleep(300 * time.Millisecond) // the tries sent before the first was counted
	base := malformed()
	publish("w1", part("w1", 0, 1<<40))
	publish("w1", []byte(`{"apiVersion":"gitfleet.io/wire/v1","provider":"inmemory","worker":"w1","report":"r2","part":3,"parts":2,"time":"2026-11-26T00:00:00Z"}`))
	publish("w2", part("w2", 0, 3))
	publish("w2", part("w2", 0, 3))
	// A report sent as it is listed says its count in its last part
	// only: a count below a part already received does not fit.
	publish("w3", part("w3", 0, 0))
	publish("w3", part("w3", 2, 0))
	publish("w3", part("w3", 1, 2))
	wait("forged parts", base+4)
	// One that fits is taken whole at its last part.
	taken := func() float64 { return counter(t, m.Inventories.WithLabelValues("inmemory")) }
	publish("w4", part("w4", 0, 0))
	publish("w4", part("w4", 1, 0))
	publish("w4", part("w4", 2, 3))
	for deadline := time.Now().Add(10 * time.Second); taken() < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a report sent as it was listed was not taken")
		}
	}
	time.Sleep(200 * time.Millisecond)
	if got := malformed(); got != base+4 {
		t.Errorf("malformed inventories counted %v, want %v (the first part of w2's report is well formed)", got, base+4)
	}
	if got := taken(); got != 1 {
		t.Errorf("%v reports taken, want w4's alone", got)
	}
	select {
	case <-done:
		t.Fatal("the leader stopped")
	default:
	}
}

// Three workers send reports of ~31 MiB at once, as workers send them
// (each part a request the leader answers once taken), while the leader
// decodes them part by part: every report is taken whole, and no part
// waits. Before, whole reports were published at once: with NATS's
// default limit of a subscription's pending messages (64 MiB) parts were
// dropped as a slow consumer's, and above it the server could close the
// leader's connection as one; a report missing a part never completes,
// so the machines it did not list were never found gone.
func TestReportsAtOnceAreTakenWhole(t *testing.T) {
	nc, _, m, done := runBareLeader(t)
	srvURL := nc.ConnectedUrl()
	// Plain NATS: send until the loop has subscribed.
	malformed := func() float64 { return counter(t, m.Malformed.WithLabelValues("inventory")) }
	for deadline := time.Now().Add(10 * time.Second); malformed() == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the leader does not take inventories")
		}
		if err := nc.Publish(wire.InventorySubject("inmemory", "w0"), []byte("not json")); err != nil {
			t.Fatal(err)
		}
	}
	// Parts of ~800 KiB (under NATS's 1 MiB message limit): 3 × 40 of
	// them are ~94 MiB.
	const workers, parts, perPart = 3, 40, 100
	instances := make([]wire.Instance, perPart)
	for i := range instances {
		instances[i] = wire.Instance{Cluster: "c", Machine: fmt.Sprintf("c-m%03d", i), Message: strings.Repeat("x", 8000)}
	}
	var wg sync.WaitGroup
	for w := range workers {
		worker := fmt.Sprintf("w%d", w+1)
		first, err := wire.Encode(&wire.Inventory{Provider: "inmemory", Worker: worker, Report: "r", Part: 1, Parts: parts,
			Time: time.Now(), Instances: instances})
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Count(first, []byte(`"part":1,`)) != 1 {
			t.Fatalf("cannot number the parts of %s", first[:200])
		}
		pc, err := nats.Connect(srvURL)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		// As workers send them: each part a request the leader answers
		// once it has taken it. Published at once, such reports outran the
		// leader's connection and the server closed it as a slow consumer
		// (1 run in 4 lost parts of every report on 2 busy cores).
		wg.Go(func() {
			for p := range parts {
				data := bytes.Replace(first, []byte(`"part":1,`), fmt.Appendf(nil, `"part":%d,`, p), 1)
				if _, err := pc.Request(wire.InventorySubject("inmemory", worker), data, 30*time.Second); err != nil {
					t.Errorf("%s part %d: %v", worker, p, err)
					return
				}
			}
		})
	}
	wg.Wait()
	taken := func() float64 { return counter(t, m.Inventories.WithLabelValues("inmemory")) }
	for deadline := time.Now().Add(time.Minute); taken() < workers; time.Sleep(50 * time.Millisecond) {
		select {
		case <-done:
			t.Fatal("the leader stopped")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v of %d reports taken whole (the leader's connection reconnected %d times)", taken(), workers, nc.Stats().Reconnects)
		}
	}
}
