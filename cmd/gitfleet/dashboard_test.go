package main

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/gitfleet/gitfleet/dashboard"
	"github.com/gitfleet/gitfleet/reconciler/status"
)

// startDashboard runs gitfleet dashboard with args until the test ends;
// stderr collects what it says.
func startDashboard(t *testing.T, args ...string) (stderr *syncBuffer, done chan int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr, done = &syncBuffer{}, make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"dashboard"}, args...), &cmdEnv{stdout: &syncBuffer{}, stderr: stderr})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("gitfleet dashboard did not stop")
		}
	})
	return stderr, done
}

// waitPage waits until url answers 200 with want in its body.
func waitPage(t *testing.T, url, want string, done chan int, stderr *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := httpGet(url)
		if code == 200 && strings.Contains(body, want) {
			return
		}
		select {
		case c := <-done:
			t.Fatalf("gitfleet dashboard exited %d:\n%s", c, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, no %q in:\n%s\nstderr:\n%s", url, code, want, body, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fleetWithDev1 is the scripted fleet with dev-1 on its status branch.
func fleetWithDev1(t *testing.T) (*scriptedFleet, *status.Writer) {
	t.Helper()
	f := newScriptedFleet(t)
	w := statusWriter(t, f.dir)
	if err := w.SetCluster(dev1(2, 2, at("09:05")), status.Origin{SourceCommit: f.git("", time.Time{}, "rev-parse", "HEAD")}); err != nil {
		t.Fatal(err)
	}
	flushStatus(t, w)
	return f, w
}

// An auditor points gitfleet dashboard at the fleet's URL: it clones the
// repository (with the token from the environment, never in arguments or
// output), shows the status and the history, and follows the daemon's
// next status push without a restart.
func TestDashboardOfARemote(t *testing.T) {
	f, w := fleetWithDev1(t)
	root := t.TempDir()
	bare := filepath.Join(root, "fleet.git")
	if out, err := exec.Command("git", "clone", "-q", "--bare", f.dir, bare).CombinedOutput(); err != nil {
		t.Fatalf("git clone --bare: %v\n%s", err, out)
	}
	const token = "remote-token-0123456789abcdef"
	url := authGitRemote(t, root, token) + "/fleet.git"

	// A wrong token: a clear refusal that does not echo the secret.
	t.Setenv("GITFLEET_GIT_TOKEN", "wrong-token-0123456789")
	var errb syncBuffer
	if code := run(t.Context(), []string{"dashboard", "--repo", url, "--listen", "127.0.0.1:" + freeTCPPort(t)}, &cmdEnv{stdout: &syncBuffer{}, stderr: &errb}); code == 0 ||
		!strings.Contains(errb.String(), "check the credentials") || strings.Contains(errb.String(), "wrong-token") {
		t.Errorf("a wrong token: exit %d:\n%s", code, errb.String())
	}

	t.Setenv("GITFLEET_GIT_TOKEN", token)
	listen := "127.0.0.1:" + freeTCPPort(t)
	stderr, done := startDashboard(t, "--repo", url, "--listen", listen, "--interval", "100ms")
	waitPage(t, "http://"+listen+"/clusters/dev-1", "<h1>Cluster dev-1</h1>", done, stderr)
	waitPage(t, "http://"+listen+"/history", "Initial fleet", done, stderr)
	if code, _ := httpGet("http://" + listen + "/clusters/prod-1"); code != http.StatusNotFound {
		t.Errorf("prod-1 before the daemon reported it: %d", code)
	}

	// The daemon reports prod-1 and pushes its status branch.
	if err := w.SetCluster(prod1(), status.Origin{SourceCommit: f.git("", time.Time{}, "rev-parse", "HEAD")}); err != nil {
		t.Fatal(err)
	}
	flushStatus(t, w)
	f.git("", time.Time{}, "push", "-q", bare, "gitfleet/status")
	waitPage(t, "http://"+listen+"/clusters/prod-1", "<h1>Cluster prod-1</h1>", done, stderr)
	if s := stderr.String(); strings.Contains(s, token) || !strings.Contains(s, "read-only") {
		t.Errorf("stderr:\n%s", s)
	}
}

// From a folder inside a clone the dashboard finds its root. Beyond
// 127.0.0.1 the dashboard asks who is reading: without --ui-users
// or a token it does not start (the daemon serves 403 instead); a token
// file others can read is refused; users sign in with basic auth.
func TestDashboardAccess(t *testing.T) {
	f, _ := fleetWithDev1(t)
	dir := t.TempDir()
	try := func(args ...string) (int, string) {
		var errb syncBuffer
		code := run(t.Context(), append([]string{"dashboard", "--repo", f.dir}, args...), &cmdEnv{stdout: &syncBuffer{}, stderr: &errb})
		return code, errb.String()
	}
	// From a folder inside the clone, as git would: it finds the root.
	inside := "127.0.0.1:" + freeTCPPort(t)
	subErr, subDone := startDashboard(t, "--repo", filepath.Join(f.dir, "clusters"), "--listen", inside)
	waitPage(t, "http://"+inside+"/clusters/dev-1", "<h1>Cluster dev-1</h1>", subDone, subErr)
	if code, out := try("--listen", "0.0.0.0:"+freeTCPPort(t)); code != exitUsage || !strings.Contains(out, "--ui-users") {
		t.Errorf("open to all: exit %d:\n%s", code, out)
	}
	loose := filepath.Join(dir, "token")
	if err := os.WriteFile(loose, []byte("a-long-enough-token-value\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := try("--listen", "0.0.0.0:"+freeTCPPort(t), "--ui-token-file", loose); code == 0 || !strings.Contains(out, "chmod 600 "+loose) {
		t.Errorf("a token file others can read: exit %d:\n%s", code, out)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("auditor's password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("auditor:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freeTCPPort(t)
	stderr, done := startDashboard(t, "--repo", f.dir, "--listen", "0.0.0.0:"+port, "--ui-users", users)
	page := "http://127.0.0.1:" + port + "/clusters/dev-1"
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := httpGet(page)
		if code == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("without a password: %d\n%s", code, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	req, _ := http.NewRequest(http.MethodGet, page, nil)
	req.SetBasicAuth("auditor", "auditor's password")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("the auditor with the password: %d", res.StatusCode)
	}
	select {
	case c := <-done:
		t.Fatalf("exited %d", c)
	default:
	}

	// The daemon on a public address with neither: the dashboard is off
	// and says why; /metrics and the rest are not its business.
	h := dashboardHandler("0.0.0.0:8080", dashboard.Options{}, zerolog.Nop())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "--ui-users") {
		t.Errorf("the daemon's dashboard beyond loopback without access: %d %s", rec.Code, rec.Body.String())
	}
}

// gitfleet dashboard has the daemon's server limits (httpServer): the
// server httpServer makes has them (read by value: waiting a minute for an
// idle connection to close would make the test that long), and gitfleet
// dashboard serves with it, which a header block past 64 KiB shows (431:
// net/http's own limit is 1 MiB); /events streams on.
func TestDashboardServerLimits(t *testing.T) {
	srv := httpServer(http.NotFoundHandler())
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"ReadHeaderTimeout (headers within)", srv.ReadHeaderTimeout, 5 * time.Second},
		{"ReadTimeout (a request within)", srv.ReadTimeout, 15 * time.Second},
		{"WriteTimeout", srv.WriteTimeout, 30 * time.Second},
		{"IdleTimeout (an idle keep-alive connection closed after)", srv.IdleTimeout, time.Minute},
	} {
		if c.got != c.want {
			t.Errorf("httpServer's %s: %s, want %s", c.name, c.got, c.want)
		}
	}
	if srv.MaxHeaderBytes != 64<<10 {
		t.Errorf("httpServer's MaxHeaderBytes: %d, want 64 KiB", srv.MaxHeaderBytes)
	}

	f, _ := fleetWithDev1(t)
	listen := "127.0.0.1:" + freeTCPPort(t)
	stderr, done := startDashboard(t, "--repo", f.dir, "--listen", listen)
	waitPage(t, "http://"+listen+"/", "dev-1", done, stderr)
	req, _ := http.NewRequest(http.MethodGet, "http://"+listen+"/", nil)
	req.Header.Set("X-Padding", strings.Repeat("x", 100<<10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("100 KiB of headers: %d, want 431", res.StatusCode)
	}
	res, err = http.Get("http://" + listen + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil || line != "event: status\n" {
		t.Errorf("/events: %q %v", line, err)
	}
}

// What the dashboard does not have is said plainly: a search that finds
// nothing is [] (not null), the history of a cluster or machine no commit
// holds is 404 (the history can be read), and a name that is not there is
// quoted, control characters and all.
func TestDashboardAPIMisses(t *testing.T) {
	f, _ := fleetWithDev1(t)
	listen := "127.0.0.1:" + freeTCPPort(t)
	stderr, done := startDashboard(t, "--repo", f.dir, "--listen", listen)
	base := "http://" + listen
	waitPage(t, base+"/", "dev-1", done, stderr)
	if code, body := httpGet(base + "/api/v1/clusters?q=zzz"); code != 200 || strings.TrimSpace(body) != "[]" {
		t.Errorf("a search that finds nothing: %d %q", code, body)
	}
	for path, want := range map[string]string{
		"/api/v1/history?cluster=zzz":   `cluster "zzz" is in no commit`,
		"/history?cluster=zzz":          `cluster "zzz" is in no commit`,
		"/api/v1/history?machine=zzz":   `machine "zzz" is in no commit`,
		"/history?machine=zzz":          `machine "zzz" is in no commit`,
		"/api/v1/clusters/a%0Ab%1B[31m": `no cluster "a\nb\x1b[31m" on the status branch`,
		"/clusters/a%0Ab":               `no cluster "a\nb" on the status branch`,
	} {
		if code, body := httpGet(base + path); code != http.StatusNotFound || !strings.Contains(body, want) {
			t.Errorf("%s: %d %q, want 404 %s", path, code, body, want)
		}
	}
	if code, body := httpGet(base + "/api/v1/history?cluster=dev-1"); code != 200 {
		t.Errorf("dev-1's history: %d %s", code, body)
	}
}
