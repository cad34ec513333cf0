package reconciler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestMachinesGaugeFollowsRecords: gitfleet_machines by phase, class and
// provider, and gitfleet_clusters by phase and class, say what the records
// and the status say as machines are created, run and go and as the
// cluster moves to another class — kept as records change, not counted by
// walking every machine after each pass.
func TestMachinesGaugeFollowsRecords(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 2)
	l.opts.Metrics = NewMetrics(nil)
	value := func(g *prometheus.GaugeVec, labels ...string) int {
		var m dto.Metric
		if err := g.WithLabelValues(labels...).Write(&m); err != nil {
			t.Fatal(err)
		}
		return int(m.GetGauge().GetValue())
	}
	gauge := func(class string) string {
		out := ""
		for _, p := range []wire.Phase{wire.PhasePending, wire.PhaseRunning, wire.PhaseDeleting} {
			out += fmt.Sprintf("%s=%d ", p, value(l.opts.Metrics.Machines, string(p), class, "inmemory"))
		}
		for _, p := range []string{planner.PhaseProvisioning, planner.PhaseProvisioned} {
			out += fmt.Sprintf("cluster %s=%d ", p, value(l.opts.Metrics.Clusters, p, class))
		}
		return strings.TrimSpace(out)
	}
	want := func(class, w string) {
		t.Helper()
		l.waitFor(class+" gauges "+w, func() (bool, string) { g := gauge(class); return g == w, g })
	}
	l.start()
	cp := l.nextTasks(1)
	want("small", "Pending=1 Running=0 Deleting=0 cluster Provisioning=1 cluster Provisioned=0")
	l.answer(cp[0], wire.PhaseRunning)
	workers := l.nextTasks(2)
	want("small", "Pending=2 Running=1 Deleting=0 cluster Provisioning=0 cluster Provisioned=1") // the control plane runs
	for _, w := range workers {
		l.answer(w, wire.PhaseRunning)
	}
	want("small", "Pending=0 Running=3 Deleting=0 cluster Provisioning=0 cluster Provisioned=1")

	// Scale the workers to one: one Deleting, then gone.
	l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 1))
	l.repo.commit("one worker")
	l.apply()
	del := l.nextTasks(1)
	want("small", "Pending=0 Running=2 Deleting=1 cluster Provisioning=0 cluster Provisioned=1")
	l.answer(del[0], wire.PhaseDeleted)
	want("small", "Pending=0 Running=2 Deleting=0 cluster Provisioning=0 cluster Provisioned=1")

	// The cluster moves to a class of the same shape: its machines and
	// itself count under the new class, and none under the old.
	l.repo.write("classes/other.yaml", strings.Replace(fmt.Sprintf(loopClass, "inmemory"), "name: small", "name: other", 1))
	l.repo.write("clusters/c1.yaml", strings.Replace(fmt.Sprintf(loopCluster, "c1", 1, 1), "{name: small}", "{name: other}", 1))
	l.repo.commit("c1: class other")
	l.apply()
	want("other", "Pending=0 Running=2 Deleting=0 cluster Provisioning=0 cluster Provisioned=1")
	want("small", "Pending=0 Running=0 Deleting=0 cluster Provisioning=0 cluster Provisioned=0")
}
