package providers

import "github.com/prometheus/client_golang/prometheus"

var tasksDesc = prometheus.NewDesc("gitfleet_worker_tasks_total",
	"Tasks a provider worker finished, by outcome: succeeded, failed, retried, malformed, stale (dropped: the machine's record is on other work).",
	[]string{"provider", "outcome"}, nil)

// Collector exposes the worker's Stats to Prometheus as
// gitfleet_worker_tasks_total{provider, outcome}.
func (w *Worker) Collector() prometheus.Collector { return Collector(w) }

// Collector exposes the Stats of workers of different providers run in one
// process (gitfleet up) as one gitfleet_worker_tasks_total.
func Collector(workers ...*Worker) prometheus.Collector { return workerCollector(workers) }

type workerCollector []*Worker

func (c workerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- tasksDesc }

func (c workerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, w := range c {
		s := w.Stats()
		for _, v := range []struct {
			outcome string
			n       uint64
		}{{"succeeded", s.Succeeded}, {"failed", s.Failed}, {"retried", s.Retried}, {"malformed", s.Malformed}, {"stale", s.Stale}} {
			ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.CounterValue, float64(v.n), w.p.Name(), v.outcome)
		}
	}
}
