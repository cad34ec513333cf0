package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runCmd runs one gitfleet command line in-process.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &cmdEnv{stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

func TestInitThenValidate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fleet")
	if code, _, stderr := runCmd(t, "init", dir); code != 0 {
		t.Fatalf("init exit %d: %s", code, stderr)
	}
	for _, f := range []string{"gitfleet.yaml", "classes/standard.yaml", "clusters/dev-1.yaml", "clusters/prod-1.yaml", "policies/prod.cue"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("init did not write %s: %v", f, err)
		}
	}
	code, stdout, stderr := runCmd(t, "validate", dir)
	if code != 0 {
		t.Fatalf("validate exit %d:\n%s%s", code, stdout, stderr)
	}
	if want := "ok: 1 class, 2 clusters, 1 health check\n"; stdout != want {
		t.Errorf("validate printed %q, want %q", stdout, want)
	}
	// One commit by "gitfleet init" with every file, and a clean tree.
	gitOut := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if log := gitOut("log", "--format=%an"); log != "gitfleet init\n" {
		t.Errorf("git log authors = %q, want one commit by gitfleet init", log)
	}
	if st := gitOut("status", "--porcelain"); st != "" {
		t.Errorf("tree not clean after init:\n%s", st)
	}
	if files := gitOut("ls-files"); !strings.Contains(files, "policies/prod.cue") || !strings.Contains(files, "clusters/prod-1.yaml") {
		t.Errorf("commit lacks files:\n%s", files)
	}
}

func TestInitRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, "init", dir)
	if code != 1 || !strings.Contains(stderr, "not empty") {
		t.Fatalf("init on a non-empty dir: exit %d, stderr %q; want 1 and 'not empty'", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "mine" {
		t.Errorf("init touched an existing file")
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		t.Errorf("init created .git in a non-empty dir")
	}
}

func TestInitUsage(t *testing.T) {
	if code, _, stderr := runCmd(t, "init"); code != 1 || !strings.Contains(stderr, "usage: gitfleet init DIR") {
		t.Errorf("init without DIR: exit %d, %q", code, stderr)
	}
}
