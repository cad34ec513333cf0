package docker

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/client"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/providers/providertest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A machine's container that dies or is removed behind the provider's back
// is reported by its worker at once — not at the next inventory interval
// (an hour here) nor after the heartbeat timeout — and one the provider
// deletes itself is no news.
func TestAStoppedContainerIsReportedAtOnce(t *testing.T) {
	needDocker(t)
	p := newTestProvider(t)
	p.o.Log = zerolog.New(zerolog.NewTestWriter(t)) // shown when the test fails
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	machines := map[string]wire.Machine{}
	for _, name := range []string{"c1-killed", "c1-removed", "c1-deleted"} {
		m := providertest.Machine(p, "c1", name)
		if _, err := p.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		machines[name] = m
	}

	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv.ClientURL())
	reports := natstest.Inventories(t, nc)
	w, err := providers.NewWorker(ctx, js, p, providers.WorkerOptions{ID: "w-docker", InventoryInterval: time.Hour, Log: p.o.Log})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		w.Close()
		if err := <-errc; err != nil {
			t.Errorf("worker Run: %v", err)
		}
	})
	next := func(d time.Duration, what string, want func(map[string]wire.Instance) bool) {
		t.Helper()
		if !natstest.NextInventory(reports, d, want) {
			t.Fatalf("no inventory %s within %s (interval 1h)", what, d)
		}
	}
	next(30*time.Second, "at the worker's start", func(map[string]wire.Instance) bool { return true })

	// A delete of the provider's own is no news.
	if err := p.Delete(ctx, machines["c1-deleted"]); err != nil {
		t.Fatal(err)
	}
	select {
	case inv := <-reports:
		t.Errorf("an inventory after the provider's own delete: %+v", inv)
	case <-time.After(2 * time.Second):
	}

	// The node dies (docker kill): the machine is reported not running.
	if err := p.cli.ContainerKill(ctx, ContainerName("c1", "c1-killed"), "KILL"); err != nil {
		t.Fatal(err)
	}
	next(10*time.Second, "listing the killed container as ContainerNotRunning", func(got map[string]wire.Instance) bool {
		return got["c1-killed"].Reason == "ContainerNotRunning"
	})

	// docker rm -f: the machine is missing from the report.
	if err := p.cli.ContainerRemove(ctx, ContainerName("c1", "c1-removed"), container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	next(10*time.Second, "without the removed container", func(got map[string]wire.Instance) bool {
		_, there := got["c1-removed"]
		return !there
	})
}

// fakeEngine answers the Docker API's ping and serves event streams: the
// first sends a die event and ends when endFirst is closed; the others
// stay open until their client goes.
type fakeEngine struct {
	endFirst chan struct{}
	streams  atomic.Int32 // opened
	open     atomic.Int32 // still open
}

func (f *fakeEngine) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	rw.Header().Set("Api-Version", "1.41")
	if !strings.HasSuffix(r.URL.Path, "/events") {
		return // the ping
	}
	n := f.streams.Add(1)
	f.open.Add(1)
	defer f.open.Add(-1)
	rw.WriteHeader(http.StatusOK)
	if n == 1 {
		_ = json.NewEncoder(rw).Encode(events.Message{Type: events.ContainerEventType, Action: events.ActionDie,
			Actor: events.Actor{ID: "abc", Attributes: map[string]string{LabelMachine: "m-1", "exitCode": "137"}}})
		rw.(http.Flusher).Flush()
		<-f.endFirst
		return
	}
	rw.(http.Flusher).Flush()
	<-r.Context().Done()
}

// The Engine's event stream ends (the Engine restarted, the connection
// broke): the watch opens it again, and has the worker report its
// inventory then, since what died meanwhile has no event to come. Close
// ends the watch and its stream, and no watch starts after it.
func TestTheWatchOutlivesItsEventStream(t *testing.T) {
	f := &fakeEngine{endFirst: make(chan struct{})}
	engine := httptest.NewServer(f)
	defer engine.Close()
	t.Setenv("DOCKER_HOST", "tcp://"+engine.Listener.Addr().String())
	p, err := New(Options{SeedDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	changed := p.Changed()
	wait := func(why string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("Changed did not receive for %s; streams opened: %d", why, f.streams.Load())
		}
	}
	wait("the die event")
	close(f.endFirst)
	wait("the stream opened again")
	for deadline := time.Now().Add(5 * time.Second); f.open.Load() != 1 || f.streams.Load() != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams open, of %d opened; want the second one open", f.open.Load(), f.streams.Load())
		}
	}
	select {
	case <-changed:
		t.Errorf("Changed received with nothing new")
	case <-time.After(500 * time.Millisecond):
	}
	closed := make(chan error)
	go func() { closed <- p.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the watch within 5s")
	}
	for deadline := time.Now().Add(5 * time.Second); f.open.Load() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the event stream is still open after Close")
		}
	}
	_ = p.Changed()
	time.Sleep(200 * time.Millisecond)
	if n := f.streams.Load(); n != 2 {
		t.Errorf("%d streams opened; want 2 (none after Close)", n)
	}
}

// failingEngine passes every request on to the real Engine, except that
// it answers a container's removal with the Engine's error for one it
// could not remove while failRemove is set.
type failingEngine struct {
	proxy      *httputil.ReverseProxy
	failRemove atomic.Bool
}

func newFailingEngine(t *testing.T) *failingEngine {
	t.Helper()
	real, err := client.NewClientWithOpts(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = real.Close() })
	host, err := client.ParseHostURL(real.DaemonHost())
	if err != nil {
		t.Fatal(err)
	}
	f := &failingEngine{proxy: &httputil.ReverseProxy{
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
	return f
}

func (f *failingEngine) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/containers/") && f.failRemove.Load() {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusInternalServerError)
		_, _ = rw.Write([]byte(`{"message": "driver overlay2 failed to remove root filesystem: device or resource busy"}`))
		return
	}
	f.proxy.ServeHTTP(rw, r)
}

// A Delete whose removal the Engine refused leaves the container running,
// and when it then stops outside a task (the node dies, docker stop), the
// worker reports it at once, as any other: before, the failed removal
// hid the container's die for a minute, and a machine that died in that
// minute went unreported until the next inventory or the heartbeat
// timeout.
func TestAFailedRemoveHidesNoLaterStop(t *testing.T) {
	needDocker(t)
	f := newFailingEngine(t)
	engine := httptest.NewServer(f)
	t.Cleanup(engine.Close) // after the provider's cleanup, which goes through it
	t.Setenv("DOCKER_HOST", "tcp://"+engine.Listener.Addr().String())
	p := newTestProvider(t)
	p.o.Log = zerolog.New(zerolog.NewTestWriter(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := providertest.Machine(p, "c1", "c1-busy")
	if _, err := p.Create(ctx, m); err != nil {
		t.Fatal(err)
	}

	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv.ClientURL())
	reports := natstest.Inventories(t, nc)
	w, err := providers.NewWorker(ctx, js, p, providers.WorkerOptions{ID: "w-docker", InventoryInterval: time.Hour, Log: p.o.Log})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		w.Close()
		if err := <-errc; err != nil {
			t.Errorf("worker Run: %v", err)
		}
	})
	if !natstest.NextInventory(reports, 30*time.Second, func(map[string]wire.Instance) bool { return true }) {
		t.Fatal("no inventory at the worker's start")
	}

	f.failRemove.Store(true)
	if err := p.Delete(ctx, m); err == nil || providers.IsPermanent(err) {
		t.Fatalf("Delete with the Engine refusing the removal: %v; want an error to retry", err)
	}
	f.failRemove.Store(false)
	c, err := p.cli.ContainerInspect(ctx, ContainerName("c1", m.Name))
	if err != nil || c.State == nil || !c.State.Running {
		t.Fatalf("the container after the failed removal: %+v, %v; want it still running", c.State, err)
	}

	// The node dies outside any task.
	if err := p.cli.ContainerKill(ctx, c.ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	if !natstest.NextInventory(reports, 10*time.Second, func(got map[string]wire.Instance) bool {
		return got[m.Name].Reason == "ContainerNotRunning"
	}) {
		t.Fatal("the container that died after a failed removal was not reported within 10s (interval 1h)")
	}
}
