package status

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDamagedRefStopsTheWriter: a status branch whose ref file was cut to
// nothing (a crash while an older version rewrote it) is not read as "no
// branch": that would start a new history and orphan the old one. The
// writer refuses to start (Ready, and every write, say how to restore it;
// the daemon ends its term on it) and writes nothing.
func TestDamagedRefStopsTheWriter(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	w := newWriter(t, Options{Repo: repo})
	if err := w.SetCluster(cluster("c1", 1, "Running"), Origin{}); err != nil {
		t.Fatal(err)
	}
	flush(t, w)
	w.Close()
	ref := filepath.Join(dir, ".git", "refs", "heads", "gitfleet", "status")
	if err := os.WriteFile(ref, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w2, err := NewWriter(t.Context(), Options{Repo: openRepo(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if err := w2.Ready(t.Context()); err == nil || !strings.Contains(err.Error(), "restore the branch") {
		t.Fatalf("a writer on an empty ref file: %v; want a refusal that says how to restore it", err)
	}
	// Nothing is written over it.
	if err := w2.SetCluster(cluster("c1", 3, "Running"), Origin{}); err == nil || !strings.Contains(err.Error(), "restore the branch") {
		t.Errorf("SetCluster after the refusal: %v", err)
	}
	if err := w2.Flush(t.Context()); err == nil {
		t.Error("Flush after the refusal succeeded")
	}
	if b, err := os.ReadFile(ref); err != nil || len(b) != 0 {
		t.Errorf("the damaged ref was changed: %q %v", b, err)
	}
}

// TestRefWriteIsAtomic: the branch moves by renaming a lock file over the
// ref, so the ref file always holds a whole commit; a lock left by a
// writer that died is taken once it is old, and a fresh one (another
// writer at work) is waited for.
func TestRefWriteIsAtomic(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	w := newWriter(t, Options{Repo: repo})
	if err := w.SetCluster(cluster("c1", 1, "Running"), Origin{}); err != nil {
		t.Fatal(err)
	}
	flush(t, w)
	ref := filepath.Join(dir, ".git", "refs", "heads", "gitfleet", "status")
	lock := ref + ".lock"
	// A writer killed half-way through its lock file, two minutes ago.
	if err := os.WriteFile(lock, []byte("4f2a"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	if err := w.SetCluster(cluster("c1", 2, "Running"), Origin{}); err != nil {
		t.Fatal(err)
	}
	flush(t, w)
	if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stale lock is still there: %v", err)
	}
	data, err := os.ReadFile(ref)
	if err != nil || strings.TrimSpace(string(data)) != gitCLI(t, dir, "rev-parse", "gitfleet/status") || commitCount(t, dir, "gitfleet/status") != 2 {
		t.Fatalf("ref file %q (%v); want the second status commit on top of the first", data, err)
	}
	// A fresh lock: another writer is moving the branch; this one gives
	// up rather than overwrite it.
	if err := os.WriteFile(lock, []byte(""), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := w.SetCluster(cluster("c1", 3, "Running"), Origin{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(t.Context()); err == nil {
		t.Errorf("flushed while another writer held the branch's lock")
	}
	if n := commitCount(t, dir, "gitfleet/status"); n != 2 {
		t.Errorf("%d status commits, want 2: nothing may be written under another's lock", n)
	}
}

// TestDeposedWriterWritesNothing: the lease goes while a flush is under
// way (after it began, before the branch moves): nothing is written.
func TestDeposedWriterWritesNothing(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	leader := true
	w := newWriter(t, Options{Repo: repo, Fence: func() error {
		if !leader {
			return errors.New("lease lost")
		}
		return nil
	}})
	w.beforeCAS = func() { leader = false }
	if err := w.SetCluster(cluster("c1", 1, "Running"), Origin{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(t.Context()); err == nil || !strings.Contains(err.Error(), "lease lost") {
		t.Errorf("Flush of a deposed writer: %v; want it refused", err)
	}
	if n := commitCount(t, dir, "gitfleet/status"); n != 0 {
		t.Errorf("a deposed writer wrote %d status commits", n)
	}
}
