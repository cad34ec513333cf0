package sources

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"unsafe"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// TestBlobReadAfterGitGC: git gc packs and prunes the loose objects between
// the listing of a tree and the asking of its files' sizes and contents (a
// 10,000-file commit sets off git gc --auto in the background); both find
// them in the new pack.
func TestBlobReadAfterGitGC(t *testing.T) {
	work := gittest.NewRepo(t)
	work.Commit("one", map[string]string{"a.yaml": "a: 1\n", "b.yaml": "b: 2\n"})
	r, err := Open(context.Background(), Options{Location: work.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, err := r.resolveLocked("main")
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.commitLocked(h)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := c.Tree()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := treeSnapshot(r.storage, tree, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The daemon has looked into the packs before (reading an older
	// revision), so go-git holds their index.
	if _, err := r.storage.EncodedObject(plumbing.AnyObject, plumbing.NewHash("0123456789012345678901234567890123456789")); err == nil {
		t.Fatal("a made-up object was found")
	}
	work.Git("gc", "-q", "--prune=now")
	for _, p := range []string{"a.yaml", "b.yaml"} {
		if n, _, err := snap.file(p).sizeOf(); err != nil || n != 5 {
			t.Errorf("size of %s after gc: %d, %v", p, n, err)
		}
		if data, err := snap.readFile(p); err != nil || len(data) != 5 {
			t.Errorf("%s after gc: %q, %v", p, data, err)
		}
	}
}

// TestFilesOfPackedAndLooseTrees: a packed tree's files are read through
// go-git first, a loose tree's from their loose files first; either finds
// a file wherever it is, with its size: a commit after git gc has a loose
// tree over packed files beside a loose new one.
func TestFilesOfPackedAndLooseTrees(t *testing.T) {
	work := gittest.NewRepo(t)
	want := map[string]string{"a.yaml": "a: 1\n", "d/b.yaml": "b: 22\n"}
	work.Commit("one", want)
	work.Git("gc", "-q", "--prune=now")
	r, err := Open(context.Background(), Options{Location: work.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	check := func(when string) {
		t.Helper()
		if _, _, _, _, _, err := r.read(context.Background(), "main", nil); err != nil {
			t.Fatal(err)
		}
		snap := r.lastTree
		for p, content := range want {
			e := snap.file(p)
			if e == nil {
				t.Fatalf("%s: %s not listed", when, p)
			}
			if n, data, err := e.sizeOf(); err != nil || n != int64(len(content)) || (data != nil && string(data) != content) {
				t.Errorf("%s: size of %s = %d (content %q), %v; want %d", when, p, n, data, err, len(content))
			}
			if data, err := snap.readFile(p); err != nil || string(data) != content {
				t.Errorf("%s: %s = %q, %v; want %q", when, p, data, err, content)
			}
		}
	}
	check("packed")
	want["d/c.yaml"] = "c: 333\n"
	work.Commit("two", map[string]string{"d/c.yaml": want["d/c.yaml"]})
	check("loose over packed")
}

// TestTreeSnapshotReusesUnchangedFiles: reading a commit that changes one
// file after one that did not keeps the unchanged files' entries (no new
// key per file and commit) and gives the changed file its new content.
func TestTreeSnapshotReusesUnchangedFiles(t *testing.T) {
	work := gittest.NewRepo(t)
	work.Commit("one", map[string]string{"a.yaml": "a: 1\n", "d/b.yaml": "b: 2\n"})
	r, err := Open(context.Background(), Options{Location: work.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	snapshotOf := func() *snapshot {
		t.Helper()
		if _, _, _, _, _, err := r.read(context.Background(), "main", nil); err != nil {
			t.Fatal(err)
		}
		return r.lastTree
	}
	first := snapshotOf()
	work.Commit("two", map[string]string{"a.yaml": "a: 3\n"})
	second := snapshotOf()
	if first == second {
		t.Fatal("the second read kept the first snapshot")
	}
	b1, b2 := first.file("d/b.yaml"), second.file("d/b.yaml")
	if b2.ikey == "" || unsafe.StringData(b1.ikey) != unsafe.StringData(b2.ikey) {
		t.Errorf("the unchanged file got a new entry: %q, %q", b1.ikey, b2.ikey)
	}
	if first.file("a.yaml").key == second.file("a.yaml").key {
		t.Error("the changed file kept its old content key")
	}
	for snap, want := range map[*snapshot]string{first: "a: 1\n", second: "a: 3\n"} {
		if data, err := snap.readFile("a.yaml"); err != nil || string(data) != want {
			t.Errorf("a.yaml: %q, %v; want %q", data, err, want)
		}
	}
	if data, err := second.readFile("d/b.yaml"); err != nil || string(data) != "b: 2\n" {
		t.Errorf("d/b.yaml: %q, %v", data, err)
	}
}

// TestTreeSnapshotListsWhatGitHas: over commits that add, change, remove
// and move files in nested folders, with an executable, a symbolic link
// and a folder that comes and goes, each snapshot — read after the one
// before, as the daemon reads, and from nothing — lists exactly the
// regular files go-git's own walk of the commit finds, with their blobs;
// also once git gc has packed every tree.
func TestTreeSnapshotListsWhatGitHas(t *testing.T) {
	work := gittest.NewRepo(t)
	r, err := Open(context.Background(), Options{Location: work.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	steps := []func(){
		func() {
			work.Write(map[string]string{"gitfleet.yaml": "x\n", "a.yaml": "1\n", "a-b.yaml": "2\n", "a/b/c.yaml": "3\n", "a/d.yaml": "4\n", "z/y/x.yaml": "5\n"})
		},
		func() { work.Write(map[string]string{"a/b/c.yaml": "33\n"}) },                // deep change
		func() { work.Write(map[string]string{"z/y/x.yaml": "", "z/w.yaml": "6\n"}) }, // a folder goes
		func() {
			work.Write(map[string]string{"run.sh": "#!/bin/sh\n"})
			if err := os.Chmod(filepath.Join(work.Dir, "run.sh"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("a.yaml", filepath.Join(work.Dir, "link.yaml")); err != nil {
				t.Fatal(err)
			}
		},
		func() { work.Write(map[string]string{"a/d.yaml": "", "a/e/d.yaml": "4\n"}) }, // moved
		func() { work.Write(map[string]string{"z/y/x.yaml": "5\n"}) },                 // and comes back
		func() { work.Git("gc", "-q", "--prune=now") },                                // every tree packed
		func() { work.Write(map[string]string{"a/b/f.yaml": "7\n"}) },
		func() {}, // nothing changes
		func() { work.Write(map[string]string{"a.yaml": "11\n", "a/b/c.yaml": "333\n", "z/w.yaml": "66\n"}) }, // contents alone, three folders
		func() { // a file becomes executable: same name, another kind
			if err := os.Chmod(filepath.Join(work.Dir, "a.yaml"), 0o755); err != nil {
				t.Fatal(err)
			}
		},
		func() { work.Write(map[string]string{"a-b.yaml": "22\n"}) }, // contents alone, after a full listing
	}
	// The steps that change contents alone (or nothing: 6, 8): a snapshot
	// read after the one before shares its list of paths rather than
	// listing them again.
	contentsOnly := map[int]bool{1: true, 6: true, 8: true, 9: true, 11: true}
	var prev *snapshot
	for i, step := range steps {
		step()
		work.Git("add", "-A")
		work.Git("commit", "-q", "--allow-empty", "-m", fmt.Sprint("step ", i))
		c, err := r.commitLocked(plumbing.NewHash(work.Head()))
		if err != nil {
			t.Fatal(err)
		}
		tree, err := c.Tree()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		var wantOrder []string
		walker := object.NewTreeWalker(tree, true, nil)
		for {
			name, e, err := walker.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Mode == filemode.Regular || e.Mode == filemode.Executable {
				want[name] = e.Hash.String()
				wantOrder = append(wantOrder, name)
			}
		}
		walker.Close()
		sort.Strings(wantOrder)
		for _, from := range []*snapshot{prev, nil} {
			snap, err := treeSnapshot(r.storage, tree, from)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			got := map[string]string{}
			for p, e := range snap.files.All() {
				got[p] = e.key
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("step %d (after a snapshot: %v): files (-git +snapshot):\n%s", i, from != nil, diff)
			}
			if !slices.Equal(snap.paths, wantOrder) {
				t.Errorf("step %d: paths %q; want %q", i, snap.paths, wantOrder)
			}
			if shared := from != nil && len(snap.paths) > 0 && &snap.paths[0] == &from.paths[0]; from != nil && shared != contentsOnly[i] {
				t.Errorf("step %d: the snapshot shares the list of paths of the one before: %v, want %v", i, shared, contentsOnly[i])
			}
			for _, p := range snap.paths {
				data, err := snap.readFile(p)
				if err != nil || plumbing.ComputeHash(plumbing.BlobObject, data).String() != want[p] {
					t.Errorf("step %d: %s reads %q, %v", i, p, data, err)
				}
			}
			if from == nil {
				prev = snap
			}
		}
	}
}

// TestGitEntryIsSmall: a daemon keeps an entry for every fleet file, so
// a Git tree's entry is two allocations (itself and its input key, whose
// head is its content key), not five (closures to size and read it, and
// the blob's hash as text twice), and says what it is of.
func TestGitEntryIsSmall(t *testing.T) {
	w := &treeWalk{}
	h := plumbing.NewHash("0123456789abcdef0123456789abcdef01234567")
	var e *entry
	if n := testing.AllocsPerRun(100, func() { e = w.newEntry("clusters/c1.yaml", h, true) }); n > 2 {
		t.Errorf("a Git tree's entry takes %v allocations, want 2", n)
	}
	if e.key != h.String() || e.inputKey("clusters/c1.yaml") != h.String()+" clusters/c1.yaml" || e.blob != h || !e.packed {
		t.Errorf("entry: key %q, input key %q, blob %s, packed %v", e.key, e.inputKey("clusters/c1.yaml"), e.blob, e.packed)
	}
	if unsafe.StringData(e.key) != unsafe.StringData(e.ikey) {
		t.Error("the content key is a string of its own, not the input key's head")
	}
	if n := unsafe.Sizeof(entry{}); n > 112 {
		t.Errorf("an entry is %d bytes: more than the 112 of its size class before it kept its blob's storage", n)
	}
}
