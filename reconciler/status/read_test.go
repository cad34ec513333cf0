package status

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A plain clone has the status branch only as origin/gitfleet/status; the
// readers find it there.
func TestReadFindsTheBranchInAClone(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, Options{Repo: newRepo(t, dir), Interval: time.Hour})
	w.SetCluster(cluster("dev-1", 2, "Running"), origin)
	flush(t, w)
	w.SetCluster(cluster("dev-1", 3, "Running"), Origin{SourceCommit: "2222222222222222222222222222222222222222", PlanID: "plan-2"})
	flush(t, w)

	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, dir, "clone", "-q", dir, clone)
	repo := openRepo(t, clone)
	c, err := ReadCluster(repo, branch, "dev-1")
	if err != nil || c == nil || len(c.Machines) != 4 {
		t.Fatalf("ReadCluster in a clone = %+v, %v", c, err)
	}
	if c, err := ReadCluster(repo, branch, "nope"); c != nil || err != nil {
		t.Errorf("ReadCluster of an unknown cluster = %+v, %v; want nil, nil", c, err)
	}
	log, err := Log(repo, branch)
	if err != nil || len(log) != 2 {
		t.Fatalf("Log = %d commits, %v", len(log), err)
	}
	if got := fmt.Sprint(log[0].SourceCommits, log[0].Plans, log[1].SourceCommits); got != "[2222222222222222222222222222222222222222] [plan-2] [1111111111111111111111111111111111111111]" {
		t.Errorf("trailers newest first = %s", got)
	}
	ch, err := NewDiffer(repo).Changes(log[0], "")
	if err != nil || len(ch) != 1 || ch[0].Cluster != "dev-1" {
		t.Fatalf("Changes = %+v, %v", ch, err)
	}
	want := "[deployment md-0 2/2 ready, 2 updated → 3/3 ready, 3 updated machine dev-1-md-0-wc created: Running v1.31.2]"
	if got := fmt.Sprint(ch[0].Transitions); got != want {
		t.Errorf("transitions = %s, want %s", got, want)
	}
	if _, err := Read(openRepo(t, dir), "no-such-branch"); !errors.Is(err, ErrNoStatus) {
		t.Errorf("Read of a missing branch = %v, want ErrNoStatus", err)
	}
}

// SetCluster from several goroutines while the Writer's own goroutine
// commits: every cluster ends in its last state (run with -race).
func TestWriterConcurrentUpdates(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, Options{Repo: newRepo(t, dir), Interval: 5 * time.Millisecond})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("c-%d", g)
			for i := range 100 {
				w.SetCluster(cluster(name, 1+i%5, "Provisioning"), origin)
			}
			w.SetCluster(cluster(name, 2, "Running"), origin)
		}()
	}
	wg.Wait()
	flush(t, w)
	snap, err := Read(openRepo(t, dir), branch)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Clusters) != 4 || snap.Fleet.Clusters != 4 || snap.Fleet.Machines != 12 {
		t.Fatalf("%d clusters, fleet counts %+v", len(snap.Clusters), snap.Fleet.Counts)
	}
	for _, c := range snap.Clusters {
		if c.Phase != ClusterProvisioned || len(c.Machines) != 3 {
			t.Errorf("%s: %s with %d machines, want its last state", c.Name, c.Phase, len(c.Machines))
		}
	}
	w.Close()
	if err := w.Flush(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close = %v, want ErrClosed", err)
	}
}

// A plan against what runs takes the status branch's machines, healthy
// unless the daemon marked them unhealthy.
func TestSnapshotObserved(t *testing.T) {
	c := cluster("dev-1", 2, "Running")
	c.Machines[1].Unhealthy = true
	ms := (&Snapshot{Clusters: []ClusterStatus{c}}).Observed()
	if len(ms) != 3 || ms[0].Cluster != "dev-1" || ms[0].Deployment != "" || ms[1].Deployment != "md-0" {
		t.Fatalf("observed %+v", ms)
	}
	if !ms[0].Healthy || ms[1].Healthy || !ms[2].Healthy || string(ms[1].Phase) != "Running" {
		t.Errorf("health and phase not carried: %+v", ms)
	}
}
