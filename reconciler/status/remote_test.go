package status

import (
	"fmt"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// httpRemote serves the bare repositories under root with the real
// git http-backend, on loopback, until the test ends.
func httpRemote(t *testing.T, root string) string {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	h := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "HOME=" + t.TempDir()},
		InheritEnv: []string{"PATH"},
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// remoteAndClones makes a bare repository with one commit on main, served
// over transport (file or http), and returns it and a maker of its clones.
func remoteAndClones(t *testing.T, transport string) (bare string, clone func() string) {
	t.Helper()
	root := t.TempDir()
	bare = filepath.Join(root, "fleet.git")
	gitCLI(t, root, "init", "-q", "--bare", "-b", "main", bare)
	gitCLI(t, bare, "config", "http.receivepack", "true")
	seed := t.TempDir()
	newRepo(t, seed)
	gitCLI(t, seed, "push", "-q", bare, "main")
	url := "file://" + bare
	if transport == "http" {
		url = httpRemote(t, root) + "/fleet.git"
	}
	return bare, func() string {
		d := filepath.Join(t.TempDir(), "clone")
		gitCLI(t, root, "clone", "-q", url, d)
		return d
	}
}

// Two daemons' writers, each in its own clone of one remote: the second's
// push is rejected (the remote moved), it fetches, re-applies its change on
// top and pushes again; the remote holds both.
func TestWriterPushesAndRetriesARejectedPush(t *testing.T) {
	for _, transport := range []string{"file", "http"} {
		t.Run(transport, func(t *testing.T) {
			bare, clone := remoteAndClones(t, transport)
			dirA, dirB := clone(), clone()
			a := newWriter(t, Options{Repo: openRepo(t, dirA), Remote: "origin", Interval: time.Hour})
			b := newWriter(t, Options{Repo: openRepo(t, dirB), Remote: "origin", Interval: time.Hour})
			a.SetCluster(cluster("dev-1", 1, "Running"), origin)
			flush(t, a)
			b.SetCluster(cluster("prod-1", 2, "Provisioning"), origin)
			flush(t, b)
			if files := gitCLI(t, bare, "ls-tree", "-r", "--name-only", branch); files != "clusters/dev-1.yaml\nclusters/prod-1.yaml\nfleet.yaml" {
				t.Errorf("remote files:\n%s", files)
			}
			if log := gitCLI(t, bare, "log", "--format=%s", branch); !strings.HasPrefix(log, "prod-1: ") || !strings.Contains(log, "\ndev-1: ") {
				t.Errorf("remote log:\n%s", log)
			}
			if fleet := gitCLI(t, bare, "show", branch+":fleet.yaml"); !strings.Contains(fleet, "clusters: 2\n") {
				t.Errorf("remote fleet.yaml does not count both clusters:\n%s", fleet)
			}
			if s := b.Stats(); s.Retries < 1 || s.Pushes != 1 {
				t.Errorf("second writer: %+v, want a retry and one push", s)
			}
			// The first writer, now behind, catches up on its next change.
			a.SetCluster(cluster("dev-1", 2, "Running"), origin)
			flush(t, a)
			if n := commitCount(t, bare, branch); n != 3 {
				t.Errorf("remote has %d commits, want 3", n)
			}
			if fleet := gitCLI(t, bare, "show", branch+":fleet.yaml"); !strings.Contains(fleet, "machines: 6\n") {
				t.Errorf("remote fleet.yaml after catching up:\n%s", fleet)
			}
		})
	}
}

// A remote that cannot be reached: Flush fails, keeps the change, and a
// later Flush pushes it once the remote is back.
func TestWriterKeepsUnpushedChangesUntilTheRemoteIsBack(t *testing.T) {
	root := t.TempDir()
	bare := filepath.Join(root, "fleet.git")
	gitCLI(t, root, "init", "-q", "--bare", "-b", "main", bare)
	dir := t.TempDir()
	newRepo(t, dir)
	gitCLI(t, dir, "remote", "add", "origin", "file://"+bare)
	w := newWriter(t, Options{Repo: openRepo(t, dir), Remote: "origin", Interval: time.Hour})
	moved := bare + ".away"
	if err := os.Rename(bare, moved); err != nil {
		t.Fatal(err)
	}
	w.SetCluster(cluster("dev-1", 1, "Running"), origin)
	if err := w.Flush(t.Context()); err == nil {
		t.Fatal("Flush with the remote gone = nil, want an error")
	}
	if err := os.Rename(moved, bare); err != nil {
		t.Fatal(err)
	}
	flush(t, w)
	if files := gitCLI(t, bare, "ls-tree", "-r", "--name-only", branch); files != "clusters/dev-1.yaml\nfleet.yaml" {
		t.Errorf("remote files:\n%s", files)
	}
}

// Commits written as packs are pushed like loose ones, including one
// rebuilt after its push was rejected, over both transports.
func TestLargeCommitsArePushed(t *testing.T) {
	for _, transport := range []string{"file", "http"} {
		t.Run(transport, func(t *testing.T) {
			bare, clone := remoteAndClones(t, transport)
			a := newWriter(t, Options{Repo: openRepo(t, clone()), Remote: "origin", Interval: time.Hour})
			b := newWriter(t, Options{Repo: openRepo(t, clone()), Remote: "origin", Interval: time.Hour})
			n := packMin + 6
			for i := range n {
				a.SetCluster(cluster(fmt.Sprintf("a%03d", i), 1, "Running"), origin)
				b.SetCluster(cluster(fmt.Sprintf("b%03d", i), 1, "Running"), origin)
			}
			flush(t, a)
			flush(t, b) // rejected: the remote moved; fetched, rebuilt on top (a pack again) and pushed
			if got := len(strings.Fields(gitCLI(t, bare, "ls-tree", "--name-only", branch+":"+ClustersDir))); got != 2*n {
				t.Errorf("the remote's branch has %d cluster files, want %d", got, 2*n)
			}
			if sa, sb := a.Stats(), b.Stats(); sa.Packs != 1 || sb.Packs < 1 || sb.Retries < 1 || sa.Pushes != 1 || sb.Pushes != 1 {
				t.Errorf("writers' stats %+v and %+v; want each commit a pack, the second retried, one push each", sa, sb)
			}
			gitCLI(t, bare, "fsck", "--strict", "--no-dangling")
		})
	}
}
