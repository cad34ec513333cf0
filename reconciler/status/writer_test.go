package status

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/google/go-cmp/cmp"
)

const branch = "gitfleet/status"

var origin = Origin{SourceCommit: "1111111111111111111111111111111111111111", PlanID: "plan-1"}

func TestWriterBatchesUpdatesOfOneIntervalIntoOneCommit(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	w := newWriter(t, Options{Repo: repo, Interval: 300 * time.Millisecond})
	for i := range 50 {
		phase := "Provisioning"
		if i == 49 {
			phase = "Running"
		}
		w.SetCluster(cluster("dev-1", 2+i%3, phase), origin)
		w.SetCluster(cluster("prod-1", 3, "Provisioning"), Origin{SourceCommit: "2222222222222222222222222222222222222222", PlanID: "plan-2"})
	}
	deadline := time.Now().Add(10 * time.Second)
	for commitCount(t, dir, branch) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no status commit within 10s of a 300ms interval")
		}
		time.Sleep(20 * time.Millisecond)
	}
	flush(t, w) // nothing left: no second commit
	if n := commitCount(t, dir, branch); n != 1 {
		t.Fatalf("status branch has %d commits after one batch, want 1", n)
	}
	got := gitCLI(t, dir, "show", branch+":clusters/dev-1.yaml")
	want, _ := EncodeCluster(cluster("dev-1", 2+49%3, "Running"))
	if diff := cmp.Diff(strings.TrimSpace(string(want)), got); diff != "" {
		t.Errorf("clusters/dev-1.yaml is not the last update (-want +got):\n%s", diff)
	}
	subject := gitCLI(t, dir, "log", "-1", "--format=%s", branch)
	if want := "dev-1: Provisioned, 4 machines: 4 Running; and 1 more"; subject != want {
		t.Errorf("subject = %q, want %q", subject, want)
	}
	body := gitCLI(t, dir, "log", "-1", "--format=%b", branch)
	if want := "dev-1: Provisioned, 4 machines: 4 Running\nprod-1: Provisioning, 4 machines: 1 Running, 3 Provisioning\n\nGitfleet-Source-Commit:"; !strings.HasPrefix(body, want) {
		t.Errorf("body:\n%s\nwant it to start with:\n%s", body, want)
	}
	// The user's work tree and HEAD are untouched.
	if s := gitCLI(t, dir, "status", "--porcelain"); s != "" {
		t.Errorf("work tree changed:\n%s", s)
	}
	if h := gitCLI(t, dir, "rev-parse", "--abbrev-ref", "HEAD"); h != "main" {
		t.Errorf("HEAD = %s, want main", h)
	}
}

func TestWriterCommitsOnlyMeaningfulChanges(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, Options{Repo: newRepo(t, dir), Interval: time.Hour})
	w.SetCluster(cluster("dev-1", 2, "Provisioning"), origin)
	flush(t, w)
	if n := commitCount(t, dir, branch); n != 1 {
		t.Fatalf("%d commits, want 1", n)
	}
	// Same state again, in another order of machines: nothing to commit.
	c := cluster("dev-1", 2, "Provisioning")
	c.Machines[0], c.Machines[2] = c.Machines[2], c.Machines[0]
	w.SetCluster(c, origin)
	flush(t, w)
	// A change undone before the flush: nothing to commit.
	w.SetCluster(cluster("dev-1", 2, "Running"), origin)
	w.SetCluster(cluster("dev-1", 2, "Provisioning"), origin)
	flush(t, w)
	if n := commitCount(t, dir, branch); n != 1 {
		t.Fatalf("%d commits after unchanged updates, want 1", n)
	}
	w.SetCluster(cluster("dev-1", 2, "Running"), origin)
	flush(t, w)
	if n := commitCount(t, dir, branch); n != 2 {
		t.Fatalf("%d commits after a real change, want 2", n)
	}
	if s := w.Stats(); s.Commits != 2 {
		t.Errorf("Stats().Commits = %d, want 2", s.Commits)
	}
}

func TestWriterTrailersNameSourceCommitAndPlan(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, Options{Repo: newRepo(t, dir), Interval: time.Hour})
	w.SetCluster(cluster("dev-1", 1, "Provisioning"), origin)
	w.SetCluster(cluster("prod-1", 1, "Provisioning"), Origin{SourceCommit: "2222222222222222222222222222222222222222", PlanID: "plan-2"})
	w.SetFleet(FleetStatus{LastApplied: &SourceCommit{Commit: "2222222222222222222222222222222222222222", Subject: "scale prod-1"}},
		Origin{SourceCommit: "2222222222222222222222222222222222222222", PlanID: "plan-2"})
	flush(t, w)
	// git itself parses the trailers.
	got := gitCLI(t, dir, "log", "-1", "--format=%(trailers:key=Gitfleet-Source-Commit,valueonly,separator=%x2C)|%(trailers:key=Gitfleet-Plan,valueonly,separator=%x2C)", branch)
	want := "1111111111111111111111111111111111111111,2222222222222222222222222222222222222222|plan-1,plan-2"
	if got != want {
		t.Errorf("trailers = %q, want %q", got, want)
	}
	body := gitCLI(t, dir, "log", "-1", "--format=%b", branch)
	if !strings.Contains(body, "fleet: applied 2222222\n") {
		t.Errorf("body does not summarise the fleet change:\n%s", body)
	}
	author := gitCLI(t, dir, "log", "-1", "--format=%an <%ae>|%cn <%ce>", branch)
	if author != "gitfleet <gitfleet@localhost>|gitfleet <gitfleet@localhost>" {
		t.Errorf("author|committer = %s", author)
	}
}

func TestWriterFleetCountsAndDeletion(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	w := newWriter(t, Options{Repo: repo, Interval: time.Hour})
	w.SetCluster(cluster("dev-1", 2, "Running"), origin)
	w.SetCluster(cluster("prod-1", 3, "Provisioning"), origin)
	w.SetFleet(FleetStatus{
		LastApplied:  &SourceCommit{Commit: "1111111111111111111111111111111111111111", Subject: "add clusters"},
		LastRejected: &Rejection{SourceCommit: SourceCommit{Commit: "3333333333333333333333333333333333333333", Subject: "bad"}, Errors: []string{"clusters/b.yaml:3:5: spec: x", "clusters/a.yaml:1: y"}},
	}, origin)
	flush(t, w)
	want := `lastApplied:
  commit: "1111111111111111111111111111111111111111"
  subject: add clusters
lastRejected:
  commit: "3333333333333333333333333333333333333333"
  subject: bad
  errors:
    - 'clusters/a.yaml:1: y'
    - 'clusters/b.yaml:3:5: spec: x'
clusters: 2
machines: 7
clustersByClass:
  standard: 2
clustersByVersion:
  v1.31.2: 2
clustersByPhase:
  Provisioned: 1
  Provisioning: 1
machinesByPhase:
  Provisioning: 3
  Running: 4
machinesByVersion:
  v1.31.2: 7`
	if diff := cmp.Diff(want, gitCLI(t, dir, "show", branch+":fleet.yaml")); diff != "" {
		t.Errorf("fleet.yaml (-want +got):\n%s", diff)
	}
	w.DeleteCluster("dev-1", origin)
	w.DeleteCluster("dev-1", origin) // twice: still one change
	w.DeleteCluster("never-existed", origin)
	flush(t, w)
	if files := gitCLI(t, dir, "ls-tree", "-r", "--name-only", branch); files != "clusters/prod-1.yaml\nfleet.yaml" {
		t.Errorf("files after deleting dev-1:\n%s", files)
	}
	if s := gitCLI(t, dir, "log", "-1", "--format=%s", branch); !strings.HasPrefix(s, "dev-1: deleted") {
		t.Errorf("subject = %q, want it to start with dev-1: deleted", s)
	}
	snap, err := Read(repo, branch)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Fleet.Clusters != 1 || snap.Fleet.Machines != 4 || len(snap.Clusters) != 1 || snap.Cluster("prod-1") == nil {
		t.Errorf("after deletion: fleet counts %+v, clusters %d", snap.Fleet.Counts, len(snap.Clusters))
	}
	if diff := cmp.Diff(cluster("prod-1", 3, "Provisioning").normalized(), *snap.Cluster("prod-1")); diff != "" {
		t.Errorf("Read round trip (-want +got):\n%s", diff)
	}
	w.DeleteCluster("prod-1", origin)
	flush(t, w)
	if files := gitCLI(t, dir, "ls-tree", "-r", "--name-only", branch); files != "fleet.yaml" {
		t.Errorf("files after deleting every cluster:\n%s", files)
	}
	gitCLI(t, dir, "fsck", "--strict", "--no-dangling") // every object the writer made is one Git accepts
}

// A commit made with the git CLI between the writer reading the branch and
// setting it makes the compare-and-set fail; the writer rebuilds on top and
// both changes hold.
func TestWriterRebuildsOnTopOfAConcurrentCommit(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, Options{Repo: newRepo(t, dir), Interval: time.Hour})
	w.SetCluster(cluster("dev-1", 1, "Provisioning"), origin)
	flush(t, w)
	ext, _ := EncodeCluster(cluster("edge-1", 2, "Running"))
	raced := 0
	w.beforeCAS = func() {
		if raced++; raced > 1 {
			return
		}
		wt := filepath.Join(t.TempDir(), "wt")
		gitCLI(t, dir, "worktree", "add", "-q", wt, branch)
		if err := os.WriteFile(filepath.Join(wt, "clusters", "edge-1.yaml"), ext, 0o644); err != nil {
			t.Fatal(err)
		}
		gitCLI(t, wt, "add", ".")
		gitCLI(t, wt, "commit", "-q", "-m", "edge-1 by hand")
	}
	w.SetCluster(cluster("dev-1", 1, "Running"), origin)
	flush(t, w)
	if raced != 2 {
		t.Fatalf("beforeCAS ran %d times, want 2 (one race, one retry)", raced)
	}
	log := gitCLI(t, dir, "log", "--format=%s", branch)
	want := "dev-1: Provisioned, 2 machines: 2 Running\nedge-1 by hand\ndev-1: Provisioning, 2 machines: 1 Running, 1 Provisioning"
	if log != want {
		t.Errorf("log:\n%s\nwant:\n%s", log, want)
	}
	fleet := gitCLI(t, dir, "show", branch+":fleet.yaml")
	if !strings.Contains(fleet, "clusters: 2\n") {
		t.Errorf("fleet.yaml does not count the cluster committed by hand:\n%s", fleet)
	}
	if s := w.Stats(); s.Retries != 1 {
		t.Errorf("Retries = %d, want 1", s.Retries)
	}
	gitCLI(t, dir, "fsck", "--strict", "--no-dangling")
}

// Two writers on one repository (a daemon handing over to another): the
// second builds on the first's commit.
func TestTwoWritersOnOneRepository(t *testing.T) {
	dir := t.TempDir()
	newRepo(t, dir)
	a := newWriter(t, Options{Repo: openRepo(t, dir), Interval: time.Hour})
	b := newWriter(t, Options{Repo: openRepo(t, dir), Interval: time.Hour})
	a.SetCluster(cluster("dev-1", 1, "Running"), origin)
	flush(t, a)
	b.SetCluster(cluster("prod-1", 1, "Running"), origin)
	flush(t, b)
	if files := gitCLI(t, dir, "ls-tree", "-r", "--name-only", branch); files != "clusters/dev-1.yaml\nclusters/prod-1.yaml\nfleet.yaml" {
		t.Errorf("files:\n%s", files)
	}
	if n := commitCount(t, dir, branch); n != 2 {
		t.Errorf("%d commits, want 2", n)
	}
}

func TestWriterRefusesABadClusterName(t *testing.T) {
	w := newWriter(t, Options{Repo: newRepo(t, t.TempDir()), Interval: time.Hour})
	for _, n := range []string{"", "a/b", ".."} {
		if err := w.SetCluster(ClusterStatus{Name: n}, origin); err == nil {
			t.Errorf("SetCluster(%q) = nil, want an error", n)
		}
	}
}

// The Writer keeps a cluster's creation time and since when each
// condition holds: unchanged while the condition's status stays, moved when
// it flips, kept across a restart (read back from the branch).
func TestWriterKeepsCreatedAndConditionTimes(t *testing.T) {
	repo := newRepo(t, t.TempDir())
	clock := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	opts := Options{Repo: repo, Interval: time.Hour, Now: func() time.Time { return clock }}
	w := newWriter(t, opts)
	bare := func(ready string) ClusterStatus {
		c := cluster("dev-1", 2, "Running")
		c.Created = time.Time{}
		c.Conditions = []Condition{{Type: ConditionReady, Status: ready}, {Type: "RollingOut", Status: ConditionTrue}}
		return c
	}
	set := func(w *Writer, at string, ready string) *ClusterStatus {
		t.Helper()
		clock, _ = time.Parse(time.RFC3339, "2026-11-20T"+at+"Z")
		if err := w.SetCluster(bare(ready), origin); err != nil {
			t.Fatal(err)
		}
		flush(t, w)
		snap, err := Read(repo, branch)
		if err != nil {
			t.Fatal(err)
		}
		return snap.Cluster("dev-1")
	}
	since := func(c *ClusterStatus, typ string) string {
		for _, cd := range c.Conditions {
			if cd.Type == typ {
				return cd.LastTransitionTime.Format("15:04:05")
			}
		}
		return "none"
	}
	c := set(w, "09:00:00", ConditionFalse)
	if c.Created.Format("15:04") != "09:00" || since(c, ConditionReady) != "09:00:00" {
		t.Fatalf("first write: created %v, Ready since %s", c.Created, since(c, ConditionReady))
	}
	c = set(w, "09:05:00", ConditionTrue)
	if c.Created.Format("15:04") != "09:00" || since(c, ConditionReady) != "09:05:00" || since(c, "RollingOut") != "09:00:00" {
		t.Errorf("after Ready flips: created %v, Ready since %s, RollingOut since %s; want 09:00, 09:05:00, 09:00:00",
			c.Created, since(c, ConditionReady), since(c, "RollingOut"))
	}
	w.Close()
	w2 := newWriter(t, opts) // a restarted daemon
	c = set(w2, "10:00:00", ConditionTrue)
	if c.Created.Format("15:04") != "09:00" || since(c, ConditionReady) != "09:05:00" {
		t.Errorf("after a restart: created %v, Ready since %s; want 09:00 and 09:05:00", c.Created, since(c, ConditionReady))
	}
}

// A condition that flips and flips back between two commits shows no
// transition on the branch, and keeps the time the branch has: every
// commit said Ready True, and the time moved with each (a machine
// replaced within a status interval made the cluster not Ready for a
// moment). A flip that is committed moves it, to when it was first set.
func TestWriterKeepsTheTimeOfAFlipNeverCommitted(t *testing.T) {
	repo := newRepo(t, t.TempDir())
	clock := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	w := newWriter(t, Options{Repo: repo, Interval: time.Hour, Now: func() time.Time { return clock }})
	set := func(at, ready string) {
		t.Helper()
		clock, _ = time.Parse(time.RFC3339, "2026-11-20T"+at+"Z")
		c := cluster("dev-1", 2, "Running")
		c.Conditions = []Condition{{Type: ConditionReady, Status: ready}}
		if err := w.SetCluster(c, origin); err != nil {
			t.Fatal(err)
		}
	}
	readySince := func() string {
		t.Helper()
		flush(t, w)
		snap, err := Read(repo, branch)
		if err != nil {
			t.Fatal(err)
		}
		cd := snap.Cluster("dev-1").Conditions[0]
		return cd.Status + " since " + cd.LastTransitionTime.Format("15:04:05")
	}
	set("09:00:00", ConditionTrue)
	if got := readySince(); got != "True since 09:00:00" {
		t.Fatalf("first commit: Ready %s", got)
	}
	set("09:01:00", ConditionFalse)
	set("09:01:02", ConditionTrue)
	if got := readySince(); got != "True since 09:00:00" {
		t.Errorf("after a flip and back between two commits: Ready %s, want True since 09:00:00 as committed", got)
	}
	set("09:02:00", ConditionFalse)
	set("09:02:05", ConditionFalse)
	if got := readySince(); got != "False since 09:02:00" {
		t.Errorf("after a flip committed: Ready %s, want False since 09:02:00", got)
	}
	set("09:03:00", ConditionTrue)
	set("09:03:01", ConditionFalse)
	set("09:03:02", ConditionTrue)
	if got := readySince(); got != "True since 09:03:02" {
		t.Errorf("after flips that end True: Ready %s, want True since 09:03:02", got)
	}
}

// With Refresh set, a quiet fleet's status is rewritten (fleet.yaml's
// refreshedAt) so its age says whether the daemon runs; a change in the
// meantime postpones it, and the caller's SetFleet keeps the stamp.
func TestWriterRefreshesAQuietStatus(t *testing.T) {
	repo := newRepo(t, t.TempDir())
	var mu sync.Mutex
	clock := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	w := newWriter(t, Options{Repo: repo, Interval: 10 * time.Millisecond, Refresh: 40 * time.Millisecond, Now: now})
	w.SetFleet(FleetStatus{LastApplied: &SourceCommit{Commit: origin.SourceCommit}}, origin)
	flush(t, w)
	mu.Lock()
	clock = clock.Add(time.Hour)
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		snap, err := Read(repo, branch)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Fleet.RefreshedAt.Equal(clock) {
			if snap.Fleet.LastApplied == nil {
				t.Error("the refresh lost lastApplied")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refreshedAt = %v, want %v", snap.Fleet.RefreshedAt, clock)
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.SetFleet(FleetStatus{LastApplied: &SourceCommit{Commit: origin.SourceCommit, Subject: "next"}}, origin)
	flush(t, w)
	snap, err := Read(repo, branch)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Fleet.RefreshedAt.Equal(clock) || snap.Fleet.LastApplied.Subject != "next" {
		t.Errorf("after the caller's SetFleet: refreshedAt %v, lastApplied %+v; want the stamp kept and the new subject", snap.Fleet.RefreshedAt, snap.Fleet.LastApplied)
	}
}

// TestWriterEncodesWhenItCommits: a cluster's status is encoded when the
// Writer commits, so what was set last before a commit is what the commit
// holds, and a removal after a set not yet encoded still removes the file
// (or, for a cluster never written, leaves nothing to commit).
func TestWriterEncodesWhenItCommits(t *testing.T) {
	dir := t.TempDir()
	w := newWriter(t, Options{Repo: newRepo(t, dir), Interval: time.Hour})
	w.SetCluster(cluster("dev-1", 1, "Provisioning"), origin)
	w.SetCluster(cluster("dev-1", 2, "Provisioning"), origin)
	w.SetCluster(cluster("dev-1", 3, "Running"), origin)
	flush(t, w)
	if got := gitCLI(t, dir, "show", branch+":clusters/dev-1.yaml"); !strings.Contains(got, "phase: Running") || strings.Count(got, "- name: dev-1-") != 4 {
		t.Errorf("the commit holds not the last status set:\n%s", got)
	}
	w.SetCluster(cluster("dev-1", 3, "Deleting"), origin)
	if err := w.DeleteCluster("dev-1", origin); err != nil {
		t.Fatal(err)
	}
	w.SetCluster(cluster("dev-2", 1, "Provisioning"), origin)
	if err := w.DeleteCluster("dev-2", origin); err != nil {
		t.Fatal(err)
	}
	flush(t, w)
	if files := gitCLI(t, dir, "ls-tree", "-r", "--name-only", branch); files != "fleet.yaml" {
		t.Errorf("files after the removals: %q, want fleet.yaml alone", files)
	}
	if n := commitCount(t, dir, branch); n != 2 {
		t.Errorf("%d commits, want 2", n)
	}
}

// TestWriterSummaryCache: a restarted Writer with a summary cache reads
// only the status files that changed since the cache was written (the
// files the last run wrote or read are in it), and keeps the same counts,
// creation and condition times as one that reads them all; a cache of
// another build is not trusted.
func TestWriterSummaryCache(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	opts := Options{Repo: repo, Interval: time.Hour, SumCache: filepath.Join(t.TempDir(), "status-sums")}
	w := newWriter(t, opts)
	ready := cluster("dev-1", 2, "Running")
	ready.Conditions = append(ready.Conditions, Condition{Type: "RollingOut", Status: ConditionTrue, LastTransitionTime: created})
	w.SetCluster(ready, origin)
	w.SetCluster(cluster("prod-1", 3, "Provisioning"), origin)
	flush(t, w)
	w.Close()
	// restart reads the branch with a Writer and returns how many files it
	// read, and fleet.yaml and dev-1's file after dev-1's Ready turns True.
	restart := func() (int, string, string) {
		t.Helper()
		w := newWriter(t, opts)
		if err := w.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		read := w.Stats().FilesRead
		c := ready
		c.Conditions = []Condition{{Type: ConditionReady, Status: ConditionTrue, Reason: "Ready"}, {Type: "RollingOut", Status: ConditionTrue}}
		w.SetCluster(c, origin)
		flush(t, w)
		fleet, dev := gitCLI(t, dir, "show", branch+":fleet.yaml"), gitCLI(t, dir, "show", branch+":clusters/dev-1.yaml")
		w.Close()
		gitCLI(t, dir, "update-ref", "refs/heads/"+branch, branch+"~1") // as it was
		return read, fleet, dev
	}
	// The first Writer wrote both clusters' files: it kept their
	// summaries, so the first restart reads fleet.yaml alone.
	read0, fleet0, dev0 := restart()
	if read0 != 1 {
		t.Errorf("first restart read %d files, want 1 (fleet.yaml; the summaries of the files the last run wrote are cached)", read0)
	}
	if err := os.Remove(opts.SumCache); err != nil {
		t.Fatal(err)
	}
	read, fleet, dev := restart()
	if read != 3 {
		t.Errorf("restart without a cache read %d files, want 3", read)
	}
	if !strings.Contains(dev, "lastTransitionTime: 2026-11-20T09:00:00Z") || !strings.Contains(fleet, "clusters: 2") {
		t.Fatalf("restart without a cache: RollingOut's time or the counts lost:\n%s\n%s", dev, fleet)
	}
	if fleet0 != fleet || dev0 != dev {
		t.Errorf("with the summaries of written files, fleet.yaml or dev-1's status differ:\n%s\n%s\nwant:\n%s\n%s", fleet0, dev0, fleet, dev)
	}
	read2, fleet2, dev2 := restart()
	if read2 != 1 {
		t.Errorf("second restart read %d files, want 1 (fleet.yaml; the clusters' summaries are cached)", read2)
	}
	if fleet2 != fleet || dev2 != dev {
		t.Errorf("with the cache, fleet.yaml or dev-1's status differ:\n%s\n%s\nwant:\n%s\n%s", fleet2, dev2, fleet, dev)
	}
	data, err := os.ReadFile(opts.SumCache)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(opts.SumCache); fi.Mode().Perm() != 0o600 {
		t.Errorf("summary cache mode %v, want 0600", fi.Mode().Perm())
	}
	// Every entry, of a file read or written, is what reading it gives.
	var f sumFile
	if _, body, ok := strings.Cut(string(data), "\n"); !ok || json.Unmarshal([]byte(body), &f) != nil {
		t.Fatalf("summary cache does not decode:\n%s", data)
	}
	if len(f.Sums) < 3 {
		t.Errorf("summary cache holds %d files, want both clusters' and dev-1's earlier one", len(f.Sums))
	}
	for h, j := range f.Sums {
		c, err := DecodeCluster([]byte(gitCLI(t, dir, "cat-file", "blob", h)))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := sumText(sumFromJSON(j)), sumText(summarize(c)); got != want {
			t.Errorf("cached summary of %s:\n%s\nwant (read from the file)\n%s", h, got, want)
		}
	}
	if err := os.WriteFile(opts.SumCache, []byte(strings.Replace(string(data), sumCacheMagic, sumCacheMagic+"0", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if read, _, _ := restart(); read != 3 {
		t.Errorf("with a cache of another build: read %d files, want 3", read)
	}
}

// TestWriterDamagedSummaryCache: a summary cache whose numbers were
// changed on disk, still valid JSON, is not trusted: the restarted Writer
// reads every status file from the branch, and fleet.yaml counts the
// machines the files hold, not the changed numbers.
func TestWriterDamagedSummaryCache(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	opts := Options{Repo: repo, Interval: time.Hour, SumCache: filepath.Join(t.TempDir(), "status-sums")}
	w := newWriter(t, opts)
	w.SetCluster(cluster("dev-1", 2, "Running"), origin)
	w.SetCluster(cluster("prod-1", 3, "Running"), origin)
	flush(t, w)
	w.Close()
	want := gitCLI(t, dir, "show", branch+":fleet.yaml")
	data, err := os.ReadFile(opts.SumCache)
	if err != nil {
		t.Fatal(err)
	}
	damaged := strings.ReplaceAll(string(data), `"machines":4`, `"machines":9`)
	if damaged == string(data) {
		t.Fatalf("prod-1's machine count not found in the summary cache:\n%s", data)
	}
	if err := os.WriteFile(opts.SumCache, []byte(damaged), 0o600); err != nil {
		t.Fatal(err)
	}
	w = newWriter(t, opts)
	if err := w.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	if read := w.Stats().FilesRead; read != 3 {
		t.Errorf("with a damaged summary cache: read %d files, want 3 (every file on the branch)", read)
	}
	// dev-1 scaled to three workers makes the Writer write fleet.yaml
	// again from its summaries: 4 machines of dev-1's and prod-1's 4, as
	// its file holds.
	w.SetCluster(cluster("dev-1", 3, "Running"), origin)
	flush(t, w)
	got := gitCLI(t, dir, "show", branch+":fleet.yaml")
	if got == want {
		t.Fatal("fleet.yaml was not written again")
	}
	if line := machinesLine(t, got); line != "machines: 8" {
		t.Errorf("fleet.yaml after a restart with a damaged summary cache: %q, want \"machines: 8\":\n%s", line, got)
	}
}

// machinesLine is fleet.yaml's machine count line.
func machinesLine(t *testing.T, fleet string) string {
	t.Helper()
	for l := range strings.Lines(fleet) {
		if strings.HasPrefix(strings.TrimSpace(l), "machines:") {
			return strings.TrimSpace(l)
		}
	}
	t.Fatalf("fleet.yaml has no machines count:\n%s", fleet)
	return ""
}

// TestMadeFromHoldsAcrossRestarts: a cluster set from a key answers
// MadeFrom for that key only, in the Writer that set it and, through the
// summary cache, in the next one — also when the status encoded to the
// file already on the branch and nothing was written. A file someone else
// changed since answers for no key, nor does a key of 0.
func TestMadeFromHoldsAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	opts := Options{Repo: repo, Interval: time.Hour, SumCache: filepath.Join(t.TempDir(), "status-sums")}
	start := func() *Writer {
		t.Helper()
		w := newWriter(t, opts)
		if err := w.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		return w
	}
	dev, prod := cluster("dev-1", 2, "Running"), cluster("prod-1", 3, "Running")
	w := start()
	if w.MadeFrom("dev-1", 7) {
		t.Error("a cluster never set answers MadeFrom")
	}
	w.SetClusterFrom(dev, 7, origin)
	w.SetCluster(prod, origin)
	if !w.MadeFrom("dev-1", 7) || w.MadeFrom("dev-1", 8) || w.MadeFrom("prod-1", 0) {
		t.Error("before the commit: MadeFrom does not answer for the key set, or answers for another")
	}
	flush(t, w)
	w.Close()

	w = start()
	if !w.MadeFrom("dev-1", 7) {
		t.Error("after a restart: dev-1's key forgotten")
	}
	if w.MadeFrom("dev-1", 8) || w.MadeFrom("prod-1", 0) {
		t.Error("after a restart: MadeFrom answers for a key never set")
	}
	// prod-1 set again from a key, encoding to the file it has: nothing
	// is written, and the key is kept all the same.
	commits := commitCount(t, dir, branch)
	w.SetClusterFrom(prod, 9, origin)
	flush(t, w)
	if n := commitCount(t, dir, branch); n != commits {
		t.Fatalf("a status that encodes to the file on the branch was committed (%d commits, want %d)", n, commits)
	}
	w.Close()
	w = start()
	if !w.MadeFrom("prod-1", 9) || !w.MadeFrom("dev-1", 7) {
		t.Error("after a restart: the key of a status that changed no file was not kept")
	}
	w.Close()

	// Someone else rewrites dev-1's file: no key stands for it.
	other := dev
	other.Phase = ClusterDeleting
	data, err := EncodeCluster(other)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	gitCLI(t, work, "clone", "-q", "-b", branch, dir, ".")
	if err := os.WriteFile(filepath.Join(work, "clusters", "dev-1.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, work, "commit", "-q", "-am", "by hand")
	gitCLI(t, work, "push", "-q", "origin", branch)
	w = start()
	if w.MadeFrom("dev-1", 7) {
		t.Error("a file someone else changed answers MadeFrom for the key the Writer set before")
	}
	if !w.MadeFrom("prod-1", 9) {
		t.Error("prod-1's key lost when dev-1's file changed")
	}
}

// TestWriterGoesOnAfterGitGC: `git gc` run on the daemon's repository
// while the writer runs (docs/operations.md advises it for large fleets)
// packs the trees and blobs the writer keeps by hash and removes their
// loose files; the writer's next commits build on them all the same, and
// the branch is sound.
func TestWriterGoesOnAfterGitGC(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	w := newWriter(t, Options{Repo: repo, Interval: time.Hour})
	n := packMin + 6 // the first commit is a pack, which git gc repacks and removes
	for i := range n {
		w.SetCluster(cluster(fmt.Sprintf("c%02d", i), 3, "Running"), origin)
	}
	flush(t, w)
	if w.Stats().Packs != 1 {
		t.Fatalf("%d packs written, want the first commit's", w.Stats().Packs)
	}
	for round := range 3 {
		gitCLI(t, dir, "gc", "-q", "--prune=now")
		if loose := gitCLI(t, dir, "count-objects"); !strings.HasPrefix(loose, "0 objects") {
			t.Fatalf("round %d: git gc left loose objects: %s", round, loose)
		}
		// An unchanged cluster, a changed one, a new one and a removed one.
		w.SetCluster(cluster("c00", 3, "Running"), origin)
		w.SetCluster(cluster(fmt.Sprintf("c%02d", 1+round), 4, "Provisioning"), origin)
		w.SetCluster(cluster(fmt.Sprintf("n%02d", round), 2, "Provisioning"), origin)
		w.DeleteCluster(fmt.Sprintf("c%02d", 20+round), origin)
		flush(t, w)
		if got := gitCLI(t, dir, "show", branch+":"+ClusterPath(fmt.Sprintf("c%02d", 1+round))); !strings.Contains(got, "phase: Provisioning") {
			t.Errorf("round %d: the changed cluster's file after git gc:\n%s", round, got)
		}
		files := strings.Fields(gitCLI(t, dir, "ls-tree", "--name-only", branch+":"+ClustersDir))
		if len(files) != n { // one new, one removed each round
			t.Errorf("round %d: %d cluster files, want %d", round, len(files), n)
		}
	}
	// A large commit again: its pack is merged with the first one, which
	// git gc has merged into its own and removed.
	for i := range n {
		w.SetCluster(cluster(fmt.Sprintf("c%02d", i), 5, "Deleting"), origin)
	}
	flush(t, w)
	if w.Stats().Packs != 2 {
		t.Errorf("%d packs written, want 2", w.Stats().Packs)
	}
	if got := gitCLI(t, dir, "show", branch+":"+ClusterPath("c05")); !strings.Contains(got, "phase: Deleting") {
		t.Errorf("c05 after the second large commit:\n%s", got)
	}
	gitCLI(t, dir, "fsck", "--strict", "--no-dangling")
	if n := commitCount(t, dir, branch); n != 5 {
		t.Errorf("%d status commits, want 5", n)
	}
}

// TestWriterReadsNoObjectOnceItWrote: once the Writer has committed, its
// next commits build on what it remembers (the tip's tree and the trees
// it wrote) and read no object from the store: every object read stays
// in go-git's cache, which would grow with a daemon's status commits.
func TestWriterReadsNoObjectOnceItWrote(t *testing.T) {
	dir := t.TempDir()
	newRepo(t, dir)
	reads := &countingCache{Object: cache.NewObjectLRU(objectCacheSize)}
	repo, err := git.Open(filesystem.NewStorage(osfs.New(filepath.Join(dir, ".git")), reads), nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, Options{Repo: repo, Interval: time.Hour})
	for i := range 20 {
		w.SetCluster(cluster(fmt.Sprintf("c%02d", i), 3, "Running"), origin)
	}
	flush(t, w)
	before := reads.puts.Load()
	for round := range 10 {
		w.SetCluster(cluster(fmt.Sprintf("c%02d", round), 4, "Provisioning"), origin)
		w.SetCluster(cluster(fmt.Sprintf("n%02d", round), 2, "Provisioning"), origin)
		w.DeleteCluster(fmt.Sprintf("c%02d", 10+round), origin)
		flush(t, w)
	}
	if n := reads.puts.Load() - before; n != 0 {
		t.Errorf("10 status commits read %d objects from the store, want none", n)
	}
	if n := commitCount(t, dir, branch); n != 11 {
		t.Fatalf("%d status commits, want 11", n)
	}
	if got := gitCLI(t, dir, "show", branch+":"+ClusterPath("c09")); !strings.Contains(got, "phase: Provisioning") {
		t.Errorf("the last round's changed cluster:\n%s", got)
	}
	if files := strings.Fields(gitCLI(t, dir, "ls-tree", "--name-only", branch+":"+ClustersDir)); len(files) != 20 {
		t.Errorf("%d cluster files, want 20 (ten added, ten removed)", len(files))
	}
	gitCLI(t, dir, "fsck", "--strict", "--no-dangling")
}

// countingCache counts the objects go-git puts in its cache: each one it
// read from the store.
type countingCache struct {
	cache.Object
	puts atomic.Int64
}

func (c *countingCache) Put(o plumbing.EncodedObject) {
	c.puts.Add(1)
	c.Object.Put(o)
}

// TestFleetConditionsOf: a fleet condition concerns a cluster when it
// names the cluster or one of its machines as a whole word, or, False,
// names a provider its machines use; dev-10 and provider local-2 are other
// names.
func TestFleetConditionsOf(t *testing.T) {
	s := &Snapshot{Clusters: []ClusterStatus{cluster("dev-1", 1, "Running")}}
	conds := []Condition{
		{Type: "A", Status: ConditionFalse, Message: "bootstrap: no CA: cluster dev-10 has no CA"},
		{Type: "B", Status: ConditionFalse, Message: "provider inmemory-2: no worker answered"},
		{Type: "C", Status: ConditionTrue, Message: "provider inmemory: all answered"},
		{Type: "D", Status: ConditionFalse, Message: "bootstrap: machine dev-1-cp-a1b2c: no CA"},
		{Type: "E", Status: ConditionFalse, Message: "cluster dev-1: no CA"},
		{Type: "F", Status: ConditionFalse, Message: "provider inmemory: no worker answered"},
	}
	for _, c := range conds {
		s.Fleet.Conditions = append(s.Fleet.Conditions, FleetCondition{Condition: c})
	}
	var got []string
	for _, c := range s.FleetConditionsOf("dev-1") {
		got = append(got, c.Type)
	}
	if strings.Join(got, ",") != "D,E,F" {
		t.Errorf("conditions concerning dev-1: %v, want D, E, F", got)
	}
	if s.FleetConditionsOf("prod-1") != nil {
		t.Error("a cluster with no status is concerned by conditions")
	}
}

// TestFleetConditionsOfRecorded: a condition of fleet.yaml that records the
// clusters or providers it concerns is matched by them alone, whatever its
// message names: a bootstrap error recorded for dev-1 that names no
// cluster concerns dev-1; one recorded for prod-1 that names dev-1's
// machine does not; a provider recorded concerns every cluster with a
// machine of it, and one not recorded none, though its message names it.
// A condition that records neither, as fleet.yaml had them before, is
// still matched by its message.
func TestFleetConditionsOfRecorded(t *testing.T) {
	f, err := DecodeFleet([]byte(`conditions:
  - type: A
    status: "False"
    message: "bootstrap: the cluster's trust material, endpoint and the machine's token are required"
    clusters: [dev-1]
  - type: B
    status: "False"
    message: 'bootstrap: machine dev-1-cp-a1b2c: no CA'
    clusters: [prod-1]
  - type: C
    status: "False"
    message: 'the machines store was empty: no plan until the inventory of provider inmemory is in'
    providers: [docker]
  - type: D
    status: "False"
    message: 'provider local: no worker answered 1 task'
    providers: [docker, inmemory]
  - type: E
    status: "False"
    message: 'cluster dev-1: no CA'
`))
	if err != nil {
		t.Fatal(err)
	}
	s := &Snapshot{Fleet: f, Clusters: []ClusterStatus{cluster("dev-1", 1, "Running"), cluster("prod-1", 1, "Running")}}
	for name, want := range map[string]string{"dev-1": "A,D,E", "prod-1": "B,D"} {
		var got []string
		for _, c := range s.FleetConditionsOf(name) {
			got = append(got, c.Type)
		}
		if strings.Join(got, ",") != want {
			t.Errorf("conditions concerning %s: %v, want %s", name, got, want)
		}
	}
}
