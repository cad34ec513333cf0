package reconciler

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A new machine's random name can come out as one a machine of the cluster
// already has (27^5 names a pool: at 1,000 clusters × 13 machines about
// one class bump in a hundred meets one). The name is drawn again: the machine is created
// under another name, and the pool reaches its size. Before, the create
// was dropped in silence and the cluster was not planned again, so a
// rollout stopped for good with every machine Running.
func TestATakenNameIsDrawnAgain(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 1)
	var mu sync.Mutex
	var workers []string // names given to md-0 so far
	l.opts.NewName = func(cluster, pool string) string {
		mu.Lock()
		defer mu.Unlock()
		if pool == "md-0" && len(workers) == 1 {
			// The second draw for md-0 repeats the first machine's name.
			workers = append(workers, "")
			return workers[0]
		}
		name := fmt.Sprintf("%s-%s-n%04d", cluster, pool, len(workers))
		if pool == "md-0" {
			workers = append(workers, name)
		}
		return name
	}
	l.start()
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning) // the control plane
	first := l.nextTasks(1)[0]
	l.answer(first, wire.PhaseRunning)
	l.waitRecords("Running Running")

	l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 2))
	l.repo.commit("two workers")
	l.apply()
	second := l.nextTasks(1)[0]
	if second.task.Operation != wire.OpCreate || second.task.Machine.Name == first.task.Machine.Name {
		t.Fatalf("task %s %s; want a create under a name no machine has", second.task.Operation, second.task.Machine.Name)
	}
	l.answer(second, wire.PhaseRunning)
	recs := l.waitRecords("Running Running Running")
	if recs[first.task.Machine.Name] == nil || recs[second.task.Machine.Name] == nil {
		t.Errorf("records %v; want both workers", phases(recs))
	}
}
