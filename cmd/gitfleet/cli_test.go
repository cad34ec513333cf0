package main

import (
	"runtime"
	"strings"
	"testing"
)

// TestCLIConventions: help goes to standard output and exits 0; a command
// line gitfleet cannot run exits 1 with the error once on standard error,
// saying how to get help (2 is plan --detailed-exitcode's "changes"); no
// test-only flag shows in help; every output flag is -o, with --format as
// its alias.
func TestCLIConventions(t *testing.T) {
	for _, c := range []string{"validate", "plan", "describe", "history", "up", "serve", "worker", "init", "version"} {
		code, stdout, stderr := runCmd(t, c, "-h")
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: gitfleet "+c) {
			t.Errorf("%s -h: exit %d, stdout %.60q, stderr %q", c, code, stdout, stderr)
		}
		if strings.Contains(stdout, "-now") {
			t.Errorf("%s -h shows a test flag:\n%s", c, stdout)
		}
	}
	for _, c := range []string{"validate", "plan", "describe"} {
		_, stdout, _ := runCmd(t, c, "-h")
		if !strings.Contains(stdout, "  -o string") || !strings.Contains(stdout, "  -format string") {
			t.Errorf("%s has no -o or --format:\n%s", c, stdout)
		}
	}
	for _, c := range []string{"serve", "up"} {
		if _, stdout, _ := runCmd(t, c, "-h"); !strings.Contains(stdout, `(default "127.0.0.1:8080")`) {
			t.Errorf("%s does not listen on loopback by default:\n%s", c, stdout)
		}
	}
	code, stdout, stderr := runCmd(t, "plan", "--bogus")
	if code != 1 || stdout != "" || strings.Count(stderr, "-bogus") != 1 || !strings.Contains(stderr, "gitfleet plan -h") {
		t.Errorf("plan --bogus: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, stderr := runCmd(t, "frobnicate"); code != 1 || !strings.Contains(stderr, "unknown command") {
		t.Errorf("unknown command: exit %d, %q", code, stderr)
	}
	if code, stdout, _ := runCmd(t, "help"); code != 0 || !strings.Contains(stdout, "gitfleet version") {
		t.Errorf("help: exit %d\n%s", code, stdout)
	}
}

func TestVersionAndCompletion(t *testing.T) {
	code, stdout, _ := runCmd(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "gitfleet ") || !strings.Contains(stdout, runtime.Version()) || !strings.Contains(stdout, "commit ") {
		t.Errorf("version: exit %d\n%s", code, stdout)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, stdout, _ := runCmd(t, "completion", sh)
		for _, c := range []string{"describe", "history", "plan", "validate", "version"} {
			if code != 0 || !strings.Contains(stdout, c) {
				t.Errorf("completion %s: exit %d, lacks %s", sh, code, c)
			}
		}
	}
	if code, _, _ := runCmd(t, "completion", "powershell"); code != 1 {
		t.Errorf("completion powershell: exit %d, want 1", code)
	}
}
