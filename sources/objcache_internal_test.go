package sources

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

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

// TestObjectsOnceServeAStart: with ObjectsOnce, as the daemon opens its
// repository, the cache serves the first revision of a start and is then
// written in the background and let go: the running Repo finds nothing in
// it, reads a later commit's changed file as usual, and its next start
// takes every file it saw at the first from the cache (their blobs gone
// from the repository) and gets the same fleet.
func TestObjectsOnceServeAStart(t *testing.T) {
	ctx := context.Background()
	work, init := commitInitFleet(t)
	cache := filepath.Join(t.TempDir(), "validation")
	opts := Options{Location: work.Dir, CacheFile: cache, ObjectsOnce: true}
	fleetOf := func(r *Repo) *v1alpha1.Fleet {
		t.Helper()
		rev, err := r.Revision(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		if rev.Err != nil {
			t.Fatal(rev.Err)
		}
		return rev.Fleet
	}
	r, err := Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	fleetOf(r)
	// Written without Close: a daemon that is killed keeps it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(objectCacheFile(cache)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first revision's objects not written within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.retiring.Wait()
	if n := len(r.parsed.objects.index); n != 0 {
		t.Errorf("the running Repo still holds %d cache entries", n)
	}
	const edited = "clusters/dev-1.yaml"
	work.Commit("edit", map[string]string{edited: init[edited] + "# edited\n"})
	edits := fleetOf(r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// The blobs of the first commit's clusters and classes go (the edited
	// file's new blob stays: it was read after the cache was let go, so
	// the next start must read it).
	gone := 0
	for p := range init {
		if !strings.HasSuffix(p, ".yaml") || p == ConfigFile {
			continue
		}
		h := work.Git("rev-parse", "main~1:"+p)
		if err := os.Remove(filepath.Join(work.Dir, ".git", "objects", h[:2], h[2:])); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		gone++
	}
	if gone < 3 {
		t.Fatalf("only %d blobs removed", gone)
	}
	r, err = Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if d := cmp.Diff(edits, fleetOf(r)); d != "" {
		t.Errorf("the next start's fleet differs (-before +after):\n%s", d)
	}
	plain, err := Open(ctx, Options{Location: work.Dir, CacheFile: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if rev, err := plain.Revision(ctx, "main"); err == nil && rev.Err == nil {
		t.Error("without ObjectsOnce the start read no blob: the test proves nothing")
	}
}

// TestObjectsOnceShareNothingWithTheFile: the objects an ObjectsOnce cache
// gives (a daemon keeps them for its life) hold no string that is a slice
// of the file's bytes, which would keep all of them; a plan's cache gives
// slices. Every string of the init fleet's class and cluster objects is
// looked at, exported or not.
func TestObjectsOnceShareNothingWithTheFile(t *testing.T) {
	_, init := commitInitFleet(t)
	file := filepath.Join(t.TempDir(), "objects")
	c := loadObjects(file)
	paths := []string{"classes/standard.yaml", "clusters/dev-1.yaml"}
	for _, p := range paths {
		_, docs, errs := schemas.ParseKnownGoodDocs(schemas.File{Path: p, Data: []byte(init[p])})
		if len(errs) > 0 || len(docs) == 0 {
			t.Fatalf("%s: %v (%d docs)", p, errs, len(docs))
		}
		c.put(p, "pol", docs)
	}
	if err := c.save(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, once := range []bool{false, true} {
		c := loadObjects(file)
		c.once = once
		var lo, hi uintptr // the bytes of the file as the cache read it
		for _, e := range c.index {
			at := uintptr(unsafe.Pointer(unsafe.StringData(e)))
			if lo == 0 || at < lo {
				lo = at
			}
			hi = max(hi, at+uintptr(len(e)))
		}
		if hi-lo > uintptr(len(data)) {
			t.Fatalf("the entries span %d bytes, the file has %d: not slices of one string", hi-lo, len(data))
		}
		shared, strs := 0, 0
		for _, p := range paths {
			docs, ok := c.get(p, "pol")
			if !ok {
				t.Fatalf("%s: no entry", p)
			}
			objs, ok := c.decode(p, docs)
			if !ok {
				t.Fatalf("%s: does not decode", p)
			}
			eachString(reflect.ValueOf(objs), func(s string) {
				strs++
				if at := uintptr(unsafe.Pointer(unsafe.StringData(s))); len(s) > 0 && at >= lo && at < hi {
					shared++
				}
			})
		}
		if strs < 20 {
			t.Fatalf("only %d strings looked at", strs)
		}
		if (shared > 0) == once {
			t.Errorf("once %v: %d of %d strings are slices of the file", once, shared, strs)
		}
	}
}

// eachString calls fn with every string v holds, through pointers,
// interfaces, slices, maps and fields, exported or not.
func eachString(v reflect.Value, fn func(string)) {
	switch v.Kind() {
	case reflect.String:
		fn(v.String())
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			eachString(v.Elem(), fn)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			eachString(v.Index(i), fn)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			eachString(it.Key(), fn)
			eachString(it.Value(), fn)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			eachString(v.Field(i), fn)
		}
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

// TestObjectCacheRefusesAChangedByte: a daemon's start takes its first
// revision's objects from the cache file, so a byte of it changed on disk
// (a bad sector, a stray write) must not become another fleet: flipped in
// a replica count, it made a start create machines no commit asked for.
// The file a real validation wrote is changed one bit at a time, at every
// position after its header: each load either gives an entry's objects as
// they were or does not give it.
func TestObjectCacheRefusesAChangedByte(t *testing.T) {
	ctx := context.Background()
	work, _ := commitInitFleet(t)
	cache := filepath.Join(t.TempDir(), "validation")
	r, err := Open(ctx, Options{Location: work.Dir, CacheFile: cache, KeepObjects: true})
	if err != nil {
		t.Fatal(err)
	}
	if rev, err := r.Revision(ctx, "main"); err != nil || rev.Err != nil {
		t.Fatal(err, rev.Err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	file := objectCacheFile(cache)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want, pols := map[string][]schemas.KnownDoc{}, map[string]string{}
	whole := loadObjects(file)
	for key, entry := range whole.index {
		e := reader{s: entry, ok: true}
		e.str()
		pols[key] = e.str()
		docs, ok := whole.get(key, pols[key])
		if !ok {
			t.Fatalf("entry %s not given back from the file as written", key)
		}
		want[key] = docs
	}
	if len(want) < 3 {
		t.Fatalf("only %d entries in the cache", len(want))
	}
	var changed []int
	for i := len(objectMagic) + len(buildIdentity()) + 1; i < len(data); i++ {
		bad := []byte(string(data))
		bad[i] ^= 0x01
		if err := os.WriteFile(file, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		c := loadObjects(file)
		for key, docs := range want {
			if got, ok := c.get(key, pols[key]); ok && !cmp.Equal(docs, got) {
				changed = append(changed, i)
				break
			}
		}
	}
	if len(changed) > 0 {
		t.Errorf("%d of %d one-bit changes of the file gave other objects than were kept (at bytes %v...)",
			len(changed), len(data), changed[:min(len(changed), 10)])
	}
}
