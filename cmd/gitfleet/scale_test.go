package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/reconciler"
)

// TestScaleCommand: gitfleet scale sends the token from its file and who
// asks to the daemon's scale API, and prints what the daemon says when it
// refuses; a malformed command line is a usage error.
func TestScaleCommand(t *testing.T) {
	token := "0123456789abcdef0123456789abcdef"
	var gotUser string
	mux := http.NewServeMux()
	h := reconciler.ScaleHandler([]byte(token), func() *reconciler.Reconciler { return nil }, reconciler.NewMetrics(nil), zerolog.Nop())
	mux.Handle(reconciler.ScalePath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUser = r.Header.Get(reconciler.UserHeader)
		h.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "api-token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, "scale", "dev-1/md-0", "--replicas", "3", "--server", srv.URL, "--token-file", file, "--as", "alice")
	if code != 1 || !strings.Contains(stderr, "refused (503 Service Unavailable): this replica does not lead") || gotUser != "alice" {
		t.Errorf("scale at a follower: exit %d, %q, user %q", code, stderr, gotUser)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("not-the-token-at-all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCmd(t, "scale", "dev-1/md-0", "--replicas", "3", "--server", srv.URL, "--token-file", bad); code != 1 || !strings.Contains(stderr, "401 Unauthorized") {
		t.Errorf("wrong token: exit %d, %q", code, stderr)
	}
	for _, args := range [][]string{{"scale", "dev-1", "--replicas", "3"}, {"scale", "dev-1/md-0"}} {
		if code, _, stderr := runCmd(t, args...); code != 1 || stderr == "" {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
}

// TestDaemonScalePathTakesOnlyPOST: the daemon's mux sends every method on
// the scale path to the scale API, which answers one other than POST with
// 405 and Allow: POST, rather than the dashboard at / answering 404.
func TestDaemonScalePathTakesOnlyPOST(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	url := "http://" + startServe(t) + "/api/v1/clusters/dev-1/machinedeployments/md-0/scale"
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(method, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
			t.Errorf("%s on the scale path: %s, Allow %q; want 405, POST", method, resp.Status, resp.Header.Get("Allow"))
		}
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"replicas":2}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST without the token: %s, want 401", resp.Status)
	}
}
