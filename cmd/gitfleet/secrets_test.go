package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
)

// TestNoSecretLeaks runs gitfleet up as an operator would with secrets: the
// fleet repository behind HTTP basic auth, its token written in --repo's
// URL and in $GITFLEET_GIT_TOKEN, a NATS server that wants a password,
// written in --nats's URL, and a webhook secret in the environment. Once
// the fleet runs, no secret may be found in the daemon's log, in a node's
// command line or environment, in a file under the data dir, or on the
// status branch.
func TestNoSecretLeaks(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds the binary and runs real processes")
	}
	const (
		gitToken      = "gitTOKEN-4f1d9c"
		natsPassword  = "natsPASSWORD-7a2e1b"
		webhookSecret = "webhookSECRET-91c3d0"
	)
	secrets := []string{gitToken, natsPassword, webhookSecret}
	e := newE2E(t)
	e.git("config", "http.receivepack", "true")
	repoURL := authGitRemote(t, filepath.Dir(e.repo), gitToken) + "/" + filepath.Base(e.repo) + "/.git"
	nats := natstest.StartProcess(t, "--user", "gitfleet", "--pass", natsPassword)
	e.listen = "127.0.0.1:" + freeTCPPort(t) // picked while NATS holds its port

	f, err := os.OpenFile(e.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	withToken := strings.Replace(repoURL, "http://", "http://x-access-token:"+gitToken+"@", 1)
	withPassword := strings.Replace(nats.URL(), "nats://", "nats://gitfleet:"+natsPassword+"@", 1)
	e.cmd = exec.Command(e.bin, "up", "--repo", withToken, "--nats", withPassword, "--data-dir", e.data,
		"--listen", e.listen, "--status-interval", "200ms", "--interval", "1s", "--json", "--log-level", "debug")
	e.cmd.Env = append(os.Environ(), "GITFLEET_GIT_TOKEN="+gitToken, "GITFLEET_WEBHOOK_SECRET="+webhookSecret)
	e.cmd.Stdout, e.cmd.Stderr = f, f
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	e.waitConverged("the fleet runs", fleetWant{"dev-1": {3, "v1.31.2"}, "prod-1": {6, "v1.31.2"}})

	// The dashboard of a daemon on a remote repository reads the status
	// branch in its bare clone.
	if code, body := httpGet("http://" + e.listen + "/clusters/prod-1"); code != 200 || !strings.Contains(body, "<h1>Cluster prod-1</h1>") {
		t.Errorf("the dashboard of a daemon on a remote: %d\n%.500s", code, body)
	}

	var leaks []string
	check := func(where string, data []byte, allowed ...string) {
		for _, s := range secrets {
			if bytes.Contains(data, []byte(s)) && !slices.Contains(allowed, s) {
				leaks = append(leaks, fmt.Sprintf("%s holds %s", where, s[:strings.Index(s, "-")]))
			}
		}
	}
	log, err := os.ReadFile(e.logFile)
	if err != nil {
		t.Fatal(err)
	}
	check("the daemon's log", log)
	nodes := e.nodes("")
	if len(nodes) != 9 {
		t.Fatalf("%d node processes, want 9", len(nodes))
	}
	for _, n := range nodes {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", n.pid))
		check("node "+n.name+"'s command line", cmdline)
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", n.pid))
		if err != nil {
			t.Fatal(err)
		}
		// The node needs NATS; it must not get the Git token or the
		// webhook secret.
		check("node "+n.name+"'s environment", environ, natsPassword)
	}
	err = filepath.WalkDir(e.data, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(e.data, path)
		if d.IsDir() {
			if rel == "." || filepath.Dir(rel) == "local" || strings.Count(rel, string(filepath.Separator)) == 2 && strings.HasPrefix(rel, "local") {
				if perm := info.Mode().Perm(); perm != 0o700 {
					leaks = append(leaks, fmt.Sprintf("%s is mode %o, want 0700", rel, perm))
				}
			}
			return nil
		}
		if strings.HasPrefix(rel, "local"+string(filepath.Separator)) && info.Mode().Perm()&0o077 != 0 {
			leaks = append(leaks, fmt.Sprintf("%s is mode %o: others may read it", rel, info.Mode().Perm()))
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		check("file "+rel, data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	statusLog := e.git("log", "-p", "gitfleet/status")
	check("the status branch", []byte(statusLog))
	if len(leaks) > 0 {
		t.Errorf("secrets where others can find them:\n%s", strings.Join(leaks, "\n"))
	}
}

// authGitRemote serves the repositories under root with git http-backend,
// on loopback, to clients whose basic-auth password is token.
func authGitRemote(t *testing.T, root, token string) string {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=gitfleet",
			"GIT_CONFIG_NOSYSTEM=1", "HOME=" + t.TempDir()},
		InheritEnv: []string{"PATH"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pass, ok := r.BasicAuth(); !ok || pass != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="fleet"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
