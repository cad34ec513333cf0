package reconciler

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A cluster whose CA is lost from the gitfleet-pki bucket (the bucket, or
// the whole NATS store, lost with no backup restored) gets no new one: its
// running control plane trusts only the CA it was made with, so a machine
// sealed with another could never join it. The machine that joins waits,
// fleet.yaml's Reconciling condition says why and what to do, and once the
// bucket is restored from its backup the machine is published with the
// cluster's own CA.
func TestALostCAIsNotMadeAgain(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 1)
	keys := l.withBootstrap(time.Hour)
	l.start()
	cp := l.nextTasks(1)[0]
	l.answer(cp, wire.PhaseRunning)
	w := l.nextTasks(1)[0]
	pinned := l.bootData(keys, w).CACertHashes
	l.answer(w, wire.PhaseRunning)
	l.waitRecords("Running Running")

	// The backup an operator took, then the bucket lost and made again
	// empty at the next start, as a lost NATS store is.
	kv, err := l.js.KeyValue(t.Context(), wire.BucketPKI)
	if err != nil {
		t.Fatal(err)
	}
	backup, err := kv.Get(t.Context(), "ca.c1")
	if err != nil {
		t.Fatal(err)
	}
	l.stop()
	if err := l.js.DeleteKeyValue(t.Context(), wire.BucketPKI); err != nil {
		t.Fatal(err)
	}
	l.withBootstrap(time.Hour)
	l.start()

	l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 2))
	l.repo.commit("two workers")
	l.apply()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		batch, err := l.tasks.FetchNoWait(10)
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			task, _ := wire.DecodeTask(m.Data())
			d := l.bootData(keys, received{task: task})
			t.Fatalf("%s was published with CA %v, not the cluster's %v: a new CA, which its control plane does not trust",
				task.Machine.Name, d.CACertHashes, pinned)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := kv.Get(t.Context(), "ca.c1"); err == nil {
		t.Fatal("a new CA was made for c1")
	}
	l.waitFor("fleet.yaml to say the CA is lost", func() (bool, string) {
		f := l.statusSnapshot().Fleet
		for _, c := range f.Conditions {
			if c.Type == "Reconciling" && strings.Contains(c.Message, "cluster c1 has no CA") &&
				strings.Contains(c.Message, "restore") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", f.Conditions)
	})
	// The condition records the cluster it is about, for describe c1.
	if y := l.fleetYAML(); !strings.Contains(y, "\n    clusters:\n      - c1\n") {
		t.Errorf("fleet.yaml's Reconciling condition does not record that it concerns c1:\n%s", y)
	}

	// Restored from the backup while the daemon runs: the machine waiting
	// is published with the cluster's own CA, and the condition clears.
	if _, err := kv.Put(t.Context(), "ca.c1", backup.Value()); err != nil {
		t.Fatal(err)
	}
	got := l.nextTasks(1)[0]
	if d := l.bootData(keys, got); !slices.Equal(d.CACertHashes, pinned) {
		t.Fatalf("after the restore: CA %v, want %v", d.CACertHashes, pinned)
	}
	l.waitFor("the condition to clear", func() (bool, string) {
		for _, p := range l.health.Problems() {
			if p.Kind == ProblemBootstrap {
				return false, p.Message
			}
		}
		return true, ""
	})
}
