package reconciler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

const autoscaledCluster = `apiVersion: gitfleet.io/v1alpha1
kind: Cluster
metadata:
  name: a1
spec:
  topology:
    classRef: {name: small}
    controlPlane:
      replicas: 1
    workers:
      machineDeployments:
        - class: worker
          name: md-0
          metadata:
            annotations:
              cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "1"
              cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "%d"
        - class: worker
          name: fixed
          replicas: 1
`

// TestScaleAPI: an autoscaled pool starts at its minimum; the scale API
// wants the token, refuses a count outside the bounds (saying them) and a
// pool whose replicas Git writes, and sizes the pool within them, saying
// who asked in the status; a lower maximum committed to Git applies at
// once; a new leader keeps the size asked; a cluster deleted and made
// again does not inherit the request.
func TestScaleAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon's parts with an embedded NATS server")
	}
	repo := &benchRepo{tb: t, dir: t.TempDir()}
	repo.git("init", "-q", "-b", "main")
	repo.write("classes/small.yaml", fmt.Sprintf(loopClass, "inmemory"))
	repo.write("clusters/a1.yaml", fmt.Sprintf(autoscaledCluster, 5))
	repo.commit("an autoscaled pool")
	d := startBenchDaemon(t, repo.dir, 1)
	g, err := git.PlainOpen(repo.dir)
	if err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, g, "md-0", 1, "")

	token := []byte("0123456789abcdef0123")
	api := httptest.NewServer(func() http.Handler {
		mux := http.NewServeMux()
		mux.Handle(ScalePath, ScaleHandler(token, func() *Reconciler { return d.rec }, NewMetrics(nil), zerolog.Nop()))
		return mux
	}())
	defer api.Close()
	scale := func(pool, tok string, n int) (int, string) {
		body, _ := json.Marshal(map[string]int{"replicas": n})
		code, _, answer := callScale(t, api.URL+"/api/v1/clusters/a1/machinedeployments/"+pool+"/scale", http.MethodPost, string(body),
			map[string]string{"Authorization": "Bearer " + tok, UserHeader: "alice"})
		return code, answer
	}
	if code, body := scale("md-0", "wrong-token-0000000", 3); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d %s", code, body)
	}
	if code, body := scale("md-0", string(token), 7); code != http.StatusUnprocessableEntity || !strings.Contains(body, "replicas 7 is outside the bounds of MachineDeployment md-0 of cluster a1: min 1, max 5") {
		t.Errorf("outside the bounds: %d %s", code, body)
	}
	if code, body := scale("fixed", string(token), 2); code != http.StatusConflict || !strings.Contains(body, "is not autoscaled: its replicas come from Git") {
		t.Errorf("a pool Git sizes: %d %s", code, body)
	}
	if code, body := scale("md-0", string(token), 3); code != http.StatusOK || !strings.Contains(body, `"replicas":3`) {
		t.Fatalf("within the bounds: %d %s", code, body)
	}
	waitWorkers(t, g, "md-0", 3, "alice from ")

	// A lower maximum in Git applies at once.
	repo.write("clusters/a1.yaml", fmt.Sprintf(autoscaledCluster, 2))
	repo.commit("max 2")
	waitWorkers(t, g, "md-0", 2, "alice from ")

	// A new leader keeps the size asked (it was saved): raise the max
	// again, restart the daemon's part, and the pool goes back to 3.
	d.stop()
	repo.write("clusters/a1.yaml", fmt.Sprintf(autoscaledCluster, 5))
	repo.commit("max 5")
	d.startDaemon(t)
	waitWorkers(t, g, "md-0", 3, "alice from ")

	// The cluster is deleted, then made again under the same name: the
	// request made for the old one is forgotten, and the new pool starts
	// at its minimum, asked by nobody.
	repo.git("rm", "-q", "clusters/a1.yaml")
	repo.commit("a1 goes")
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := status.Read(g, "gitfleet/status")
		if err == nil && s.Cluster("a1") == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a1 is still in status a minute after its file was removed")
		}
		time.Sleep(200 * time.Millisecond)
	}
	repo.write("clusters/a1.yaml", fmt.Sprintf(autoscaledCluster, 5))
	repo.commit("a1 again")
	waitWorkers(t, g, "md-0", 1, "")
}

// waitWorkers waits until the status branch shows n Running machines of
// pool in cluster a1, and its autoscale status asked by someone whose name
// starts with by ("" : asked by nobody yet).
func waitWorkers(t *testing.T, g *git.Repository, pool string, n int, by string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last := "no status"
	for time.Now().Before(deadline) {
		s, err := status.Read(g, "gitfleet/status")
		if err == nil {
			running, total := 0, 0
			for _, m := range s.Observed() {
				if m.Cluster == "a1" && m.Deployment == pool {
					total++
					if m.Phase == wire.PhaseRunning {
						running++
					}
				}
			}
			asked := ""
			if c := s.Cluster("a1"); c != nil {
				for _, dep := range c.Deployments {
					if dep.Name == pool && dep.Autoscale != nil {
						asked = dep.Autoscale.By
					}
				}
			}
			if running == n && total == n && strings.HasPrefix(asked, by) && (by != "" || asked == "") {
				return
			}
			last = fmt.Sprintf("%d Running of %d, asked by %q", running, total, asked)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("pool %s of a1: want %d Running, asked by %q: %s", pool, n, by, last)
}

// testToken is the scale API's token in the tests of its handler.
const testToken = "0123456789abcdef0123"

// followerScaleAPI serves the scale API as a replica that does not lead
// would: a request that passes every check gets 503.
func followerScaleAPI(t *testing.T, m *Metrics, log zerolog.Logger) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(ScalePath, ScaleHandler([]byte(testToken), func() *Reconciler { return nil }, m, log))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// a1Scale is the scale path of pool md-0 of cluster a1.
const a1Scale = "/api/v1/clusters/a1/machinedeployments/md-0/scale"

// callScale sends method with body and the headers hdr to url.
func callScale(t *testing.T, url, method, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header, b.String()
}

// TestScaleRefusalsAreLoggedAndCounted: every scale request is counted by
// outcome; refusals are warnings with the caller's address and the reason,
// a few every ten seconds however many come, and never the token.
func TestScaleRefusalsAreLoggedAndCounted(t *testing.T) {
	var log tail
	m := NewMetrics(nil)
	srv := followerScaleAPI(t, m, zerolog.New(&log))
	for range 30 {
		if code, _, body := callScale(t, srv.URL+a1Scale, http.MethodPost, `{"replicas":2}`, map[string]string{"Authorization": "Bearer wrong-token-0000000"}); code != http.StatusUnauthorized {
			t.Fatalf("wrong token: %d %s", code, body)
		}
	}
	if code, _, body := callScale(t, srv.URL+a1Scale, http.MethodPost, `{"replicas":2}`, map[string]string{"Authorization": "Bearer " + testToken}); code != http.StatusServiceUnavailable {
		t.Fatalf("at a follower: %d %s", code, body)
	}
	count := func(outcome string) float64 {
		var pm dto.Metric
		if err := m.ScaleRequests.WithLabelValues(outcome).Write(&pm); err != nil {
			t.Fatal(err)
		}
		return pm.GetCounter().GetValue()
	}
	if n, u := count("unauthorized"), count("unavailable"); n != 30 || u != 1 {
		t.Errorf("counted %v unauthorized and %v unavailable, want 30 and 1", n, u)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.lines) == 0 || len(log.lines) > 5 {
		t.Errorf("31 refusals made %d log lines, want 1 to 5", len(log.lines))
	}
	for _, line := range log.lines {
		if !bytes.Contains(line, []byte(`"level":"warn"`)) || !bytes.Contains(line, []byte(`"remote":"127.0.0.1:`)) ||
			!bytes.Contains(line, []byte(`"reason":"unauthorized"`)) || bytes.Contains(line, []byte("wrong-token")) || bytes.Contains(line, []byte(testToken)) {
			t.Errorf("a refusal's line: %s", line)
		}
	}
}

// TestScaleBodyIsStrict: the scale API takes one JSON object with the one
// field "replicas", spelt so, a whole number, and nothing after it; a
// larger body than it reads gets 413; the Authorization scheme is
// case-insensitive. (A follower answers a request that passes every check
// with 503.)
func TestScaleBodyIsStrict(t *testing.T) {
	srv := followerScaleAPI(t, NewMetrics(nil), zerolog.Nop())
	auth := map[string]string{"Authorization": "Bearer " + testToken}
	for _, tc := range []struct {
		body string
		code int
		says string
	}{
		{`{"replicas":2}`, 503, "does not lead"},
		{" {\"replicas\": 2}\n", 503, "does not lead"},
		{`{"replicas":0}`, 503, "does not lead"},
		{`{"replicas":2} garbage`, 400, "nothing after it"},
		{`{"replicas":2}{"replicas":3}`, 400, "nothing after it"},
		{`{"replicas":2,"replicas":5}`, 400, `it has "replicas" twice`},
		{`{"REPLICAS":5}`, 400, `it has a field "REPLICAS"`},
		{`{"Replicas":5}`, 400, `it has a field "Replicas"`},
		{`{"replicas":2,"by":"x"}`, 400, `it has a field "by"`},
		{`{}`, 400, `"replicas" is missing`},
		{`{"replicas":null}`, 400, "N must be a whole number"},
		{`{"replicas":2.5}`, 400, "N must be a whole number"},
		{`{"replicas":"2"}`, 400, "N must be a whole number"},
		{`{"replicas":2`, 400, "it ends before its closing brace"},
		{`[2]`, 400, "not a JSON object"},
		{``, 400, "not a JSON object"},
		{`{"replicas":2}` + strings.Repeat(" ", 5000), 413, "larger than 4096 bytes"},
		{`{"pad":"` + strings.Repeat("x", 5000) + `"}`, 413, "larger than 4096 bytes"},
	} {
		code, _, body := callScale(t, srv.URL+a1Scale, http.MethodPost, tc.body, auth)
		var answer struct{ Error string }
		if err := json.Unmarshal([]byte(body), &answer); err != nil || code != tc.code || !strings.Contains(answer.Error, tc.says) {
			t.Errorf("%.40q: %d %s; want %d, %q", tc.body, code, body, tc.code, tc.says)
		}
	}
	for _, a := range []string{"bearer " + testToken, "BEARER " + testToken, "Bearer  " + testToken} {
		if code, _, body := callScale(t, srv.URL+a1Scale, http.MethodPost, `{"replicas":2}`, map[string]string{"Authorization": a}); code != http.StatusServiceUnavailable {
			t.Errorf("Authorization %.8q…: %d %s, want the token taken (503 at a follower)", a, code, body)
		}
	}
	for _, a := range []string{"Basic " + testToken, "Bearer", "Bearer" + testToken, testToken} {
		if code, _, body := callScale(t, srv.URL+a1Scale, http.MethodPost, `{"replicas":2}`, map[string]string{"Authorization": a}); code != http.StatusUnauthorized {
			t.Errorf("Authorization %.8q…: %d %s, want 401", a, code, body)
		}
	}
}

// TestScaleUserHeader: who asks (X-Gitfleet-User) goes into the status
// branch, NATS and the log, so it is taken only when it is sent once, at
// most 256 bytes, of printable characters; otherwise the request gets 400
// saying why.
func TestScaleUserHeader(t *testing.T) {
	srv := followerScaleAPI(t, NewMetrics(nil), zerolog.Nop())
	for _, tc := range []struct {
		name string
		user []string
		code int
		says string
	}{
		{"none", nil, 503, "does not lead"},
		{"a name", []string{"alice"}, 503, "does not lead"},
		{"not ASCII", []string{"José Müller"}, 503, "does not lead"},
		{"256 bytes", []string{strings.Repeat("a", 256)}, 503, "does not lead"},
		{"257 bytes", []string{strings.Repeat("a", 257)}, 400, "X-Gitfleet-User is 257 bytes long: at most 256 are taken"},
		{"a tab", []string{"al\tice"}, 400, "not printable (U+0009)"},
		{"a right-to-left override", []string{"alice\u202egpj.exe"}, 400, "not printable (U+202E)"},
		{"not UTF-8", []string{"al\xffice"}, 400, "X-Gitfleet-User is not UTF-8"},
		{"twice", []string{"alice", "bob"}, 400, "X-Gitfleet-User is sent 2 times: send it once"},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+a1Scale, strings.NewReader(`{"replicas":2}`))
		req.Header.Set("Authorization", "Bearer "+testToken)
		for _, u := range tc.user {
			req.Header.Add(UserHeader, u)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var answer struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&answer)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(answer.Error, tc.says) {
			t.Errorf("%s: %d %q; want %d, %q", tc.name, resp.StatusCode, answer.Error, tc.code, tc.says)
		}
	}
}
