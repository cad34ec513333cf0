package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// feed serves /events: server-sent events, a "status" event with the
// status commit when a stream opens and whenever the status branch moves.
// The pages' script fetches the page again and swaps its main content, so
// it updates without a reload. One poller looks at the branch every poll
// for all the streams, and runs only while one is open; at most max
// streams are open at once.
type feed struct {
	source Source
	poll   time.Duration
	max    int

	mu   sync.Mutex
	subs map[chan string]struct{}
	last string             // the commit last sent; "" before the first
	stop context.CancelFunc // the poller's; nil when none runs
}

func newFeed(source Source, poll time.Duration, maxStreams int) *feed {
	return &feed{source: source, poll: poll, max: maxStreams, subs: map[chan string]struct{}{}}
}

func (f *feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	commits, ok := f.subscribe()
	if !ok {
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("%d live-update streams are open, the most this dashboard serves: reload the page to see it now", f.max), http.StatusServiceUnavailable)
		return
	}
	defer f.unsubscribe(commits)
	w.Header().Set("Content-Type", "text/event-stream")
	if w.Header().Get("Cache-Control") == "" { // no-store when private
		w.Header().Set("Cache-Control", "no-cache")
	}
	// The server's write timeout would end the stream: it ends itself.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case c := <-commits:
			fmt.Fprintf(w, "event: status\ndata: %s\n\n", c)
			flusher.Flush()
		}
	}
}

// subscribe adds a stream, which is sent the last commit at once if the
// poller has one, and starts the poller if none runs; false when max
// streams are open.
func (f *feed) subscribe() (chan string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) >= f.max {
		return nil, false
	}
	ch := make(chan string, 1)
	f.subs[ch] = struct{}{}
	if f.last != "" {
		ch <- f.last
	}
	if f.stop == nil {
		ctx, stop := context.WithCancel(context.Background())
		f.stop = stop
		go f.run(ctx)
	}
	return ch, true
}

// unsubscribe removes a stream, and stops the poller with the last one.
func (f *feed) unsubscribe(ch chan string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, ch)
	if len(f.subs) == 0 && f.stop != nil {
		f.stop()
		f.stop, f.last = nil, ""
	}
}

// run looks at the status branch every poll until ctx ends, and sends
// each new commit to every stream: the newest only, to a stream that has
// not taken the one before.
func (f *feed) run(ctx context.Context) {
	tick := time.NewTicker(f.poll)
	defer tick.Stop()
	for {
		if s, err := f.source(); err == nil {
			f.publish(ctx, s.Commit)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (f *feed) publish(ctx context.Context, commit string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil || commit == f.last {
		return // a poller stopped meanwhile: a newer one may run
	}
	f.last = commit
	for ch := range f.subs {
		select {
		case <-ch:
		default:
		}
		ch <- commit
	}
}
