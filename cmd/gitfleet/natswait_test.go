package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/internal/freeport"
	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
	"github.com/gitfleet/gitfleet/sources"
)

// syncBuffer is a log a command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWorkerWaitsForNATS: a worker started before its NATS server waits,
// saying so, and works once the server is up: it does not exit.
func TestWorkerWaitsForNATS(t *testing.T) {
	srv := natstest.StartProcess(t)
	srv.Kill() // its port, with nothing listening yet
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"worker", "--provider", "inmemory", "--worker-id", "w1", "--nats", srv.URL(), "--log-format", "json"},
			&cmdEnv{stdout: io.Discard, stderr: &errb})
	}()
	waitUntil(t, "the worker says it waits for NATS", func() bool { return strings.Contains(errb.String(), "waiting for NATS") })
	select {
	case code := <-done:
		t.Fatalf("the worker exited (%d) while NATS was down:\n%s", code, errb.String())
	default:
	}
	srv.Start()
	_, js := natstest.Connect(t, srv.URL())
	waitUntil(t, "the worker starts", func() bool { return strings.Contains(errb.String(), "worker started") })
	task := wire.Task{ID: "t1", Operation: wire.OpCreate, Machine: wire.Machine{Name: "m", Cluster: "c", Provider: "inmemory", Version: "v1.30.0"}}
	runTask(t, ctx, js, task, "w1")
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("worker exit %d:\n%s", code, errb.String())
	}
}

// runTask publishes task, as the daemon does (its record first), and
// waits for its Running event on worker's subject.
func runTask(t *testing.T, ctx context.Context, js jetstream.JetStream, task wire.Task, worker string) {
	t.Helper()
	natstest.Intend(t, js, task)
	if _, err := natsbus.NewPublisher(js).Publish(ctx, &task); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, wire.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the task is done, its event on "+wire.EventSubject(task.Machine.Cluster, worker), func() bool {
		m, err := stream.GetLastMsgForSubject(ctx, wire.EventSubject(task.Machine.Cluster, worker))
		if err != nil {
			return false
		}
		ev, err := wire.DecodeEvent(m.Data)
		return err == nil && ev.Phase == wire.PhaseRunning
	})
}

// TestServeWaitsForNATS: gitfleet serve started before its NATS server
// serves /readyz at once, failing with why, and becomes ready once NATS
// is up.
func TestServeWaitsForNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	srv := natstest.StartProcess(t)
	srv.Kill()
	repo := filepath.Join(t.TempDir(), "fleet")
	if code, _, stderr := runCmd(t, "init", repo); code != 0 {
		t.Fatalf("init: %s", stderr)
	}
	listen := "127.0.0.1:" + freeTCPPort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--repo", repo, "--nats", srv.URL(), "--data-dir", t.TempDir(),
			"--listen", listen, "--log-format", "json"}, &cmdEnv{stdout: io.Discard, stderr: &errb})
	}()
	readyz := func() (int, string) { return httpGet("http://" + listen + "/readyz") }
	waitUntil(t, "/readyz says it waits for NATS", func() bool {
		code, body := readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "waiting for NATS")
	})
	srv.Start()
	waitUntil(t, "/readyz ok once NATS is up", func() bool { code, _ := readyz(); return code == http.StatusOK })
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exit %d:\n%s", code, errb.String())
	}
}

func freeTCPPort(t *testing.T) string {
	t.Helper()
	return strconv.Itoa(freeport.Port(t))
}

// startServe runs gitfleet serve, with args, on a new fleet repository
// until the test ends, and returns its --listen address once it listens.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "fleet")
	if code, _, stderr := runCmd(t, "init", repo); code != 0 {
		t.Fatalf("init: %s", stderr)
	}
	listen := "127.0.0.1:" + freeTCPPort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--repo", repo, "--data-dir", t.TempDir(), "--listen", listen, "--log-level", "error"}, args...),
			&cmdEnv{stdout: io.Discard, stderr: io.Discard})
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitUntil(t, "serve listens", func() bool {
		c, err := net.Dial("tcp", listen)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return listen
}

// TestSlowClientIsCutOff: a client that sends its webhook body a byte at
// a time is disconnected by the daemon's HTTP server instead of holding a
// connection open, and /metrics counts it.
func TestSlowClientIsCutOff(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	listen := startServe(t, "--webhook-secret", "s3cret")
	conn, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("POST /hooks/git HTTP/1.1\r\nHost: x\r\nX-Gitlab-Token: s3cret\r\nContent-Length: 100000\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, conn) // returns when the server closes
	}()
	// A byte every 100 ms: 100,000 bytes would take almost three hours.
sending:
	for i := 0; ; i++ {
		select {
		case <-closed:
			break sending
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := conn.Write([]byte("x")); err != nil {
			break sending // the server closed the connection
		}
		if i > 600 {
			t.Fatal("a slow client held its connection for a minute")
		}
	}
	if _, body := httpGet("http://" + listen + "/metrics"); !strings.Contains(body, `gitfleet_webhook_requests_total{outcome="slow"} 1`) {
		t.Errorf("/metrics does not count the slow request:\n%s", body)
	}
}

// TestWebhookOutcomesAreExportedFromTheStart: a daemon that serves the
// webhook exports every outcome's counter at 0 before any request, so
// that Prometheus's increase() sees a replica's first accepted push (it
// counts no jump from a missing series) and the GitfleetWebhookRefused
// alert is held back by it.
func TestWebhookOutcomesAreExportedFromTheStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	listen := startServe(t, "--webhook-secret", "s3cret")
	_, body := httpGet("http://" + listen + "/metrics")
	for _, outcome := range sources.WebhookOutcomes {
		if want := `gitfleet_webhook_requests_total{outcome="` + outcome + `"} 0`; !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s before any request", want)
		}
	}
}

// TestReadyzSaysLeaderAndFollower: two serve replicas on one NATS server
// are both ready, one as the leader and the other as its follower, each
// saying so; once the leader stops, the follower takes over and says it
// leads.
func TestReadyzSaysLeaderAndFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two daemons")
	}
	srv := natstest.StartProcess(t)
	repo := filepath.Join(t.TempDir(), "fleet")
	if code, _, stderr := runCmd(t, "init", repo); code != 0 {
		t.Fatalf("init: %s", stderr)
	}
	key := filepath.Join(t.TempDir(), "secrets.key") // the replicas share it
	if err := pki.NewKeyFile(key); err != nil {
		t.Fatal(err)
	}
	type replica struct {
		listen string
		cancel context.CancelFunc
		done   chan int
	}
	start := func(name string) *replica {
		r := &replica{listen: "127.0.0.1:" + freeTCPPort(t), done: make(chan int, 1)}
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		go func() {
			r.done <- run(ctx, []string{"serve", "--repo", repo, "--nats", srv.URL(), "--data-dir", t.TempDir(),
				"--listen", r.listen, "--replica", name, "--log-format", "json", "--secrets-key-file", key}, &cmdEnv{stdout: io.Discard, stderr: io.Discard})
		}()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	readyz := func(r *replica) (int, string) {
		code, body := httpGet("http://" + r.listen + "/readyz")
		return code, strings.TrimSpace(body)
	}
	r1 := start("r1")
	waitUntil(t, "r1 leads", func() bool { code, body := readyz(r1); return code == http.StatusOK && body == "ok: leader" })
	r2 := start("r2")
	waitUntil(t, "r2 follows r1", func() bool { code, body := readyz(r2); return code == http.StatusOK && body == "ok: follower of r1" })
	r1.cancel()
	<-r1.done
	r1.done <- 0 // for the cleanup
	waitUntil(t, "r2 leads once r1 stopped", func() bool { code, body := readyz(r2); return code == http.StatusOK && body == "ok: leader" })
}

// TestWorkerServesHealthAndMetrics: gitfleet worker --listen serves
// /healthz, /readyz and /metrics, where gitfleet_worker_tasks_total counts
// the task it ran.
func TestWorkerServesHealthAndMetrics(t *testing.T) {
	srv := natstest.StartProcess(t)
	listen := "127.0.0.1:" + freeTCPPort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"worker", "--provider", "inmemory", "--nats", srv.URL(), "--listen", listen, "--log-format", "json"},
			&cmdEnv{stdout: io.Discard, stderr: &errb})
	}()
	get := func(path string) (int, string) { return httpGet("http://" + listen + path) }
	waitUntil(t, "/readyz ok", func() bool { code, _ := get("/readyz"); return code == http.StatusOK })
	if code, body := get("/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	_, js := natstest.Connect(t, srv.URL())
	task := wire.Task{ID: "t1", Operation: wire.OpCreate, Machine: wire.Machine{Name: "m", Cluster: "c", Provider: "inmemory", Version: "v1.30.0"}}
	natstest.Intend(t, js, task)
	if _, err := natsbus.NewPublisher(js).Publish(ctx, &task); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "/metrics counts the task", func() bool {
		_, body := get("/metrics")
		return strings.Contains(body, `gitfleet_worker_tasks_total{outcome="succeeded",provider="inmemory"} 1`)
	})
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("worker exit %d:\n%s", code, errb.String())
	}
}

// httpGet returns a GET's status and body (0 and the error when it fails).
func httpGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
