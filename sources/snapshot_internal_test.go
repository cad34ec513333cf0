package sources

import (
	"context"
	"testing"
	"unsafe"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// TestBlobReadAfterGitGC: git gc packs and prunes the loose objects between
// the listing of a tree and the reading of its files (a 10,000-file commit
// sets off git gc --auto in the background); the read finds them in the
// new pack.
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
		if data, err := snap.readFile(p); err != nil || len(data) != 5 {
			t.Errorf("%s after gc: %q, %v", p, data, err)
		}
	}
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
		if _, _, _, err := r.read(context.Background(), "main", nil); err != nil {
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
	b1, b2 := first.files["d/b.yaml"], second.files["d/b.yaml"]
	if b2.ikey == "" || unsafe.StringData(b1.ikey) != unsafe.StringData(b2.ikey) {
		t.Errorf("the unchanged file got a new entry: %q, %q", b1.ikey, b2.ikey)
	}
	if first.files["a.yaml"].key == second.files["a.yaml"].key {
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
