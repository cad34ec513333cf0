package status

import (
	"strings"
	"testing"
	"time"
)

// A status branch deleted, or force-pushed back to an older commit, while
// the daemon runs: its next commit built its few changes on what was left,
// which showed clusters as they were long ago (or not at all, with
// fleet.yaml counting none) until a restart. A deleted branch is made
// again at the last status commit, so no history is lost; a branch forced
// back keeps what it was forced to, and the next commit writes on top every
// file as the writer last wrote it, with what changed since, saying so.
func TestWriterRestoresABranchDeletedOrMovedBack(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, Options{Repo: newRepo(t, dir), Interval: time.Hour})
	w.SetCluster(cluster("dev-1", 2, "Running"), origin)
	w.SetCluster(cluster("prod-1", 3, "Running"), origin)
	w.SetCluster(cluster("old-1", 1, "Running"), origin)
	w.SetFleet(FleetStatus{LastApplied: &SourceCommit{Commit: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Subject: "first"}}, origin)
	flush(t, w)
	first := gitCLI(t, dir, "rev-parse", branch)
	w.SetCluster(cluster("dev-1", 3, "Running"), origin)
	w.DeleteCluster("old-1", origin)
	w.SetFleet(FleetStatus{LastApplied: &SourceCommit{Commit: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", Subject: "second"}}, origin)
	flush(t, w)

	check := func(when string, prodWorkers int, restored bool) {
		t.Helper()
		s, err := Read(openRepo(t, dir), branch)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if dev := s.Cluster("dev-1"); dev == nil || len(dev.Machines) != 4 {
			t.Errorf("%s: dev-1 on the branch: %v, want its newest status (4 machines)", when, dev)
		}
		if prod := s.Cluster("prod-1"); prod == nil || len(prod.Machines) != 1+prodWorkers {
			t.Errorf("%s: prod-1 on the branch: %v, want %d machines", when, prod, 1+prodWorkers)
		}
		if s.Cluster("old-1") != nil {
			t.Errorf("%s: old-1, deleted, is on the branch again", when)
		}
		if s.Fleet.Counts.Clusters != 2 || s.Fleet.Counts.Machines != 5+prodWorkers {
			t.Errorf("%s: fleet.yaml counts %+v, want 2 clusters and %d machines", when, s.Fleet.Counts, 5+prodWorkers)
		}
		if la := s.Fleet.LastApplied; la == nil || la.Subject != "second" {
			t.Errorf("%s: fleet.yaml's lastApplied %+v, want the newest", when, la)
		}
		if subject := gitCLI(t, dir, "log", "-1", "--format=%s", branch); strings.Contains(subject, "restored") != restored {
			t.Errorf("%s: the commit's subject %q, want one that says it restored files: %v", when, subject, restored)
		}
	}

	// Deleted: made again at the last status commit, history kept.
	second := gitCLI(t, dir, "rev-parse", branch)
	gitCLI(t, dir, "branch", "-D", branch)
	w.SetCluster(cluster("prod-1", 4, "Running"), origin)
	flush(t, w)
	check("after the branch was deleted", 4, false)
	if parent := gitCLI(t, dir, "rev-parse", branch+"~1"); parent != second {
		t.Errorf("the branch made again is on %s, want the last status commit %s", parent, second)
	}

	// Forced back to the first commit: the commits after it are lost, and
	// the next commit restores the status on top.
	gitCLI(t, dir, "update-ref", "refs/heads/"+branch, first)
	w.SetCluster(cluster("prod-1", 5, "Running"), origin)
	flush(t, w)
	check("after a force push back", 5, true)

	// Moved on by someone else, as before: nothing is restored.
	w.SetCluster(cluster("prod-1", 6, "Running"), origin)
	flush(t, w)
	if subject := gitCLI(t, dir, "log", "-1", "--format=%s", branch); strings.Contains(subject, "restored") {
		t.Errorf("an ordinary commit says it restored the status: %q", subject)
	}
	gitCLI(t, dir, "fsck", "--strict", "--no-dangling")
}

// A status branch deleted and its commits then pruned from the repository
// (git gc once nothing held them): there is nothing to make the branch
// again at, and a commit naming a pruned parent would break the
// repository. The status goes on from what the branch holds, as before
// the restore: the writer must not fail every commit after it for a
// commit it cannot read.
func TestWriterGoesOnAfterItsBranchIsDeletedAndPruned(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, Options{Repo: newRepo(t, dir), Interval: time.Hour})
	w.SetCluster(cluster("dev-1", 2, "Running"), origin)
	flush(t, w)
	w.SetCluster(cluster("dev-1", 3, "Running"), origin)
	flush(t, w)
	gitCLI(t, dir, "branch", "-D", branch)
	gitCLI(t, dir, "reflog", "expire", "--expire=now", "--all")
	gitCLI(t, dir, "gc", "-q", "--prune=now")
	w.SetCluster(cluster("prod-1", 1, "Running"), origin)
	flush(t, w)
	s, err := Read(openRepo(t, dir), branch)
	if err != nil {
		t.Fatal(err)
	}
	if s.Cluster("prod-1") == nil {
		t.Error("prod-1 is not on the branch written after the prune")
	}
	gitCLI(t, dir, "fsck", "--strict", "--no-dangling")
}

// Another writer (a replica that led meanwhile) whose clock is hours
// behind moved the branch on from this writer's last commit: its commits
// look older than that one. They are walked all the same, the branch is
// found moved on, not forced back, and nothing of the other writer's is
// overwritten with what this writer last wrote. Before, the walk stopped
// at commits an hour older than the writer's last, found the branch
// forced back, and put this writer's older statuses back on top.
func TestWriterTakesABranchMovedOnByASkewedClock(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	w := newWriter(t, Options{Repo: repo, Interval: time.Hour})
	w.SetCluster(cluster("dev-1", 2, "Running"), origin)
	w.SetCluster(cluster("prod-1", 3, "Running"), origin)
	flush(t, w)

	behind := time.Date(2026, 11, 20, 7, 0, 0, 0, time.UTC) // three hours behind
	other := newWriter(t, Options{Repo: openRepo(t, dir), Interval: time.Hour, Now: func() time.Time { return behind }})
	for n := 4; n <= 7; n++ {
		other.SetCluster(cluster("prod-1", n, "Running"), origin)
		flush(t, other)
	}
	other.Close()

	w.SetCluster(cluster("dev-1", 5, "Running"), origin)
	flush(t, w)
	s, err := Read(openRepo(t, dir), branch)
	if err != nil {
		t.Fatal(err)
	}
	if prod := s.Cluster("prod-1"); prod == nil || len(prod.Machines) != 8 {
		t.Errorf("prod-1 on the branch: %v, want the other writer's status (8 machines), not this writer's older one", prod)
	}
	if dev := s.Cluster("dev-1"); dev == nil || len(dev.Machines) != 6 {
		t.Errorf("dev-1 on the branch: %v, want this writer's newest (6 machines)", dev)
	}
	if subject := gitCLI(t, dir, "log", "-1", "--format=%s", branch); strings.Contains(subject, "restored") {
		t.Errorf("the commit after another writer's says it restored the status: %q", subject)
	}
}
