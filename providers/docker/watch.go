package docker

import (
	"context"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/errdefs"
)

// How long the watch waits before it opens the Engine's event stream again
// after one ended: doubling from retryMin to retryMax, and from retryMin
// again once a stream has lasted retryMax.
var (
	retryMin = 500 * time.Millisecond
	retryMax = 30 * time.Second
)

// removedNews is how long a container the provider removed itself is
// remembered when its destroy event does not come (the stream was down).
const removedNews = time.Minute

// watch follows the Engine's events about the provider's containers, from
// the first Changed to Close.
type watch struct {
	changed chan struct{} // Changed: a container died or went outside a task
	mu      sync.Mutex
	cancel  context.CancelFunc // nil until Changed starts the watch
	done    chan struct{}      // closed when the watch goroutine returns
	closed  bool               // Close was called: no watch starts any more
}

// Changed implements providers.Watcher: it receives when one of the
// provider's containers dies or is removed and no Delete of the provider's
// did it (`docker rm -f`, `docker stop`, the node exited, the kernel's
// OOM killer), so the worker reports its inventory at once. The first
// call starts following the Engine's events; Close stops it.
func (p *Provider) Changed() <-chan struct{} {
	w := &p.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel == nil && !w.closed {
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel, w.done = cancel, make(chan struct{})
		go func() {
			defer close(w.done)
			p.follow(ctx)
		}()
	}
	return w.changed
}

// stopWatching ends the watch, if one runs, and waits for it.
func (p *Provider) stopWatching() {
	w := &p.watch
	w.mu.Lock()
	w.closed = true
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// tell wakes Changed's reader; one waiting already tells of both.
func (p *Provider) tell() {
	select {
	case p.watch.changed <- struct{}{}:
	default:
	}
}

// follow reads the Engine's event stream until ctx ends, opening it again
// with backoff whenever it ends: the Engine restarted, or the connection
// broke.
func (p *Provider) follow(ctx context.Context) {
	wait := retryMin
	for lost := false; ; lost = true {
		start := time.Now()
		err := p.stream(ctx, lost)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) >= retryMax {
			wait = retryMin // it ran a good while: this is a new failure
		}
		p.o.Log.Warn().Err(err).Dur("retry", wait).
			Msg("docker: the Engine's event stream ended; containers that stop are noticed by the inventory until it is back")
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, retryMax)
	}
}

// stream follows one event stream until it ends, and says why. After a
// stream that was lost, the Engine must answer a ping first, and then the
// worker is told to report its inventory: what died while nobody listened
// has no event to come (an Engine that restarted stopped its containers).
func (p *Provider) stream(ctx context.Context, lost bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the client's reading goroutine
	if lost {
		if _, err := p.cli.Ping(ctx); err != nil {
			return err
		}
	}
	msgs, errs := p.cli.Events(ctx, events.ListOptions{Filters: filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("event", string(events.ActionDie)), filters.Arg("event", string(events.ActionDestroy)),
		filters.Arg("label", LabelProvider+"="+Name), filters.Arg("label", LabelOwner+"="+p.o.Owner))})
	if lost {
		p.tell()
	}
	for {
		select {
		case m := <-msgs:
			p.event(ctx, m)
		case err := <-errs: // io.EOF when the Engine closed the stream
			return err
		}
	}
}

// event tells the worker of a container that died or went, unless the
// provider removed it itself.
func (p *Provider) event(ctx context.Context, m events.Message) {
	if m.Type != events.ContainerEventType || (m.Action != events.ActionDie && m.Action != events.ActionDestroy) {
		return
	}
	p.mu.Lock()
	_, ours := p.removing[m.Actor.ID]
	if ours && m.Action == events.ActionDestroy {
		delete(p.removing, m.Actor.ID) // its last event
	}
	p.mu.Unlock()
	if ours {
		return
	}
	p.o.Log.Info().Str("cluster", m.Actor.Attributes[LabelCluster]).Str("machine", m.Actor.Attributes[LabelMachine]).
		Str("event", string(m.Action)).Str("exitCode", m.Actor.Attributes["exitCode"]).
		Msg("docker: a machine's container stopped outside a task")
	if m.Action == events.ActionDie {
		// The Engine sends die before its list shows the container
		// stopped (it updates that view after, holding the container's
		// lock): a List at once could still call it running. Inspect waits
		// for that lock.
		ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, _ = p.cli.ContainerInspect(ictx, m.Actor.ID)
		cancel()
	}
	p.tell()
}

// remove removes container id (forced: a running one is killed first) as
// the provider's own doing, whose die and destroy events are no news. A
// removal that failed is forgotten at once: the container is still there,
// and should it stop outside a task later, that is news. A container
// already gone is no error.
func (p *Provider) remove(ctx context.Context, id string) error {
	p.removes(id)
	err := p.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	if err == nil || errdefs.IsNotFound(err) {
		return nil
	}
	p.mu.Lock()
	delete(p.removing, id)
	p.mu.Unlock()
	return err
}

// removes says that the provider removes container id itself: its die and
// destroy events are no news. It is forgotten at its destroy event, or
// after removedNews when that never comes, or when the removal failed
// (remove).
func (p *Provider) removes(id string) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, at := range p.removing {
		if now.Sub(at) > removedNews {
			delete(p.removing, k)
		}
	}
	p.removing[id] = now
}
