package reconciler

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A malformed event is terminated and counted and does not stop the loop;
// a malformed heartbeat is counted.
func TestMalformedMessages(t *testing.T) {
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
	defer func() { cancel(); <-done }()

	for _, body := range []string{"not json", `{"apiVersion":"gitfleet.io/wire/v9","cluster":"c","machine":"m","phase":"Running"}`} {
		if _, err := js.Publish(t.Context(), wire.EventSubject("c", "m"), []byte(body)); err != nil {
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
