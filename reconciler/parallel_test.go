package reconciler

import (
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestLargePassesOnEveryCore: passes over enough clusters to be summarized
// and planned on several goroutines — the first one, which creates every
// machine, and a new leader's, which plans every cluster again — make
// each machine once: every one Running, none created twice, and a new
// leader over a converged fleet publishes nothing.
func TestLargePassesOnEveryCore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 1,664 machines")
	}
	const n = 2 * parallelMin
	repo := newBenchRepo(t, n)
	d := startBenchDaemon(t, repo.dir, 1)
	d.waitRunning(t, n*13, 5*time.Minute, 250*time.Millisecond)
	d.stop()
	d.startDaemon(t)
	deadline := time.Now().Add(time.Minute)
	for metricValue(d.metrics.PlanDuration) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no planning pass within a minute of the new leader's start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if planned := metricValue(d.metrics.ClustersPlanned); planned < n {
		t.Errorf("the new leader's first pass planned %.0f clusters, want all %d", planned, n)
	}
	time.Sleep(time.Second)
	if tasks := metricValue(d.metrics.TasksPublished); tasks != 0 {
		t.Errorf("the new leader published %.0f tasks over a converged fleet, want none", tasks)
	}
	if running := metricValueWhere(d.metrics.Machines, "phase", string(wire.PhaseRunning)); running != n*13 {
		t.Errorf("%.0f machines Running, want %d", running, n*13)
	}
}

// startFloor grows with the records read at a start, within bounds.
func TestStartFloor(t *testing.T) {
	for n, want := range map[uint64]int64{
		0: 0, 1000: 0, 8191: 0, // a small fleet's start: Go's default
		8192:     64 << 20,
		130000:   130000 * 8 << 10, // 10,000 clusters of 13 machines: ~1 GiB
		10000000: 4 << 30,          // at most 4 GiB
	} {
		if got := startFloor(n); got != want {
			t.Errorf("startFloor(%d) = %d, want %d", n, got, want)
		}
	}
}
