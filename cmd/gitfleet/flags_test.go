package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/sources"
)

// TestHelpPrintsNoSecret: the flags whose default is a secret in the
// environment print its variable's name in -h, never its value (the flag
// package prints a default it was given, and help output ends up in CI
// logs and terminals' scrollback).
func TestHelpPrintsNoSecret(t *testing.T) {
	secrets := map[string]string{"GITFLEET_GIT_TOKEN": "tok-5e1c", "GITFLEET_GIT_PASSWORD": "pw-77a0",
		"GITFLEET_WEBHOOK_SECRET": "wh-0b3f", "GITFLEET_UI_TOKEN": "ui-9d21"}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	for _, c := range []string{"serve", "up", "dashboard"} {
		code, stdout, stderr := runCmd(t, c, "-h")
		if code != 0 || !strings.Contains(stdout, "$GITFLEET_GIT_TOKEN") {
			t.Fatalf("%s -h: exit %d, help %q, %s", c, code, stdout, stderr)
		}
		for k, v := range secrets {
			if strings.Contains(stdout+stderr, v) {
				t.Errorf("%s -h prints $%s's value", c, k)
			}
		}
	}
}

// TestSecretFlagsTakeTheEnvironment: a secret flag not given takes its
// variable's value once the flags are parsed; given, even empty (to turn
// the webhook off), it wins.
func TestSecretFlagsTakeTheEnvironment(t *testing.T) {
	t.Setenv("GITFLEET_WEBHOOK_SECRET", "from-env")
	parse := func(args ...string) string {
		var o daemonOptions
		fs := newFlagSet("serve", &cmdEnv{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}})
		o.bindFlags(fs, "127.0.0.1:8080")
		if _, err := parseFlags(fs, args); err != nil {
			t.Fatal(err)
		}
		return o.webhookSecret
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "from-env"},
		{[]string{"--repo", "x"}, "from-env"},
		{[]string{"--webhook-secret", "from-flag"}, "from-flag"},
		{[]string{"--webhook-secret", ""}, ""},
	} {
		if got := parse(tc.args...); got != tc.want {
			t.Errorf("serve %q: webhook secret %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestUpTakesEveryRemoteForm: up checks only a local folder before it
// starts, and says how to make a missing one; the remote forms its help
// lists (git@host:path among them) are left to the source to clone.
func TestUpTakesEveryRemoteForm(t *testing.T) {
	for _, repo := range []string{"https://git.example.com/fleet", "ssh://git@host/fleet.git", "git@host:org/fleet.git", "file:///srv/fleet.git"} {
		if err := localRepoExists(repo); err != nil {
			t.Errorf("up --repo %s: %v, want it left to the source", repo, err)
		}
	}
	missing := t.TempDir() + "/fleet"
	if err := localRepoExists(missing); err == nil || !strings.Contains(err.Error(), "gitfleet init "+missing) {
		t.Errorf("up --repo of a missing folder: %v, want how to make it", err)
	}
	if err := localRepoExists(t.TempDir()); err != nil {
		t.Errorf("up --repo of a folder: %v", err)
	}
}

// TestWarnsOfAnotherStatusBranch: a daemon whose --status-branch is not
// the one gitfleet.yaml names, where describe, history and plan look,
// says so at its start, naming both; the same, or a rejected first
// revision, says nothing.
func TestWarnsOfAnotherStatusBranch(t *testing.T) {
	rev := func(named string) *sources.Revision {
		f := &v1alpha1.Fleet{}
		f.Config.Spec.StatusBranch = named
		return &sources.Revision{Fleet: f}
	}
	for _, tc := range []struct {
		cur  *sources.Revision
		warn bool
	}{
		{rev("ops/status"), true},
		{rev("gitfleet/status"), false},
		{&sources.Revision{}, false},
		{nil, false},
	} {
		var logged bytes.Buffer
		warnStatusBranch(tc.cur, "gitfleet/status", zerolog.New(&logged))
		if got := strings.Contains(logged.String(), `"statusBranch":"ops/status"`); got != tc.warn || (!tc.warn && logged.Len() > 0) {
			t.Errorf("revision %+v: logged %q, want a warning: %v", tc.cur, logged.String(), tc.warn)
		}
	}
}

// TestDaemonWarnsOfTheStatusBranchItReads: over a real repository and
// source, the daemon's watcher warns at the first good revision whose
// gitfleet.yaml names another status branch, and again when a commit
// names yet another.
func TestDaemonWarnsOfTheStatusBranchItReads(t *testing.T) {
	dir := fleetRepo(t)
	edit := func(to string) {
		p := filepath.Join(dir, "gitfleet.yaml")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b = regexp.MustCompile(`statusBranch: \S+`).ReplaceAll(b, []byte("statusBranch: "+to))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		gitCLI(t, dir, "commit", "-qam", "status on "+to)
	}
	edit("ops/status")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	repo, err := sources.Open(ctx, sources.Options{Location: dir, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	src, err := sources.Watch(ctx, repo, sources.WatchOptions{Branch: "main", Newest: true, Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var logged syncBuffer
	done := make(chan struct{})
	go func() { defer close(done); watchStatusBranch(ctx, src, "gitfleet/status", zerolog.New(&logged)) }()
	waitLogged := func(branch string) {
		t.Helper()
		waitUntil(t, "a warning naming "+branch, func() bool {
			return strings.Contains(logged.String(), `"statusBranch":"`+branch+`"`)
		})
	}
	waitLogged("ops/status")
	edit("other/status")
	src.Trigger()
	waitLogged("other/status")
	cancel()
	<-done
}
