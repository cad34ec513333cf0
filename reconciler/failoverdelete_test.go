package reconciler

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A worker dies while no daemon leads, and a commit meanwhile scales its
// pool down by one. The new leader's first pass, from its records alone,
// would delete the oldest worker, a healthy one, and then replace the
// dead one: a machine lost for nothing, and one machine short until the
// replacement runs. Its deletes of Running machines wait for the
// inventories it asks for after that pass (InventoryWait): the dead
// worker is found gone and removed, and both healthy workers stay.
func TestAScaleDownAfterAFailoverTakesTheDeadMachine(t *testing.T) {
	repo := &benchRepo{tb: t, dir: t.TempDir()}
	repo.git("init", "-q", "-b", "main")
	repo.write("classes/small.yaml", fmt.Sprintf(loopClass, "inmemory"))
	repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 3))
	repo.commit("c1 with three workers")
	js, _ := inmemoryCloud(t)
	workers := func() []*Record {
		var out []*Record
		for _, rec := range machineRecords(t, js) {
			if rec.Deployment == "md-0" {
				out = append(out, rec)
			}
		}
		slices.SortFunc(out, func(a, b *Record) int { return a.Created.Time().Compare(b.Created.Time()) })
		return out
	}
	waitWorkers := func(what string, cond func([]*Record) bool) []*Record {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			ws := workers()
			if cond(ws) {
				return ws
			}
			if time.Now().After(deadline) {
				var names []string
				for _, w := range ws {
					names = append(names, w.Name+" "+string(w.Phase))
				}
				t.Fatalf("%s: not within a minute: %v", what, names)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	running := func(ws []*Record) bool {
		for _, w := range ws {
			if w.Phase != wire.PhaseRunning {
				return false
			}
		}
		return true
	}
	stopA, _ := runLeader(t, js, repo.dir)
	first := waitWorkers("three workers running", func(ws []*Record) bool { return len(ws) == 3 && running(ws) })
	stopA()

	// While no daemon leads: the newest worker dies, and the pool is
	// scaled down to two.
	cloud, err := inmemory.New(t.Context(), js, inmemory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dead := first[2]
	if err := cloud.Delete(t.Context(), wire.Machine{Cluster: dead.Cluster, Name: dead.Name}); err != nil {
		t.Fatal(err)
	}
	repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 2))
	repo.commit("c1 with two workers")

	stopB, _ := runLeader(t, js, repo.dir)
	defer stopB()
	final := waitWorkers("two workers running, the dead one gone", func(ws []*Record) bool {
		return len(ws) == 2 && running(ws) && !slices.ContainsFunc(ws, func(r *Record) bool { return r.Name == dead.Name })
	})
	for i, w := range final {
		if w.Name != first[i].Name {
			t.Errorf("workers at the end %s, %s; want the two healthy ones kept, %s and %s (the failover's first pass deleted a healthy worker)",
				final[0].Name, final[1].Name, first[0].Name, first[1].Name)
			break
		}
	}
}
