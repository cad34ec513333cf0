package local_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/providers/local"
	"github.com/gitfleet/gitfleet/providers/providertest"
)

// A machine's state folder removed while its node runs (by hand, a
// cleanup job, a worker's disk restored from an older copy): the node runs
// on. Before, no lock or pid file told of it any more, so List left it
// out, the daemon took the machine as gone and made another, and the node
// ran on beside its replacement, listed by nothing and stopped by nothing
// (gitfleet node stop included). It is listed as the machine it is, by
// this worker and a restarted one, and Delete and node stop end it.
func TestANodeWhoseFolderIsLostIsListedAndStopped(t *testing.T) {
	url := startNATS(t)
	state := t.TempDir()
	p := newProvider(t, url, state)
	made, err := p.Create(ctx(t), providertest.Machine(p, "c1", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Create(ctx(t), providertest.Machine(p, "c1", "b")); err != nil {
		t.Fatal(err)
	}
	pids := nodePIDs(t, state)
	if err := os.RemoveAll(filepath.Join(state, "c1", "a")); err != nil {
		t.Fatal(err)
	}
	for _, lister := range []*local.Provider{p, newProvider(t, url, state)} {
		list, err := lister.List(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, in := range list {
			names = append(names, in.Name)
			if in.Name == "a" && (in.ProviderID != made.ProviderID || in.Reason != "" || in.Version != made.Version) {
				t.Errorf("machine a listed as %+v; want the running node %+v", in, made)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"a", "b"}) {
			t.Errorf("listed %v; want a (its folder gone, its node running) and b", names)
		}
	}
	running, err := local.Running(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(running) != 2 || running[0].Machine != "a" {
		t.Errorf("node list: %+v; want a and b", running)
	}

	if err := p.Delete(ctx(t), providertest.Machine(p, "c1", "a")); err != nil {
		t.Fatal(err)
	}
	got := nodePIDs(t, state)
	for deadline := time.Now().Add(5 * time.Second); len(got) != 1 && time.Now().Before(deadline); got = nodePIDs(t, state) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != 1 || len(pids) != 2 {
		t.Errorf("node processes %v after deleting a (of %v); want b's alone", got, pids)
	}

	// gitfleet node stop (Running, Signal, Gone) ends one too, with the
	// whole state folder gone.
	if err := os.RemoveAll(state); err != nil {
		t.Fatal(err)
	}
	running, err = local.Running(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(running) != 1 {
		t.Fatalf("node list: %+v; want b", running)
	}
	if err := running[0].Signal(15); err != nil {
		t.Fatal(err)
	}
	if !running[0].Gone(5 * time.Second) {
		t.Error("node stop: b not gone within 5 s")
	}
	if got := nodePIDs(t, state); len(got) != 0 {
		t.Errorf("node processes %v after node stop", got)
	}
}
