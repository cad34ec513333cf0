package main

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestCLIConventions: help goes to standard output and exits 0; a command
// line gitfleet cannot run exits 1 with the error once on standard error,
// saying how to get help (2 is plan --detailed-exitcode's "changes"); no
// test-only flag shows in help; every output flag is -o, with --format as
// its alias.
func TestCLIConventions(t *testing.T) {
	for _, c := range []string{"validate", "plan", "describe", "history", "up", "serve", "worker", "init", "version",
		"import", "import capi", "node", "node list", "node kill", "kubeconfig", "dashboard", "scale", "nats-config", "nats-creds", "completion"} {
		code, stdout, stderr := runCmd(t, append(strings.Fields(c), "-h")...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "Usage: gitfleet "+strings.Fields(c)[0]) {
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
	// A node runs no server of its own: "embedded" is refused at once
	// instead of being dialled forever.
	if code, _, stderr := runCmd(t, "node", "--nats", "embedded", "--cluster", "c", "--machine", "m", "--state-dir", t.TempDir()); code != 1 || !strings.Contains(stderr, "nats://host:port") {
		t.Errorf("node --nats embedded: exit %d, %q", code, stderr)
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

// TestShellsComplete: each shell's script, loaded in that shell with
// gitfleet on the PATH, offers a command's flags, a subcommand's own
// (import capi, node list), and the command's when the word after it is
// an argument. bash is always tried; zsh and fish where installed (zsh's
// compadd and compdef are stand-ins that print, as its completion system
// needs a terminal).
func TestShellsComplete(t *testing.T) {
	scripts := map[string]func(words []string) []string{
		"bash": func(words []string) []string {
			return []string{"-c", `source <(gitfleet completion bash); COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _gitfleet; printf '%s\n' "${COMPREPLY[@]}"`, "bash"}
		},
		"zsh": func(words []string) []string {
			return []string{"-c", `compdef(){}; compadd(){ shift; print -l -- "$@"; }; _files(){}; eval "$(gitfleet completion zsh)"; words=("$@"); CURRENT=$#; _gitfleet`, "zsh"}
		},
		"fish": func(words []string) []string {
			return []string{"-c", `gitfleet completion fish | source; complete -C (string join -- " " $argv)`}
		},
	}
	path := "PATH=" + asMain(t) + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, sh := range []string{"bash", "zsh", "fish"} {
		t.Run(sh, func(t *testing.T) {
			if _, err := exec.LookPath(sh); err != nil {
				if sh == "bash" {
					t.Fatal("no bash")
				}
				t.Skipf("no %s here", sh)
			}
			for _, c := range []struct {
				words      []string
				want, lack string
			}{
				{[]string{"gitfleet", "pl"}, "plan", "validate"},
				{[]string{"gitfleet", "plan", "--det"}, "--detailed-exitcode", "--provider"},
				{[]string{"gitfleet", "import", "capi", "--"}, "--provider", "--nats"},
				{[]string{"gitfleet", "import", "--"}, "--provider", ""},
				{[]string{"gitfleet", "node", "list", "--"}, "--signal", "--cluster"},
				{[]string{"gitfleet", "node", "--"}, "--cluster", "--signal"},
				{[]string{"gitfleet", "kubeconfig", "dev-1", "--nats"}, "--nats-creds", "--nats-replicas"},
				{[]string{"gitfleet", "up", "--nats-re"}, "--nats-replicas", ""},
			} {
				cmd := exec.Command(sh, append(scripts[sh](c.words), c.words...)...)
				cmd.Env = append(os.Environ(), path)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", sh, err, out)
				}
				// fish prints each candidate with its description after a
				// tab; zsh's stand-in compadd prints all it is offered (zsh
				// itself keeps those that start with the word).
				var got []string
				for _, l := range strings.Split(string(out), "\n") {
					if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], c.words[len(c.words)-1]) {
						got = append(got, f[0])
					}
				}
				if !slices.Contains(got, c.want) || (c.lack != "" && slices.Contains(got, c.lack)) {
					t.Errorf("%q completes to %q: want %s, not %s", c.words, got, c.want, c.lack)
				}
			}
		})
	}
}
