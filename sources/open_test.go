package sources_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/sources"
)

const clusterYAML = `apiVersion: gitfleet.io/v1alpha1
kind: Cluster
metadata:
  name: %s
spec:
  topology:
    classRef: {name: standard}
    version: v1.30.2
`

const classYAML = `apiVersion: gitfleet.io/v1alpha1
kind: ClusterClass
metadata:
  name: standard
spec:
  version: v1.30.2
  controlPlane:
    machineTemplate:
      provider: inmemory
  workers:
    machineDeployments:
      - class: default
        template:
          provider: inmemory
`

func cluster(name string) string { return strings.ReplaceAll(clusterYAML, "%s", name) }

func open(t testing.TB, loc string, opts ...func(*sources.Options)) *sources.Repo {
	t.Helper()
	o := sources.Options{Location: loc, DataDir: t.TempDir()}
	for _, f := range opts {
		f(&o)
	}
	r, err := sources.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open(%s): %v", loc, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func paths(files []schemas.File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}

func TestOpenEveryKindOfLocation(t *testing.T) {
	ctx := context.Background()
	work := gittest.NewRepo(t)
	first := work.Commit("two clusters", map[string]string{
		"clusters/a.yaml": cluster("a"),
		"clusters/b.yaml": cluster("b"),
		"README.md":       "# fleet\n",
	})
	work.Git("tag", "v1")
	root := t.TempDir()
	bare := gittest.NewBare(t, root, "fleet.git")
	work.Git("push", "-q", bare, "main", "v1")
	srv := gittest.NewServer(t, root)

	for name, loc := range map[string]string{
		"working": work.Dir,
		"bare":    bare,
		"file":    "file://" + bare,
		"http":    srv.URL + "/fleet.git",
	} {
		t.Run(name, func(t *testing.T) {
			r := open(t, loc)
			for _, rev := range []string{"main", "v1", first, first[:10], "refs/heads/main"} {
				got, err := r.Resolve(ctx, rev)
				if err != nil || got != first {
					t.Errorf("Resolve(%q) = %q, %v; want %s", rev, got, err, first)
				}
			}
			files, err := r.Files(ctx, "main")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := paths(files), []string{"clusters/a.yaml", "clusters/b.yaml"}; !slices.Equal(got, want) {
				t.Errorf("Files = %v, want %v", got, want)
			}
			if _, err := r.Resolve(ctx, "nope"); !errors.Is(err, sources.ErrNotFound) {
				t.Errorf("Resolve(nope) = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestRemoteFetchIsIncremental(t *testing.T) {
	ctx := context.Background()
	work := gittest.NewRepo(t)
	work.Commit("one", map[string]string{"clusters/a.yaml": cluster("a")})
	root := t.TempDir()
	bare := gittest.NewBare(t, root, "fleet.git")
	work.Git("push", "-q", bare, "main")
	srv := gittest.NewServer(t, root)
	data := t.TempDir()
	opts := sources.Options{Location: srv.URL + "/fleet.git", DataDir: data}
	r, err := sources.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := r.Fetch(ctx); err != nil || changed {
		t.Errorf("Fetch when up to date = %v, %v; want false, nil", changed, err)
	}
	second := work.Commit("two", map[string]string{"clusters/b.yaml": cluster("b")})
	work.Git("push", "-q", bare, "main")
	if changed, err := r.Fetch(ctx); err != nil || !changed {
		t.Errorf("Fetch after a push = %v, %v; want true, nil", changed, err)
	}
	if got, _ := r.Resolve(ctx, "main"); got != second {
		t.Errorf("main after fetch = %s, want %s", got, second)
	}
	r.Close()
	if _, err := r.Resolve(ctx, "main"); !errors.Is(err, sources.ErrClosed) {
		t.Errorf("Resolve after Close = %v, want ErrClosed", err)
	}
	// A second Open reuses the clone in the data directory.
	r2, err := sources.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if got, _ := r2.Resolve(ctx, "main"); got != second {
		t.Errorf("main after reopen = %s, want %s", got, second)
	}
	if m, _ := filepath.Glob(filepath.Join(data, "repos", "*", "HEAD")); len(m) != 1 {
		t.Errorf("data dir holds %d clones, want 1", len(m))
	}
}

func TestOpenRefusesWhatIsNotARepo(t *testing.T) {
	_, err := sources.Open(context.Background(), sources.Options{Location: t.TempDir()})
	if !errors.Is(err, sources.ErrNotRepo) {
		t.Errorf("Open(empty folder) = %v, want ErrNotRepo", err)
	}
	_, err = sources.Open(context.Background(), sources.Options{Location: "ftp://example.com/x"})
	if err == nil || !strings.Contains(err.Error(), "unsupported scheme") {
		t.Errorf("Open(ftp://) = %v, want unsupported scheme", err)
	}
}

// TestFetchLeavesLocalBranchesAlone: the status writer commits its branch
// in the clone, then pushes it; a spec fetch in between (the remote has an
// older status branch, or the spec moved) must not reset it.
func TestFetchLeavesLocalBranchesAlone(t *testing.T) {
	ctx := context.Background()
	work := gittest.NewRepo(t)
	work.Commit("one cluster", map[string]string{"clusters/a.yaml": cluster("a")})
	work.Git("branch", "gitfleet/status")
	root := t.TempDir()
	bare := gittest.NewBare(t, root, "fleet.git")
	work.Git("push", "-q", bare, "main", "gitfleet/status")
	r, err := sources.Open(ctx, sources.Options{Location: "file://" + bare, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// A status commit made in the clone, not pushed yet.
	clone := gittest.Run(t, root, gittest.Env(t.TempDir()), "--git-dir", r.GitDir(), "commit-tree", "-m", "status", "-p", "refs/remotes/origin/gitfleet/status", "refs/remotes/origin/gitfleet/status^{tree}")
	gittest.Run(t, root, gittest.Env(t.TempDir()), "--git-dir", r.GitDir(), "update-ref", "refs/heads/gitfleet/status", clone)
	second := work.Commit("two clusters", map[string]string{"clusters/b.yaml": cluster("b")})
	work.Git("push", "-q", bare, "main")
	changed, err := r.Fetch(ctx)
	if err != nil || !changed {
		t.Fatalf("Fetch = %v, %v; want the spec's new commit", changed, err)
	}
	if got, err := r.Resolve(ctx, "main"); err != nil || got != second {
		t.Errorf("main = %s, %v; want %s", got, err, second)
	}
	if got := gittest.Run(t, root, gittest.Env(t.TempDir()), "--git-dir", r.GitDir(), "rev-parse", "refs/heads/gitfleet/status"); got != clone {
		t.Errorf("the fetch moved the local status branch to %s; it was %s", got, clone)
	}
}

// TestOversizedFileIsRefused: a fleet file over MaxFileSize makes the
// revision invalid with an error naming the file and the limit; it is not
// read.
func TestOversizedFileIsRefused(t *testing.T) {
	ctx := context.Background()
	work := gittest.NewRepo(t)
	big := cluster("a") + "# " + strings.Repeat("x", sources.MaxFileSize) + "\n"
	head := work.Commit("a huge cluster file", map[string]string{"classes/standard.yaml": classYAML, "clusters/a.yaml": big})
	// The second read has the first's verdicts, which remember the
	// sizes that fitted: the huge file is refused again. The third reads
	// it packed (a packed blob's size is asked another way), cold.
	data := t.TempDir()
	for _, name := range []string{"cold", "warm", "packed"} {
		if name == "packed" {
			work.Git("gc", "-q", "--prune=now")
			data = t.TempDir()
		}
		r := open(t, work.Dir, func(o *sources.Options) { o.DataDir = data })
		rev, err := r.Revision(ctx, head)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !rev.Rejected() || !strings.Contains(rev.Err.Error(), "clusters/a.yaml") || !strings.Contains(rev.Err.Error(), "1 MiB") {
			t.Errorf("%s: %v; want the file refused, named, with the limit", name, rev.Err)
		}
		r.Close()
	}
}
