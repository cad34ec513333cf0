package status

import (
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// looseObjects counts the loose object files under a repository's objects
// folder.
func looseObjects(t *testing.T, objects string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(objects, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "pack" || d.Name() == "info") {
			return filepath.SkipDir
		}
		if !d.IsDir() && len(filepath.Base(filepath.Dir(p))) == 2 {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A commit of packMin files or more is one pack and its index, not a
// loose file an object: git finds it sound and whole, go-git reads it
// (a reader that read the repository before the pack was written too),
// and a small commit after it is written loose again.
func TestLargeCommitIsOnePack(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	objects := filepath.Join(dir, ".git", "objects")
	// A reader that has looked in the repository's packs already (for an
	// object nobody has), as a long-running one has.
	reader := openRepo(t, dir)
	if _, err := reader.Storer.EncodedObject(plumbing.AnyObject, plumbing.NewHash(strings.Repeat("ab", 20))); err == nil {
		t.Fatal("found an object nobody wrote")
	}
	w := newWriter(t, Options{Repo: repo, Interval: time.Hour})
	looseBefore := looseObjects(t, objects)
	n := packMin + 6
	for i := range n {
		w.SetCluster(cluster(fmt.Sprintf("c%03d", i), 3, "Running"), origin)
	}
	flush(t, w)

	if got := w.Stats().Packs; got != 1 {
		t.Errorf("%d packs written, want 1", got)
	}
	if got := looseObjects(t, objects); got != looseBefore {
		t.Errorf("%d loose objects after the commit, want %d as before it", got, looseBefore)
	}
	packs, _ := filepath.Glob(filepath.Join(objects, "pack", "pack-*.pack"))
	idxs, _ := filepath.Glob(filepath.Join(objects, "pack", "pack-*.idx"))
	temps, _ := filepath.Glob(filepath.Join(objects, "pack", "tmp_*"))
	if len(packs) != 1 || len(idxs) != 1 || len(temps) != 0 {
		t.Fatalf("pack folder: packs %v, indexes %v, temporary files %v; want one pack and its index", packs, idxs, temps)
	}
	if fi, err := os.Stat(packs[0]); err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("the pack's mode: %v, %v; want read-only, as git leaves it", fi.Mode(), err)
	}
	gitCLI(t, dir, "fsck", "--strict", "--no-dangling")
	verify := gitCLI(t, dir, "verify-pack", "-v", idxs[0])
	// n files, the clusters/ tree, the root tree, fleet.yaml and the commit.
	if want := fmt.Sprintf("non delta: %d objects", n+4); !strings.Contains(verify, want) {
		t.Errorf("git verify-pack: want %q in\n%s", want, verify)
	}
	if files := strings.Fields(gitCLI(t, dir, "ls-tree", "--name-only", branch+":"+ClustersDir)); len(files) != n {
		t.Errorf("git ls-tree: %d cluster files, want %d", len(files), n)
	}
	show := gitCLI(t, dir, "show", branch+":"+ClusterPath("c007"))
	for what, g := range map[string]*git.Repository{"a new reader": openRepo(t, dir), "a reader from before the pack": reader} {
		s, err := Read(g, branch)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(s.Clusters) != n || s.Fleet.Clusters != n {
			t.Errorf("%s: %d clusters, fleet.yaml counts %d; want %d", what, len(s.Clusters), s.Fleet.Clusters, n)
		}
		data, err := EncodeCluster(s.Clusters[7])
		if err != nil || strings.TrimSpace(string(data)) != show {
			t.Errorf("%s: c007 reads\n%s\ngit show:\n%s", what, data, show)
		}
	}

	// One file changed: loose, as before.
	w.SetCluster(cluster("c000", 4, "Provisioning"), origin)
	flush(t, w)
	if got := w.Stats().Packs; got != 1 {
		t.Errorf("%d packs after a one-file commit, want still 1", got)
	}
	if got := looseObjects(t, objects); got <= looseBefore {
		t.Errorf("%d loose objects after a one-file commit, want more than %d", got, looseBefore)
	}
	if got := gitCLI(t, dir, "show", branch+":"+ClusterPath("c000")); !strings.Contains(got, "phase: Provisioning") {
		t.Errorf("c000 after the small commit:\n%s", got)
	}
	gitCLI(t, dir, "fsck", "--strict", "--no-dangling")
}

// The packs a Writer writes are merged as they come, so that however many
// commits were packs, a few packs hold them (a reader loads every pack's
// index): each merge keeps every object of every commit, once.
func TestWriterKeepsItsPacksFew(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	reader := openRepo(t, dir)
	w := newWriter(t, Options{Repo: repo, Interval: time.Hour})
	n := packMin + 6
	const commits = 12
	for round := range commits {
		for i := range n {
			// Every other round as two rounds before: the same blobs,
			// written again into another pack.
			phase := []string{"Running", "Provisioning"}[round%2]
			w.SetCluster(cluster(fmt.Sprintf("c%03d", i), 3, phase), origin)
		}
		flush(t, w)
		packs, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.pack"))
		idxs, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.idx"))
		if max := bits.Len(uint(round+1)) + 1; len(packs) > max || len(idxs) != len(packs) {
			t.Errorf("after %d packed commits: %d packs, %d indexes; want at most %d, each with its index", round+1, len(packs), len(idxs), max)
		}
		s, err := Read(reader, branch)
		if err != nil || len(s.Clusters) != n {
			t.Fatalf("round %d: the reader from the start reads %v clusters, %v", round, len(s.Clusters), err)
		}
	}
	if got := w.Stats().Packs; got != commits {
		t.Errorf("%d commits written as packs, want %d", got, commits)
	}
	gitCLI(t, dir, "fsck", "--strict", "--no-dangling") // every commit's objects are there
	if got := commitCount(t, dir, branch); got != commits {
		t.Errorf("%d status commits, want %d", got, commits)
	}
	// Each object once across the packs: as many packed as there are.
	counts := gitCLI(t, dir, "count-objects", "-v")
	all := strings.Count(gitCLI(t, dir, "cat-file", "--batch-all-objects", "--batch-check"), "\n") + 1
	var loose, inPack int
	for line := range strings.Lines(counts) {
		fmt.Sscanf(line, "count: %d", &loose)
		fmt.Sscanf(line, "in-pack: %d", &inPack)
	}
	if inPack+loose != all {
		t.Errorf("%d objects in packs and %d loose, %d objects in all: an object is in more than one pack\n%s", inPack, loose, all, counts)
	}
	for _, idx := range must(filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.idx"))) {
		gitCLI(t, dir, "verify-pack", idx)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Packs are merged up to packMergeMax: past it they are left as they are
// (git gc's to merge), and nothing is lost.
func TestPacksPastTheMergeBoundStay(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	w := newWriter(t, Options{Repo: repo, Interval: time.Hour})
	n := packMin + 6
	packs := func() []string {
		p, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.pack"))
		return p
	}
	for round := range 6 {
		for i := range n {
			w.SetCluster(cluster(fmt.Sprintf("c%03d", i), 1+round, "Running"), origin)
		}
		flush(t, w)
		if round == 0 {
			fi, err := os.Stat(packs()[0])
			if err != nil {
				t.Fatal(err)
			}
			old := packMergeMax
			packMergeMax = 2*fi.Size() + fi.Size()/2 // two such packs merge; a third does not join them
			t.Cleanup(func() { packMergeMax = old })
		}
	}
	if got := len(packs()); got != 3 {
		t.Errorf("%d packs after 6 commits with a bound of two packs' size, want 3 (each two merged)", got)
	}
	gitCLI(t, dir, "fsck", "--strict", "--no-dangling")
	if got := commitCount(t, dir, branch); got != 6 {
		t.Errorf("%d status commits, want 6", got)
	}
}
