package sources

import (
	"context"
	"testing"

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
	snap, err := treeSnapshot(r.storage, tree)
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
