package dashboard

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/reconciler/status"
)

// The /events streams share one poller of the status branch: however many
// are open, the branch is looked at once a Poll. More than MaxStreams are
// answered 503, and when the streams close, the poller and the streams'
// goroutines are gone.
func TestEventsShareOnePoller(t *testing.T) {
	repo := fleetRepo(t, 0, 0)
	var reads atomic.Int64
	const poll = 20 * time.Millisecond
	srv := httptest.NewServer(Handler(Options{Poll: poll, MaxStreams: 3, Source: func() (*status.Snapshot, error) {
		reads.Add(1)
		return status.Read(repo, "gitfleet/status")
	}}))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	baseline := runtime.NumGoroutine()

	open := func(ctx context.Context) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	firstEvent := func(res *http.Response) {
		t.Helper()
		if line, err := bufio.NewReader(res.Body).ReadString('\n'); err != nil || line != "event: status\n" {
			t.Fatalf("/events: %d %q %v", res.StatusCode, line, err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	for range 3 {
		firstEvent(open(ctx))
	}
	res := open(t.Context())
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("a fourth stream: %d, Retry-After %q, want 503", res.StatusCode, res.Header.Get("Retry-After"))
	}

	before, start := reads.Load(), time.Now()
	time.Sleep(15 * poll)
	n, polls := reads.Load()-before, int64(time.Since(start)/poll)
	if n > polls+2 {
		t.Errorf("3 streams read the status branch %d times in %d polls: each polls on its own", n, polls)
	}

	cancel() // the browsers go away
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after the streams closed, %d before:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
	quiet := reads.Load()
	time.Sleep(5 * poll)
	if reads.Load() != quiet {
		t.Errorf("the status branch is still polled with no stream open")
	}
	// A stream opened after: a new poller, the commit at once.
	res = open(t.Context())
	defer res.Body.Close()
	firstEvent(res)
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Errorf("Content-Type %q", res.Header.Get("Content-Type"))
	}
}
