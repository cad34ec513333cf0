package sources

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// TestObjectCacheSkipsSeenFiles: with KeepObjects, as `gitfleet plan`
// opens a repository, a second run takes every fleet file it has seen from
// the object cache — it still validates the revision when their blobs
// are gone from the repository — and gets the same fleet as the first;
// the file is the user's alone. Without the cache the same run fails.
func TestObjectCacheSkipsSeenFiles(t *testing.T) {
	ctx := context.Background()
	work, init := commitInitFleet(t)
	cache := filepath.Join(t.TempDir(), "validation")
	revision := func(opts Options) (*v1alpha1.Fleet, error) {
		t.Helper()
		r, err := Open(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		rev, err := r.Revision(ctx, "main")
		if err != nil {
			return nil, err
		}
		if rev.Err != nil {
			return nil, rev.Err
		}
		return rev.Fleet, nil
	}
	opts := Options{Location: work.Dir, CacheFile: cache, KeepObjects: true}
	first, err := revision(opts)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(objectCacheFile(cache))
	if err != nil {
		t.Fatalf("no object cache after the first run: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("object cache mode %v, want 0600", fi.Mode().Perm())
	}
	// The clusters' and classes' blobs go; gitfleet.yaml and the policy
	// are read every time (they say what to read and how to check it).
	gone := 0
	for p := range init {
		if !strings.HasSuffix(p, ".yaml") || p == ConfigFile {
			continue
		}
		h := work.Git("rev-parse", "main:"+p)
		if err := os.Remove(filepath.Join(work.Dir, ".git", "objects", h[:2], h[2:])); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		gone++
	}
	if gone < 3 {
		t.Fatalf("only %d blobs removed", gone)
	}
	second, err := revision(opts)
	if err != nil {
		t.Fatalf("second run, the fleet's blobs gone: %v", err)
	}
	if d := cmp.Diff(first, second); d != "" {
		t.Errorf("the fleet from the object cache differs (-parsed +cached):\n%s", d)
	}
	if _, err := revision(Options{Location: work.Dir, CacheFile: cache}); err == nil {
		t.Error("without KeepObjects the run read no blob: the test proves nothing")
	}
}

// TestObjectCacheNotTrusted: a file of another build, a damaged one or one
// cut short is an empty cache; an entry is used only under the policies it
// was kept with.
func TestObjectCacheNotTrusted(t *testing.T) {
	dir := t.TempDir()
	good := loadObjects(filepath.Join(dir, "good"))
	docs := []schemas.KnownDoc{{Kind: "Cluster", Name: "c", Line: 1, Encoded: `{"metadata":{"name":"c"}}`, Lines: schemas.NewLines([]schemas.FieldPos{{Field: "metadata.name", Line: 3, Col: 3}})}}
	good.put("k", "pol", docs)
	if err := good.save(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(good.file)
	if err != nil {
		t.Fatal(err)
	}
	again := loadObjects(good.file)
	if got, ok := again.get("k", "pol"); !ok || cmp.Diff(docs, got) != "" {
		t.Fatalf("kept docs not given back: %v %v", ok, cmp.Diff(docs, got))
	}
	if _, ok := again.get("k", "other policies"); ok {
		t.Error("an entry was used under other policies")
	}
	// A count damaged inside an entry (whose frame is intact) is refused
	// without allocating what it claims.
	huge := appendStr(nil, "k")
	huge = appendStr(huge, "pol")
	huge = binary.AppendUvarint(huge, 1<<30)
	damaged := loadObjects(filepath.Join(dir, "none"))
	damaged.index["k"] = string(huge)
	if _, ok := damaged.get("k", "pol"); ok {
		t.Error("an entry claiming 2^30 documents in a few bytes was used")
	}
	for name, content := range map[string]string{
		"other build": strings.Replace(string(data), buildIdentity(), strings.Repeat("0", len(buildIdentity())), 1),
		"damaged":     "garbage",
		"cut short":   string(data[:len(data)-5]),
	} {
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if c := loadObjects(file); len(c.index) != 0 || c.has("k") {
			t.Errorf("%s: %d entries trusted", name, len(c.index))
		}
	}
}

// TestObjectCacheBounded: the file keeps what this run used or added
// first, then the rest of what is on disk, up to maxObjectBytes; what
// another run saved meanwhile is merged, not lost.
func TestObjectCacheBounded(t *testing.T) {
	defer func(n int) { maxObjectBytes = n }(maxObjectBytes)
	maxObjectBytes = 4 << 10
	file := filepath.Join(t.TempDir(), "objects")
	doc := func(name string) []schemas.KnownDoc {
		return []schemas.KnownDoc{{Kind: "Cluster", Name: name, Line: 1, Encoded: strings.Repeat("x", 200)}}
	}
	a, b := loadObjects(file), loadObjects(file)
	a.put("a", "", doc("a"))
	b.put("b", "", doc("b"))
	if err := a.save(); err != nil {
		t.Fatal(err)
	}
	if err := b.save(); err != nil {
		t.Fatal(err)
	}
	c := loadObjects(file)
	if !c.has("a") || !c.has("b") {
		t.Fatalf("after two runs saved: a %v, b %v; want both", c.has("a"), c.has("b"))
	}
	for i := range 40 {
		c.put(strings.Repeat("n", i+1), "", doc("n"))
	}
	if err := c.save(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > int64(maxObjectBytes) {
		t.Errorf("object cache %d bytes, want at most %d", fi.Size(), maxObjectBytes)
	}
	d := loadObjects(file)
	if !d.has("n") || d.has("a") || d.has("b") {
		t.Errorf("kept the oldest or lost the newest: n %v, a %v, b %v", d.has("n"), d.has("a"), d.has("b"))
	}
}
