package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/reconciler/status"
)

// TestRestartOnARejectedHead: a daemon restarted while main's head does
// not validate keeps running the revision it applied before (the status
// branch's last applied commit), as it would have without the restart: it
// is ready, and the status still names that revision as applied and the
// head as rejected, with why.
func TestRestartOnARejectedHead(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon twice")
	}
	nats := natstest.StartProcess(t)
	repo := filepath.Join(t.TempDir(), "fleet")
	if code, _, stderr := runCmd(t, "init", repo); code != 0 {
		t.Fatalf("init: %s", stderr)
	}
	good := strings.TrimSpace(gitCLI(t, repo, "rev-parse", "HEAD"))
	data, listen := t.TempDir(), "127.0.0.1:"+freeTCPPort(t)
	serve := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		var errb syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, []string{"serve", "--repo", repo, "--nats", nats.URL(), "--data-dir", data, "--listen", listen,
				"--status-interval", "100ms", "--log-format", "json"}, &cmdEnv{stdout: io.Discard, stderr: &errb})
		}()
		return func() {
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("serve exit %d:\n%s", code, errb.String())
			}
		}
	}
	fleet := func() *status.FleetStatus {
		g, err := openGit(repo)
		if err != nil {
			t.Fatal(err)
		}
		s, err := status.Read(g, "gitfleet/status")
		if err != nil {
			return nil
		}
		return &s.Fleet
	}
	applied := func(f *status.FleetStatus) string {
		if f == nil || f.LastApplied == nil {
			return ""
		}
		return f.LastApplied.Commit
	}

	stop := serve()
	waitUntil(t, "the first start applies main", func() bool { return applied(fleet()) == good })
	stop()

	path := filepath.Join(repo, "clusters", "dev-1.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "replicas: 1", "replicas: many", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, repo, "commit", "-qam", "dev-1: many control planes")
	bad := strings.TrimSpace(gitCLI(t, repo, "rev-parse", "HEAD"))

	stop = serve()
	defer stop()
	waitUntil(t, "the restart records the rejected head", func() bool {
		f := fleet()
		return f != nil && f.LastRejected != nil && f.LastRejected.Commit == bad
	})
	f := fleet()
	if applied(f) != good {
		t.Errorf("after the restart the status says %q was applied last, want %s (still in force)", applied(f), good)
	}
	if errs := strings.Join(f.LastRejected.Errors, "\n"); !strings.Contains(errs, "clusters/dev-1.yaml:") || !strings.Contains(errs, `"many"`) {
		t.Errorf("the rejection says %q, want dev-1's replicas", errs)
	}
	waitUntil(t, "/readyz ok on the revision in force", func() bool {
		code, _ := httpGet("http://" + listen + "/readyz")
		return code == http.StatusOK
	})
}
