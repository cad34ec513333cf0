package sources_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/sources"
)

func TestRevisionNamesFileAndLineOfABrokenFile(t *testing.T) {
	ctx := context.Background()
	work := gittest.NewRepo(t)
	good := work.Commit("good", map[string]string{"classes/standard.yaml": classYAML, "clusters/a.yaml": cluster("a")})
	bad := work.Commit("broken", map[string]string{"clusters/b.yaml": "apiVersion: gitfleet.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: b\n   bad: [\n"})
	r := open(t, work.Dir)

	rev, err := r.Revision(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	if rev.Rejected() || rev.Fleet == nil || rev.Subject() != "good" || rev.Author != "Ada Tester <ada@example.com>" {
		t.Fatalf("good revision = %+v", rev)
	}
	rev, err = r.Revision(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if rev.Commit != bad || !errors.Is(rev.Err, sources.ErrInvalid) || rev.Fleet != nil {
		t.Fatalf("broken revision: commit %s err %v fleet %v", rev.Commit, rev.Err, rev.Fleet)
	}
	if len(rev.Errors) == 0 || rev.Errors[0].Path != "clusters/b.yaml" || rev.Errors[0].Line == 0 {
		t.Errorf("errors = %v, want one naming clusters/b.yaml and a line", rev.Errors)
	}
}

// TestABrokenClassIsOneError: a revision whose class file does not parse
// is rejected with that file's error alone, saying its clusters' references
// wait for it (not one more error a cluster); a next revision that also
// changes a cluster (the parse cache's patched assembly) says the same.
func TestABrokenClassIsOneError(t *testing.T) {
	ctx := context.Background()
	work := gittest.NewRepo(t)
	work.Commit("good", map[string]string{"classes/standard.yaml": classYAML, "clusters/a.yaml": cluster("a"), "clusters/b.yaml": cluster("b")})
	r := open(t, work.Dir)
	if rev, err := r.Revision(ctx, "main"); err != nil || rev.Rejected() {
		t.Fatalf("good revision: %v %v", err, rev.Errors)
	}
	work.Commit("a tab in the class", map[string]string{"classes/standard.yaml": strings.Replace(classYAML, "\n  ", "\n\t", 1)})
	for _, edit := range []map[string]string{nil, {"clusters/b.yaml": cluster("b") + "# edited\n"}} {
		if edit != nil {
			work.Commit("edit b", edit)
		}
		rev, err := r.Revision(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		if len(rev.Errors) != 1 || rev.Errors[0].Path != "classes/standard.yaml" ||
			!strings.Contains(rev.Errors[0].Message, "2 references to objects not found wait for this file") {
			t.Errorf("errors = %v, want the class file's alone, saying 2 references wait for it", rev.Errors)
		}
	}
}

// TestRevisionTellsItsFileCount: Options.Files hears how many files each
// revision read lists (plan sizes its collector by it): those the fleet's
// paths select, not the repository's.
func TestRevisionTellsItsFileCount(t *testing.T) {
	work := gittest.NewRepo(t)
	work.Commit("fleet", map[string]string{
		"gitfleet.yaml":       "apiVersion: gitfleet.io/v1alpha1\nkind: FleetConfig\nspec:\n  paths: [clusters]\n",
		"clusters/a.yaml":     cluster("a"),
		"clusters/b.yaml":     cluster("b"),
		"docs/readme.yaml":    "not: selected\n",
		"policies/limits.cue": "package policies\n",
	})
	var told []int
	r := open(t, work.Dir, func(o *sources.Options) { o.Files = func(n int) { told = append(told, n) } })
	if _, err := r.Revision(context.Background(), "main"); err != nil {
		t.Fatal(err)
	}
	work.Commit("one more", map[string]string{"clusters/c.yaml": cluster("c")})
	if _, err := r.Revision(context.Background(), "main"); err != nil {
		t.Fatal(err)
	}
	if want := []int{4, 5}; !slices.Equal(told, want) {
		t.Errorf("Files was told %v, want %v (gitfleet.yaml, the clusters, the policy)", told, want)
	}
}

func TestFilesFollowsFleetConfigPaths(t *testing.T) {
	ctx := context.Background()
	work := gittest.NewRepo(t)
	work.Commit("layout", map[string]string{
		"gitfleet.yaml":               "apiVersion: gitfleet.io/v1alpha1\nkind: FleetConfig\nspec:\n  paths: [fleet/clusters, fleet/classes/standard.yaml]\n",
		"fleet/clusters/a.yaml":       cluster("a"),
		"fleet/clusters/notes.txt":    "not yaml",
		"fleet/classes/standard.yaml": "kind: ClusterClass\n",
		"fleet/classes/other.yaml":    "kind: ClusterClass\n",
		"ci/pipeline.yaml":            "steps: []\n",
		".github/workflows/x.yml":     "on: push\n",
		"policies/limits.cue":         "package policies\n",
	})
	r := open(t, work.Dir)
	files, err := r.Files(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gitfleet.yaml", "fleet/clusters/a.yaml", "fleet/classes/standard.yaml", "policies/limits.cue"}
	if got := paths(files); !slices.Equal(got, want) {
		t.Errorf("Files = %v, want %v", got, want)
	}

	// Folders that overlap, and a file named as well as its folder: each
	// file once.
	work.Commit("overlapping paths", map[string]string{"gitfleet.yaml": "apiVersion: gitfleet.io/v1alpha1\nkind: FleetConfig\nspec:\n  paths: [fleet, fleet/clusters, fleet/classes/standard.yaml, gitfleet.yaml]\n"})
	if files, err = r.Files(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	want = []string{"gitfleet.yaml", "fleet/classes/other.yaml", "fleet/classes/standard.yaml", "fleet/clusters/a.yaml", "policies/limits.cue"}
	if got := paths(files); !slices.Equal(got, want) {
		t.Errorf("Files with overlapping paths = %v, want %v", got, want)
	}

	work.Commit("typo in paths", map[string]string{"gitfleet.yaml": "apiVersion: gitfleet.io/v1alpha1\nkind: FleetConfig\nspec:\n  paths: [fleet/clsuters]\n"})
	rev, err := r.Revision(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if !rev.Rejected() || len(rev.Errors) == 0 || !strings.Contains(rev.Errors[0].Error(), "gitfleet.yaml:4:11: spec.paths[0]: \"fleet/clsuters\" matches no YAML file") {
		t.Errorf("errors = %v, want gitfleet.yaml:4:11: spec.paths[0] matches no YAML file", rev.Errors)
	}
}

// TestUpperCaseExtensionsAreRead: clusters/b.YAML and c.Yml are YAML
// files, read like a.yaml, in a revision and in the working tree; they
// were skipped, and their clusters silently did not exist.
func TestUpperCaseExtensionsAreRead(t *testing.T) {
	ctx := context.Background()
	work := gittest.NewRepo(t)
	work.Commit("fleet", map[string]string{"classes/standard.yaml": classYAML,
		"clusters/a.yaml": cluster("a"), "clusters/b.YAML": cluster("b"), "clusters/c.Yml": cluster("c")})
	fromRev, errs, err := sources.ValidateRev(ctx, work.Dir, "main", sources.ValidateOptions{})
	if err != nil || len(errs) > 0 {
		t.Fatalf("ValidateRev: %v %v", err, errs)
	}
	fromDir, errs, err := sources.ValidateDir(ctx, work.Dir, sources.ValidateOptions{})
	if err != nil || len(errs) > 0 {
		t.Fatalf("ValidateDir: %v %v", err, errs)
	}
	for name, fleet := range map[string]*v1alpha1.Fleet{"ValidateRev": fromRev, "ValidateDir": fromDir} {
		var got []string
		for _, c := range fleet.Clusters {
			got = append(got, c.Source.Path)
		}
		slices.Sort(got)
		if want := []string{"clusters/a.yaml", "clusters/b.YAML", "clusters/c.Yml"}; !slices.Equal(got, want) {
			t.Errorf("%s: clusters from %v, want %v", name, got, want)
		}
	}
}

// git gc in a watched working repository repacks objects under the open
// object store; new commits after it are still read.
func TestReadsAfterGitGC(t *testing.T) {
	ctx := context.Background()
	work := gittest.NewRepo(t)
	work.Commit("one", map[string]string{"classes/standard.yaml": classYAML, "clusters/a.yaml": cluster("a")})
	r := open(t, work.Dir)
	if rev, err := r.Revision(ctx, "main"); err != nil || rev.Rejected() {
		t.Fatalf("before gc: %v %v", err, rev.Err)
	}
	for i, name := range []string{"b", "c"} {
		work.Commit("add "+name, map[string]string{"clusters/" + name + ".yaml": cluster(name)})
		work.Git("gc", "-q", "--prune=now")
		rev, err := r.Revision(ctx, "main")
		if err != nil || rev.Rejected() || len(rev.Fleet.Clusters) != i+2 {
			t.Fatalf("after gc %d: %v %v", i+1, err, rev)
		}
	}
}

// TestObjectKeys: an object keeps its key from one revision to the next
// while its file does not change, and gets a new one when it does; an
// object that is not there has none.
func TestObjectKeys(t *testing.T) {
	ctx := context.Background()
	work := gittest.NewRepo(t)
	work.Commit("two", map[string]string{"classes/standard.yaml": classYAML, "clusters/a.yaml": cluster("a"), "clusters/b.yaml": cluster("b")})
	r := open(t, work.Dir)
	one, err := r.Revision(ctx, "main")
	if err != nil || one.Rejected() {
		t.Fatal(err, one.Err)
	}
	work.Commit("change b", map[string]string{"clusters/b.yaml": "# b is paused soon\n" + cluster("b")})
	two, err := r.Revision(ctx, "main")
	if err != nil || two.Rejected() {
		t.Fatal(err, two.Err)
	}
	for _, tc := range []struct {
		kind, name string
		same       bool
	}{{"Cluster", "a", true}, {"ClusterClass", "standard", true}, {"Cluster", "b", false}} {
		k1, k2 := one.ObjectKey(tc.kind, tc.name), two.ObjectKey(tc.kind, tc.name)
		if k1 == "" || k2 == "" || (k1 == k2) != tc.same {
			t.Errorf("%s %s: keys %q and %q, want same=%v", tc.kind, tc.name, k1, k2, tc.same)
		}
	}
	if k := two.ObjectKey("Cluster", "nope"); k != "" {
		t.Errorf("key of a missing cluster: %q", k)
	}
	// Read one after the other, the second revision names what changed
	// since the first: b alone. Not since itself, nor from the first back.
	if changed, ok := two.ChangedSince(one); !ok || !slices.Equal(changed, []sources.ObjectRef{{Kind: "Cluster", Name: "b"}}) {
		t.Errorf("ChangedSince = %v, %v; want [Cluster b], true", changed, ok)
	}
	for _, c := range []struct {
		name      string
		rev, prev *sources.Revision
	}{{"itself", two, two}, {"backwards", one, two}, {"nothing before", two, nil}} {
		if changed, ok := c.rev.ChangedSince(c.prev); ok {
			t.Errorf("ChangedSince %s = %v, true; want false", c.name, changed)
		}
	}
	// A file added: read afresh, so no diff, not even from the one before.
	work.Commit("add c", map[string]string{"clusters/c.yaml": cluster("c")})
	three, err := r.Revision(ctx, "main")
	if err != nil || three.Rejected() {
		t.Fatal(err, three.Err)
	}
	if changed, ok := three.ChangedSince(two); ok {
		t.Errorf("a file added: ChangedSince = %v, true; want false", changed)
	}
	// The same commit read again: nothing changed.
	again, err := r.Revision(ctx, "main")
	if err != nil || again.Rejected() {
		t.Fatal(err, again.Err)
	}
	if changed, ok := again.ChangedSince(three); !ok || len(changed) != 0 {
		t.Errorf("the same commit again: ChangedSince = %v, %v; want none, true", changed, ok)
	}
}

// A revision that only adds a policy checks every file again against it,
// though their text was let go once the first revision had decoded them.
func TestANewPolicyChecksUnchangedFiles(t *testing.T) {
	ctx := context.Background()
	work := gittest.NewRepo(t)
	work.Commit("two clusters", map[string]string{"classes/standard.yaml": classYAML, "clusters/a.yaml": cluster("a"), "clusters/b.yaml": cluster("b")})
	r := open(t, work.Dir)
	one, err := r.Revision(ctx, "main")
	if err != nil || one.Rejected() {
		t.Fatal(err, one.Err)
	}
	work.Commit("pin the version", map[string]string{"policies/version.cue": "Cluster: spec: topology: version: \"v1.31.0\"\n"})
	two, err := r.Revision(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	got := where(two.Errors)
	want := []string{"clusters/a.yaml:8 spec.topology.version", "clusters/b.yaml:8 spec.topology.version"}
	if !two.Rejected() || !slices.Equal(got, want) {
		t.Errorf("errors after the policy = %q (%v), want %q", got, two.Errors, want)
	}
}

// A repository read revision after revision (a daemon's) remembers which
// clusters passed their own checks with their class, and checks a cluster
// again when its class or itself changes.
func TestRevisionsCheckChangedClustersAgain(t *testing.T) {
	ctx := context.Background()
	class := func(most int) string {
		return classYAML + fmt.Sprintf("  variables:\n    - {name: cpus, constraint: \"int & <=%d\", default: 2}\n", most)
	}
	withCPUs := func(name string, n int) string {
		return cluster(name) + fmt.Sprintf("    variables:\n      - {name: cpus, value: %d}\n", n)
	}
	work := gittest.NewRepo(t)
	work.Commit("two clusters", map[string]string{"classes/standard.yaml": class(64), "clusters/a.yaml": withCPUs("a", 8), "clusters/b.yaml": withCPUs("b", 2)})
	r := open(t, work.Dir)
	errorsOf := func(what string) string {
		t.Helper()
		rev, err := r.Revision(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(where(rev.Errors), "; ")
	}
	if got := errorsOf("first"); got != "" {
		t.Fatalf("first revision: %s", got)
	}
	work.Commit("at most 4 CPUs", map[string]string{"classes/standard.yaml": class(4)})
	if got, want := errorsOf("class"), "clusters/a.yaml:10 spec.topology.variables[0].value"; got != want {
		t.Errorf("after the class change: errors %q, want %q", got, want)
	}
	work.Commit("64 again", map[string]string{"classes/standard.yaml": class(64)})
	if got := errorsOf("back"); got != "" {
		t.Errorf("class back: errors %q", got)
	}
	work.Commit("b takes 100", map[string]string{"clusters/b.yaml": withCPUs("b", 100)})
	if got, want := errorsOf("cluster"), "clusters/b.yaml:10 spec.topology.variables[0].value"; got != want {
		t.Errorf("after the cluster change: errors %q, want %q", got, want)
	}
}

// where lists errors as file:line field.
func where(errs schemas.Errors) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s:%d %s", e.Path, e.Line, e.Field))
	}
	return out
}

// TestRevisionsReadAtOnce: goroutines reading revisions of one Repo at the
// same time (a daemon's source, a plan, the dashboard) each get what a
// read alone gets, though reads hand their buffers and listings on to one
// another (run with -race).
func TestRevisionsReadAtOnce(t *testing.T) {
	ctx := context.Background()
	work := gittest.NewRepo(t)
	var commits []string
	files := map[string]string{"classes/standard.yaml": classYAML}
	for i := range 4 {
		files[fmt.Sprintf("clusters/c%d.yaml", i)] = cluster(fmt.Sprintf("c%d", i))
		commits = append(commits, work.Commit(fmt.Sprint("add ", i), files))
	}
	commits = append(commits, work.Commit("broken", map[string]string{"clusters/c0.yaml": "kind: [\n"}))
	alone := map[string]string{}
	describe := func(rev *sources.Revision) string {
		if rev.Fleet == nil {
			return fmt.Sprintf("rejected: %v", rev.Errors)
		}
		var names []string
		for _, c := range rev.Fleet.Clusters {
			names = append(names, c.Metadata.Name+"@"+rev.ObjectKey("Cluster", c.Metadata.Name))
		}
		return strings.Join(names, " ")
	}
	for _, c := range commits {
		rev, err := open(t, work.Dir).Revision(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		alone[c] = describe(rev)
	}
	r := open(t, work.Dir)
	done := make(chan string)
	for g := range 4 {
		go func() {
			for i := range 20 {
				c := commits[(g+i)%len(commits)]
				rev, err := r.Revision(ctx, c)
				if err != nil {
					done <- err.Error()
					return
				}
				if got := describe(rev); got != alone[c] {
					done <- fmt.Sprintf("%.7s read at once: %s; alone: %s", c, got, alone[c])
					return
				}
			}
			done <- ""
		}()
	}
	for range 4 {
		if msg := <-done; msg != "" {
			t.Error(msg)
		}
	}
}

// TestABrokenFileQuotesARenderedLine: the reference a broken file holds
// back, quoted in that file's error, is placed in a kustomized file's
// source (line 10 below), not at kustomize's output line.
func TestABrokenFileQuotesARenderedLine(t *testing.T) {
	c := "# one\n# two\n# three\n" + strings.Replace(cluster("a"), "name: standard", "name: other", 1)
	work := gittest.NewRepo(t)
	work.Commit("fleet", map[string]string{"classes/standard.yaml": classYAML, "classes/broken.yaml": "a: [\n",
		"app/kustomization.yaml": "namePrefix: eu-\nresources: [c.yaml]\n", "app/c.yaml": c})
	rev, err := open(t, work.Dir).Revision(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	if len(rev.Errors) != 1 || !strings.Contains(rev.Errors[0].Message, "the first, app/c.yaml:10:") {
		t.Errorf("errors = %v, want the broken class file's, quoting app/c.yaml:10", rev.Errors)
	}
}
