package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

func TestWorkerNeedsAKnownProvider(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"worker"}, "--provider is required"},
		{[]string{"worker", "--provider", "vsphere"}, `--provider "vsphere": unknown provider (want inmemory, local or docker)`},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, &cmdEnv{stdout: &out, stderr: &errb})
		if code != 1 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// The worker command runs tasks from a real NATS and stops cleanly when its
// context ends (SIGTERM in main).
func TestWorkerCommandRunsTasksAndDrains(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv.ClientURL())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"worker", "--provider", "inmemory", "--worker-id", "w1", "--nats", srv.ClientURL(), "--concurrency", "2"},
			&cmdEnv{stdout: &bytes.Buffer{}, stderr: &errb})
	}()
	pub := natsbus.NewPublisher(js)
	task := wire.Task{ID: "t1", Operation: wire.OpCreate, Machine: wire.Machine{Name: "m", Cluster: "c", Provider: "inmemory", Version: "v1.30.0"}}
	natstest.Intend(t, js, task)
	if _, err := pub.Publish(ctx, &task); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, wire.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m, err := stream.GetLastMsgForSubject(ctx, wire.EventSubject("c", "w1")); err == nil {
			if ev, err := wire.DecodeEvent(m.Data); err == nil && ev.Phase == wire.PhaseRunning {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Running event in 20s; worker log:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("worker exit %d after cancel; log:\n%s", code, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop within 20s of cancel")
	}
	if !strings.Contains(errb.String(), "worker stopped") {
		t.Errorf("log does not say the worker stopped:\n%s", errb.String())
	}
}

// countingEngine passes every request on to the machine's real Docker
// Engine and counts the event streams open through it.
type countingEngine struct {
	proxy   *httputil.ReverseProxy
	streams atomic.Int32 // open
}

func (f *countingEngine) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/events") {
		f.streams.Add(1)
		defer f.streams.Add(-1)
	}
	f.proxy.ServeHTTP(rw, r)
}

// dockerTestImage is an image of one small file built from scratch here
// (nothing is pulled): enough for a docker worker's start, which checks
// that its image is on the Engine; no container is made from it.
const dockerTestImage = "gitfleet-empty:test"

// startCountingEngine points the docker provider at a proxy of the real
// Engine (the test is skipped where none answers) and builds
// dockerTestImage.
func startCountingEngine(t *testing.T) *countingEngine {
	t.Helper()
	if testing.Short() {
		t.Skip("uses the Docker Engine")
	}
	real, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Skipf("skipped: no Docker Engine (%v)", err)
	}
	t.Cleanup(func() { _ = real.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = real.Ping(ctx)
	cancel()
	if err != nil {
		t.Skipf("skipped: no Docker Engine answers (%v)", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY empty /empty\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("docker", "build", "-q", "-t", dockerTestImage, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	host, err := client.ParseHostURL(real.DaemonHost())
	if err != nil {
		t.Fatal(err)
	}
	f := &countingEngine{proxy: &httputil.ReverseProxy{
		// The real client's transport dials the Engine's socket,
		// whatever the request's host.
		Transport:     real.HTTPClient().Transport,
		FlushInterval: -1, // the event stream, as it comes
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker"
			if host.Scheme == "tcp" {
				r.Out.URL.Host = host.Host
			}
		},
	}}
	srv := httptest.NewServer(f)
	t.Cleanup(func() {
		srv.CloseClientConnections() // a stream left open would hold Close for ever
		srv.Close()
	})
	t.Setenv("DOCKER_HOST", "tcp://"+srv.Listener.Addr().String())
	return f
}

// stopsCleanly runs args until the Engine's event stream is open and the
// command logged started (its message), then stops it as SIGTERM does, and checks that it let go of the
// Engine: a stopped worker (or up) no longer follows the Engine's events.
// Before, the docker provider was never closed, and its watch and client
// lived until the process ended (in a test binary or a program embedding
// the command, for ever).
func stopsCleanly(t *testing.T, f *countingEngine, started string, args []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &cmdEnv{stdout: &bytes.Buffer{}, stderr: &errb}) }()
	for deadline := time.Now().Add(60 * time.Second); f.streams.Load() == 0 || !strings.Contains(errb.String(), started); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no event stream opened on the Engine, or no %q, within 60s; log:\n%s", started, errb.String())
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after the stop; log:\n%s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("did not stop within 30s; log:\n%s", errb.String())
	}
	for deadline := time.Now().Add(5 * time.Second); f.streams.Load() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the Engine's event streams still open 5s after %s stopped; want none", f.streams.Load(), args[0])
		}
	}
}

func TestAStoppedDockerWorkerLetsGoOfTheEngine(t *testing.T) {
	f := startCountingEngine(t)
	srv := natstest.Start(t)
	stopsCleanly(t, f, "worker started", []string{"worker", "--provider", "docker", "--docker-image", dockerTestImage, "--nats", srv.ClientURL(), "--data-dir", t.TempDir()})
}

func TestAStoppedUpLetsGoOfTheDockerEngine(t *testing.T) {
	f := startCountingEngine(t)
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "an empty fleet"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	stopsCleanly(t, f, "gitfleet daemon started", []string{"up", "--repo", repo, "--data-dir", t.TempDir(), "--listen", "", "--docker", "--docker-image", dockerTestImage})
}
