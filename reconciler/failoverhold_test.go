package reconciler

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestAFailoverHoldsDeletesPastALongFirstPass: a new leader's first pass
// may take longer than InventoryWait (a large fleet; inventories are asked
// for only once it is done, inventoryHold). The deletes of Running machines
// it holds wait for InventoryWait after that pass, when the inventories it
// asked for can have answered, not after its start: counted from the start,
// the wait is over before anything was asked, and a scale-down deletes a
// healthy machine for a dead one all the same. They are made once the wait
// is over, whether or not an inventory came (here none does).
func TestAFailoverHoldsDeletesPastALongFirstPass(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 2)
	l.start()
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning) // the control plane first
	for _, r := range l.nextTasks(2) {
		l.answer(r, wire.PhaseRunning)
	}
	l.waitRecords("Running Running Running")
	l.stop()

	// While no daemon leads: c1 is scaled down, and a cluster is added
	// whose creates the next leader's first pass makes.
	l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 1))
	l.repo.write("clusters/c2.yaml", fmt.Sprintf(loopCluster, "c2", 1, 0))
	l.repo.commit("c1 with one worker, and c2")

	// The first pass takes 30 s on the leader's clock: its first create
	// moves the clock on (a pass of a large fleet, compressed).
	var skew atomic.Int64
	l.opts.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	var named atomic.Bool
	l.opts.NewName = func(cluster, pool string) string {
		if !named.Swap(true) {
			skew.Add(int64(30 * time.Second))
		}
		return RandomName(cluster, pool)
	}
	l.opts.TaskTimeout = time.Hour // the skew passes no task timeout
	l.opts.InventoryWait = 2 * time.Second
	l.start()
	passEnd := time.Now()
	created := l.nextTasks(1) // c2's control plane, the first pass's
	if op := created[0].task.Operation; op != wire.OpCreate || created[0].task.Machine.Cluster != "c2" {
		t.Fatalf("the first pass's task: %s of %s/%s, want c2's create", op, created[0].task.Machine.Cluster, created[0].task.Machine.Name)
	}
	var del *received
	deadline := time.Now().Add(20 * time.Second)
	for del == nil && time.Now().Before(deadline) {
		batch, err := l.tasks.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			task, err := wire.DecodeTask(m.Data())
			if err != nil {
				t.Fatal(err)
			}
			if task.Operation == wire.OpDelete {
				del = &received{task: task, msg: m}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if del == nil {
		t.Fatal("c1's scale-down was never made: the hold was not released")
	}
	if waited := time.Since(passEnd); waited < l.opts.InventoryWait-500*time.Millisecond {
		t.Errorf("c1's scale-down deleted %s %v after the new leader's first pass, want InventoryWait (%v) after it: the inventories it asks for after that pass could not have answered",
			del.task.Machine.Name, waited.Round(time.Millisecond), l.opts.InventoryWait)
	}
}
