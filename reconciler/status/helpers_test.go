package status

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/rs/zerolog"
)

// gitEnv is the environment of every git command a test runs.
func gitEnv(home string) []string {
	return append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"),
		"GIT_AUTHOR_NAME=Ada Tester", "GIT_AUTHOR_EMAIL=ada@example.com",
		"GIT_COMMITTER_NAME=Ada Tester", "GIT_COMMITTER_EMAIL=ada@example.com",
		"GIT_TERMINAL_PROMPT=0")
}

// gitCLI runs git in dir and returns its trimmed output; failure fails t.
func gitCLI(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(filepath.Join(os.TempDir(), "gitfleet-status-test-home"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes a repository with one commit on main and opens it with go-git.
func newRepo(t testing.TB, dir string) *git.Repository {
	t.Helper()
	gitCLI(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("fleet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, dir, "add", "README.md")
	gitCLI(t, dir, "commit", "-q", "-m", "initial")
	return openRepo(t, dir)
}

// openRepo opens the repository in dir (a work tree or a bare
// repository) as the daemon does.
func openRepo(t testing.TB, dir string) *git.Repository {
	t.Helper()
	gitDir := filepath.Join(dir, ".git")
	if _, err := os.Stat(gitDir); err != nil {
		gitDir = dir
	}
	r, err := OpenRepository(gitDir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newWriter starts a Writer with a fixed clock; Close runs at cleanup.
func newWriter(t testing.TB, o Options) *Writer {
	t.Helper()
	if o.Now == nil {
		o.Now = func() time.Time { return time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC) }
	}
	o.Logger = zerolog.Nop()
	w, err := NewWriter(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func flush(t testing.TB, w *Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// commitCount is how many commits the status branch has (0 when absent).
func commitCount(t testing.TB, dir, branch string) int {
	t.Helper()
	cmd := exec.Command("git", "rev-list", "--count", branch, "--")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return 0
	}
	n := 0
	for _, c := range strings.TrimSpace(string(out)) {
		n = n*10 + int(c-'0')
	}
	return n
}

var created = time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)

// cluster is a cluster with one control plane machine and n workers in
// phase.
func cluster(name string, n int, phase string) ClusterStatus {
	c := ClusterStatus{
		Name: name, Class: "standard", Version: "v1.31.2", Phase: ClusterProvisioning, Created: created,
		ControlPlane: Replicas{Version: "v1.31.2", Desired: 1, Replicas: 1, Ready: 1, Updated: 1},
		Deployments:  []DeploymentStatus{{Name: "md-0", Replicas: Replicas{Version: "v1.31.2", Desired: n, Replicas: n, Updated: n}}},
		Conditions:   []Condition{{Type: ConditionReady, Status: ConditionFalse, Reason: "WaitingForWorkers", LastTransitionTime: created}},
		Machines: []MachineStatus{{
			Name: name + "-cp-a1b2c", Role: "control-plane", Phase: "Running", Version: "v1.31.2",
			Provider: "inmemory", ProviderID: "inmemory://" + name + "-cp-a1b2c", Addresses: []string{"10.0.0.1"},
			TemplateHash: "5f2c", SourceCommit: "1111111111111111111111111111111111111111", Created: created,
		}},
	}
	for i := range n {
		m := name + "-md-0-w" + string(rune('a'+i))
		c.Machines = append(c.Machines, MachineStatus{
			Name: m, Role: "worker", Deployment: "md-0", Phase: phase, Version: "v1.31.2",
			Provider: "inmemory", ProviderID: "inmemory://" + m, TemplateHash: "9e1d",
			SourceCommit: "1111111111111111111111111111111111111111", Created: created,
		})
	}
	if phase == "Running" {
		c.Phase = ClusterProvisioned
		c.Deployments[0].Ready = n
		c.Conditions[0] = Condition{Type: ConditionReady, Status: ConditionTrue, LastTransitionTime: created}
	} else {
		c.Deployments[0].Unavailable = n
	}
	return c
}
