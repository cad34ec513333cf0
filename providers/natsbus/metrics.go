package natsbus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

var (
	pendingDesc = prometheus.NewDesc("gitfleet_consumer_pending",
		"Messages of a stream its consumer has not been given yet (queue depth), by stream and consumer.", []string{"stream", "consumer"}, nil)
	ackPendingDesc = prometheus.NewDesc("gitfleet_consumer_ack_pending",
		"Messages a consumer was given and has not acknowledged, by stream and consumer.", []string{"stream", "consumer"}, nil)
	streamMsgsDesc = prometheus.NewDesc("gitfleet_stream_messages",
		"Messages a stream holds.", []string{"stream"}, nil)
)

// QueueCollector reports, at each scrape, the depth of the task and event
// streams and of each consumer on them, as JetStream says (asked with a
// two-second timeout; nothing is reported for a stream that does not
// answer).
func QueueCollector(js jetstream.JetStream) prometheus.Collector { return queueCollector{js} }

type queueCollector struct{ js jetstream.JetStream }

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- ackPendingDesc
	ch <- streamMsgsDesc
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, name := range []string{wire.StreamTasks, wire.StreamEvents} {
		s, err := c.js.Stream(ctx, name)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(streamMsgsDesc, prometheus.GaugeValue, float64(s.CachedInfo().State.Msgs), name)
		lister := s.ListConsumers(ctx)
		for info := range lister.Info() {
			ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(info.NumPending), name, info.Name)
			ch <- prometheus.MustNewConstMetric(ackPendingDesc, prometheus.GaugeValue, float64(info.NumAckPending), name, info.Name)
		}
	}
}
