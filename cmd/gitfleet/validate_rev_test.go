package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// validate --rev reads a branch from the object store: a broken commit on a
// branch fails with its file and line while the checked-out tree passes; a
// fleet that passes the schemas but breaks a planner rule fails too.
func TestValidateRevAndPlannerRules(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fleet")
	validate := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(t.Context(), append([]string{"validate", dir}, args...), &cmdEnv{stdout: &out, stderr: &errOut})
		return code, out.String() + errOut.String()
	}
	gitIn := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if code := run(t.Context(), []string{"init", dir}, &cmdEnv{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}); code != 0 {
		t.Fatal("init failed")
	}
	gitIn("checkout", "-q", "-b", "broken")
	path := filepath.Join(dir, "clusters", "dev-1.yaml")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(good, []byte("replicas: 2"), []byte("replicas: -2"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn("commit", "-qam", "negative replicas")
	gitIn("checkout", "-q", "main")

	if code, out := validate(); code != 0 {
		t.Fatalf("working tree of main: exit %d\n%s", code, out)
	}
	code, out := validate("--rev", "broken")
	if code != 1 || !strings.Contains(out, "clusters/dev-1.yaml:23:") || !strings.Contains(out, "replicas") {
		t.Fatalf("validate --rev broken: exit %d, want 1 naming clusters/dev-1.yaml:23\n%s", code, out)
	}
	if code, out := validate("--rev", "main"); code != 0 {
		t.Fatalf("validate --rev main: exit %d\n%s", code, out)
	}

	// Schemas accept a standalone pool at any version; the planner refuses
	// workers newer than the control plane.
	if err := os.WriteFile(path, append(good, []byte(newerPool)...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = validate()
	// At the pool's spec.version, line and column, as a schema error.
	if code != 1 || !strings.Contains(out, "clusters/dev-1.yaml:32:3: spec.version: v1.32.0 is newer") {
		t.Fatalf("pool newer than the control plane: exit %d, want 1 naming clusters/dev-1.yaml:32:3 and the version\n%s", code, out)
	}
	gitIn("commit", "-qam", "a pool newer than the control plane")
	if code, out := validate("--rev", "main"); code != 1 || !strings.Contains(out, "clusters/dev-1.yaml:32:3: spec.version: v1.32.0 is newer") {
		t.Fatalf("validate --rev main: exit %d, want 1 naming clusters/dev-1.yaml:32:3\n%s", code, out)
	}
}
