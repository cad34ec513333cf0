package reconciler

import (
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestMachinesGaugeFollowsRecords: gitfleet_machines by phase (and provider) says what the
// records say as machines are created, run and go — kept as records change,
// not counted by walking every machine after each pass.
func TestMachinesGaugeFollowsRecords(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 2)
	l.opts.Metrics = NewMetrics(nil)
	gauge := func() string {
		out := ""
		for _, p := range []wire.Phase{wire.PhasePending, wire.PhaseRunning, wire.PhaseDeleting} {
			var m dto.Metric
			if err := l.opts.Metrics.Machines.WithLabelValues(string(p), "inmemory").Write(&m); err != nil {
				t.Fatal(err)
			}
			out += fmt.Sprintf("%s=%d ", p, int(m.GetGauge().GetValue()))
		}
		return out
	}
	want := func(w string) {
		t.Helper()
		l.waitFor("gauge "+w, func() (bool, string) { g := gauge(); return g == w, g })
	}
	l.start()
	cp := l.nextTasks(1)
	want("Pending=1 Running=0 Deleting=0 ")
	l.answer(cp[0], wire.PhaseRunning)
	workers := l.nextTasks(2)
	want("Pending=2 Running=1 Deleting=0 ")
	for _, w := range workers {
		l.answer(w, wire.PhaseRunning)
	}
	want("Pending=0 Running=3 Deleting=0 ")

	// Scale the workers to one: one Deleting, then gone.
	l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 1))
	l.repo.commit("one worker")
	l.apply()
	del := l.nextTasks(1)
	want("Pending=0 Running=2 Deleting=1 ")
	l.answer(del[0], wire.PhaseDeleted)
	want("Pending=0 Running=2 Deleting=0 ")
}
