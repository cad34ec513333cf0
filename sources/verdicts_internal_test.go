package sources

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/fixtures"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/schemas"
)

// commitInitFleet commits the init fleet to a new repository on main and
// returns it with the files.
func commitInitFleet(t *testing.T) (*gittest.Repo, map[string]string) {
	t.Helper()
	files, err := fixtures.Overlay(os.DirFS(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	init := map[string]string{}
	for p, data := range files {
		init[p] = string(data)
	}
	work := gittest.NewRepo(t)
	work.Commit("init", init)
	return work, init
}

// writeInitFleet writes the init fleet to a new folder.
func writeInitFleet(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files, err := fixtures.Overlay(os.DirFS(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	for p, data := range files {
		writeFile(t, dir, p, string(data))
	}
	return dir
}

func writeFile(t *testing.T, dir, p, data string) {
	t.Helper()
	dst := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVerdictFile: a second run finds every verdict of the first (it learns
// nothing new and writes nothing); a changed policy is evaluated again and
// its violation found; the file is the user's alone.
func TestVerdictFile(t *testing.T) {
	ctx := context.Background()
	dir := writeInitFleet(t)
	cache := filepath.Join(t.TempDir(), "c", "validation")
	if _, errs, err := ValidateDir(ctx, dir, ValidateOptions{CacheFile: cache}); err != nil || len(errs) > 0 {
		t.Fatalf("first run: %v %v", errs, err)
	}
	fi, err := os.Stat(cache)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("cache file mode %v, want 0600", fi.Mode().Perm())
	}
	v := loadVerdicts(cache)
	// One per YAML file (gitfleet.yaml, the class, two clusters): each
	// passed the schemas and the policies; one per cluster, whose own
	// checks with its class passed, one for the class's own checks and
	// one for the policy file, which compiled.
	if len(v.m) != 8 {
		t.Errorf("%d verdicts stored, want one per file, one per cluster, one for the class and one for the policy", len(v.m))
	}

	// Warm: everything known, nothing added.
	known := loadVerdicts(cache)
	snapBefore, _ := os.ReadFile(cache)
	validateWith(t, dir, known)
	if known.added != 0 {
		t.Errorf("warm run learnt %d new verdicts, want 0 (all known)", known.added)
	}
	if after, _ := os.ReadFile(cache); string(after) != string(snapBefore) {
		t.Error("a warm run rewrote the cache file")
	}

	// A stricter policy: the clusters are evaluated again.
	writeFile(t, dir, "policies/prod.cue", "Cluster: spec: topology: controlPlane: replicas: 5\n")
	_, errs, err := ValidateDir(ctx, dir, ValidateOptions{CacheFile: cache})
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 2 || !strings.Contains(errs.Error(), "dev-1.yaml") || !strings.Contains(errs.Error(), "prod-1.yaml") {
		t.Errorf("changed policy: errors %v, want both clusters'", errs)
	}
}

// TestWarmCacheFindsClusterErrors: a cluster whose checks passed with its
// class is checked again when the class changes, and when it changes
// itself; a warm cache never hides an error the cold run finds.
func TestWarmCacheFindsClusterErrors(t *testing.T) {
	ctx := context.Background()
	dir := writeInitFleet(t)
	cache := filepath.Join(t.TempDir(), "validation")
	classFile := filepath.Join(dir, "classes", "standard.yaml")
	class, err := os.ReadFile(classFile)
	if err != nil {
		t.Fatal(err)
	}
	clusterFile := filepath.Join(dir, "clusters", "dev-1.yaml")
	cluster, err := os.ReadFile(clusterFile)
	if err != nil {
		t.Fatal(err)
	}
	setCPUs := func(n string) {
		t.Helper()
		writeFile(t, dir, "clusters/dev-1.yaml", string(cluster)+"    variables:\n      - name: workerCPUs\n        value: "+n+"\n")
	}
	validate := func(what, want string) {
		t.Helper()
		for _, run := range []string{"cold", "warm"} {
			c := cache
			if run == "cold" {
				c = filepath.Join(t.TempDir(), "cold")
			}
			_, errs, err := ValidateDir(ctx, dir, ValidateOptions{CacheFile: c})
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, e := range errs {
				got += fmt.Sprintf("%s:%d %s; ", e.Path, e.Line, e.Field)
			}
			if got != want {
				t.Errorf("%s, %s cache: errors %q (%v), want %q", what, run, got, errs, want)
			}
		}
	}
	setCPUs("8")
	validate("8 CPUs", "")
	if v := loadVerdicts(cache); len(v.m) != 8 {
		t.Fatalf("%d verdicts after the first run, want 8", len(v.m))
	}

	narrow := strings.Replace(string(class), "int & >=1 & <=64", "int & >=1 & <=4", 1)
	if narrow == string(class) {
		t.Fatal("the init class's workerCPUs constraint changed: update this test")
	}
	writeFile(t, dir, "classes/standard.yaml", narrow)
	validate("a class allowing 4", "clusters/dev-1.yaml:26 spec.topology.variables[0].value; ")

	// The class's own checks: its default no longer satisfies its
	// constraint.
	writeFile(t, dir, "classes/standard.yaml", strings.Replace(string(class), "int & >=1 & <=64", "int & >=3 & <=64", 1))
	validate("a class whose default does not fit", "classes/standard.yaml:35 spec.variables[0].default; ")

	writeFile(t, dir, "classes/standard.yaml", string(class))
	validate("the class back", "")
	writeFile(t, dir, "policies/broken.cue", "Cluster: spec: {\n")
	validate("a policy that does not compile", "policies/broken.cue:1 ; ")
	if err := os.Remove(filepath.Join(dir, "policies", "broken.cue")); err != nil {
		t.Fatal(err)
	}
	setCPUs("100")
	validate("100 CPUs", "clusters/dev-1.yaml:26 spec.topology.variables[0].value; ")
}

func validateWith(t *testing.T, dir string, known *verdicts) {
	t.Helper()
	snap, err := dirSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	ins, pre, err := collect(snap, newRenderCache(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rekeyByContent(ins); err != nil {
		t.Fatal(err)
	}
	if _, errs, _, _, err := newParseCache(known).validate(ins, pre, loadAll); err != nil || len(errs) > 0 {
		t.Fatalf("validate: %v %v", errs, err)
	}
}

// TestVerdictFileNotTrusted: a file of another build, a damaged one or one
// cut short is an empty cache, and the next save replaces it.
func TestVerdictFileNotTrusted(t *testing.T) {
	dir := writeInitFleet(t)
	for name, content := range map[string]string{
		"other build": verdictMagic + strings.Repeat("0", 32) + "\n" + strings.Repeat("k", 32),
		"damaged":     "garbage",
		"cut short":   verdictMagic + buildIdentity() + "\n" + strings.Repeat("k", 20),
	} {
		cache := filepath.Join(t.TempDir(), "validation")
		if err := os.WriteFile(cache, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if v := loadVerdicts(cache); len(v.m) != 0 {
			t.Errorf("%s: %d verdicts trusted", name, len(v.m))
		}
		if _, errs, err := ValidateDir(context.Background(), dir, ValidateOptions{CacheFile: cache}); err != nil || len(errs) > 0 {
			t.Fatalf("%s: %v %v", name, errs, err)
		}
		if v := loadVerdicts(cache); len(v.m) != 8 {
			t.Errorf("%s: file not rewritten (%d verdicts)", name, len(v.m))
		}
	}
}

// TestVerdictsBounded: the newest maxVerdicts are kept, and what another
// run saved meanwhile is merged, not lost.
func TestVerdictsBounded(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "validation")
	a, b := loadVerdicts(cache), loadVerdicts(cache)
	ka, kb := a.key("a"), b.key("b")
	a.add(ka)
	b.add(kb)
	if err := a.save(); err != nil {
		t.Fatal(err)
	}
	if err := b.save(); err != nil {
		t.Fatal(err)
	}
	c := loadVerdicts(cache)
	if !c.good(ka) || !c.good(kb) {
		t.Errorf("after two runs saved: a %v, b %v; want both", c.good(ka), c.good(kb))
	}
	for i := range maxVerdicts + 10 {
		c.add(c.key("many", strconv.Itoa(i)))
	}
	if err := c.save(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(cache)
	if err != nil {
		t.Fatal(err)
	}
	if max := int64(len(verdictMagic)+33+maxVerdicts*len(verdictKey{})) + 1; fi.Size() > max {
		t.Errorf("cache file %d bytes, want at most %d", fi.Size(), max)
	}
	if d := loadVerdicts(cache); d.good(ka) {
		t.Error("the oldest verdict survived a full cache")
	}
}

// wait waits for saveEvery's write in progress, if any (Repo.Close's
// stop also keeps another from starting).
func (v *verdicts) wait() { v.wg.Wait() }

// openInitWithCache opens a new repository of the init fleet (its files
// are init) with a validation cache file of its own, not yet written.
func openInitWithCache(t *testing.T) (r *Repo, work *gittest.Repo, init map[string]string, cache string) {
	t.Helper()
	work, init = commitInitFleet(t)
	cache = filepath.Join(t.TempDir(), "validation")
	r, err := Open(context.Background(), Options{Location: work.Dir, CacheFile: cache})
	if err != nil {
		t.Fatal(err)
	}
	return r, work, init, cache
}

// TestRepoVerdictsWrittenAtMostEvery: a repository read revision after
// revision (a daemon's) writes its validation cache at its first
// revision, not again within verdictSaveInterval, and what it learnt
// since when it is closed.
func TestRepoVerdictsWrittenAtMostEvery(t *testing.T) {
	ctx := context.Background()
	r, work, init, cache := openInitWithCache(t)
	entries := func() int {
		t.Helper()
		return len(loadVerdicts(cache).m)
	}
	if rev, err := r.Revision(ctx, "main"); err != nil || rev.Err != nil {
		t.Fatalf("first revision: %v %v", err, rev.Err)
	}
	r.parsed.known.wait() // written in the background
	first := entries()
	if first == 0 {
		t.Fatal("the first revision wrote no verdicts")
	}
	dev := init["clusters/dev-1.yaml"]
	work.Commit("dev-2", map[string]string{"clusters/dev-2.yaml": strings.ReplaceAll(dev, "dev-1", "dev-2")})
	if rev, err := r.Revision(ctx, "main"); err != nil || rev.Err != nil {
		t.Fatalf("second revision: %v %v", err, rev.Err)
	}
	r.parsed.known.wait()
	if n := entries(); n != first {
		t.Errorf("the second revision, within %s of the first, rewrote the cache: %d verdicts, had %d", verdictSaveInterval, n, first)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := entries(); n <= first {
		t.Errorf("closing kept the new file's verdict unwritten: %d verdicts, had %d", n, first)
	}
}

// TestRevisionDoesNotWaitForTheCacheFile: a daemon's revision hands its
// fleet over without waiting for the validation cache to be written (at
// 10,000 clusters that write held up a commit's first task every 30 s),
// and closing the repository waits for that write and finishes it. The
// cache file is a named pipe no one writes to until the revision is
// back, so a revision that waited for it would never return.
func TestRevisionDoesNotWaitForTheCacheFile(t *testing.T) {
	ctx := context.Background()
	r, _, _, cache := openInitWithCache(t)
	if err := syscall.Mkfifo(cache, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		rev, err := r.Revision(ctx, "main")
		if err == nil {
			err = rev.Err
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("revision: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the revision waits for the validation cache to be written")
	}
	// The write reads the file first, to merge what others wrote: give
	// it an empty one.
	w, err := os.OpenFile(cache, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(cache); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("cache file after close: %v %v; want the verdicts written", fi, err)
	}
	if n := len(loadVerdicts(cache).m); n == 0 {
		t.Error("closing left no verdicts in the cache file")
	}
}

// TestSizesRemembered: a file's size is asked once per content; what fits
// is remembered with the verdicts, and what is too large is asked and
// refused every time.
func TestSizesRemembered(t *testing.T) {
	dir := writeInitFleet(t)
	writeFile(t, dir, "clusters/huge.yaml", strings.Repeat("#", MaxFileSize+1)+"\n")
	known := newVerdicts()
	for run := range 2 {
		snap, err := dirSnapshot(dir)
		if err != nil {
			t.Fatal(err)
		}
		asked := map[string]int{}
		for p, e := range snap.files.All() {
			size := e.size
			e.size = func() (int64, []byte, error) { asked[p]++; return size() }
		}
		snap.fits = func(blob string) bool { return known.good(known.key("fits", blob)) }
		snap.fitted = func(blob string) { known.add(known.key("fits", blob)) }
		_, errs, err := collect(snap, newRenderCache(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(errs) != 1 || errs[0].Path != "clusters/huge.yaml" {
			t.Errorf("run %d: errors %v, want clusters/huge.yaml refused", run, errs)
		}
		want := map[string]int{"clusters/huge.yaml": 1}
		if run == 0 {
			for p := range snap.files.All() {
				if p != "README.md" {
					want[p] = 1
				}
			}
		}
		if d := cmp.Diff(want, asked); d != "" {
			t.Errorf("run %d: sizes asked (-want +got):\n%s", run, d)
		}
	}
}

// TestGoodAllIsGood: the batch answer of the clusters' memory is, cluster
// by cluster, what Good answers: from memory, from the verdicts alone (a
// restart's), no for a class it did not pass with, an unknown cluster or
// no key; and, as Good does, it marks the clusters it found as asked by
// this validation, so forget keeps them.
func TestGoodAllIsGood(t *testing.T) {
	known := newVerdicts()
	pc := newParseCache(known)
	first := knownClusters{pc: pc, gen: 1}
	first.Add("in-memory", "class")
	known.add(known.key("check", "verdict-only", "class"))
	keys := []schemas.ClusterKeys{{Cluster: "in-memory", Class: "class"}, {Cluster: "verdict-only", Class: "class"},
		{Cluster: "in-memory", Class: "another class"}, {Cluster: "unknown", Class: "class"}, {}}
	second := knownClusters{pc: pc, gen: 2}
	got := make([]bool, len(keys))
	second.GoodAll(keys, got)
	want := []bool{true, true, false, false, false}
	if !slices.Equal(got, want) {
		t.Fatalf("GoodAll says %v, want %v", got, want)
	}
	for i, k := range keys[:4] {
		if g := (knownClusters{pc: pc, gen: 2}).Good(k.Cluster, k.Class); g != want[i] {
			t.Errorf("Good(%q, %q) = %v, GoodAll %v", k.Cluster, k.Class, g, want[i])
		}
	}
	second.forget()
	if pc.clusters["in-memory"] == nil || pc.clusters["verdict-only"] == nil {
		t.Errorf("forget dropped a cluster GoodAll found good: %v", pc.clusters)
	}
}

// TestVerdictLearntDuringAWriteIsWrittenNext: an entry added while a save
// is under way (here: while it reads the file to keep what others wrote)
// is still owed to the file, so the next save writes it, as closing the
// repository does.
func TestVerdictLearntDuringAWriteIsWrittenNext(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "validation")
	v := loadVerdicts(cache)
	before, during := v.key("before"), v.key("during")
	v.add(before)
	if err := syscall.Mkfifo(cache, 0o600); err != nil {
		t.Fatal(err)
	}
	saved := make(chan error, 1)
	go func() { saved <- v.save() }()
	// Opening the pipe to write waits for the save to open it to read.
	w, err := os.OpenFile(cache, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	v.add(during) // the save holds no lock while it reads
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	if err := v.save(); err != nil {
		t.Fatal(err)
	}
	if d := loadVerdicts(cache); !d.good(before) || !d.good(during) {
		t.Errorf("after two saves: the entry from before %v, the one learnt during the first %v; want both", d.good(before), d.good(during))
	}
}

// BenchmarkVerdictsSave: a daemon's background write of a 10,000-cluster
// fleet's verdicts (~20,000 entries, the file holding them already), and
// the longest a lookup made meanwhile (a revision's) waited for it
// (max-lookup-ms).
func BenchmarkVerdictsSave(b *testing.B) {
	cache := filepath.Join(b.TempDir(), "validation")
	v := loadVerdicts(cache)
	for i := range 20000 {
		v.add(v.key("file", strconv.Itoa(i)))
	}
	if err := v.save(); err != nil {
		b.Fatal(err)
	}
	k := v.key("file", "1")
	stop := make(chan struct{})
	longest := make(chan time.Duration)
	go func() {
		var most time.Duration
		for {
			select {
			case <-stop:
				longest <- most
				return
			default:
			}
			start := time.Now()
			v.good(k)
			most = max(most, time.Since(start))
			time.Sleep(50 * time.Microsecond)
		}
	}()
	i := 0
	for b.Loop() {
		i++
		v.add(v.key("new", strconv.Itoa(i)))
		if err := v.save(); err != nil {
			b.Fatal(err)
		}
	}
	close(stop)
	b.ReportMetric(float64(<-longest)/1e6, "max-lookup-ms")
}
