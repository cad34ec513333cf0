package providers

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// progress is a shard's running task as the progress ticker sees it. The
// ticker sends in-progress acks every AckWait/3 so JetStream does not
// redeliver a task whose provider call is still running, and publishes the
// Provisioning/Deleting event once the call has taken ProgressAfter. One
// ticker per worker instead of timers per task keeps the fast path free of
// timer allocations.
type progress struct {
	w       *Worker
	mu      sync.Mutex
	active  bool
	msg     jetstream.Msg
	task    *wire.Task
	phase   wire.Phase
	started time.Time
	lastAck time.Time
	evSent  bool
	futs    []jetstream.PubAckFuture
}

// begin marks a task as running; with ProgressAfter < 0 its progress event
// is published at once.
func (p *progress) begin(msg jetstream.Msg, task *wire.Task, phase wire.Phase) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active, p.msg, p.task, p.phase, p.started, p.lastAck, p.evSent, p.futs = true, msg, task, phase, now, now, false, nil
	if p.w.o.ProgressAfter < 0 {
		p.publish()
	}
}

// end marks the task finished and returns the futures of the progress
// events published for it; after end, nothing more is published for it.
func (p *progress) end() []jetstream.PubAckFuture {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active, p.msg, p.task = false, nil, nil
	futs := p.futs
	p.futs = nil
	return futs
}

func (p *progress) publish() {
	p.evSent = true
	ev := p.w.event(p.task, p.phase)
	if f, err := p.w.publish(&ev); err == nil {
		p.futs = append(p.futs, f)
	}
}

func (p *progress) tick(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.active {
		return
	}
	if !p.evSent && p.w.o.ProgressAfter >= 0 && now.Sub(p.started) >= p.w.o.ProgressAfter {
		p.publish()
	}
	if now.Sub(p.lastAck) >= p.w.o.AckWait/3 {
		_ = p.msg.InProgress()
		p.lastAck = now
	}
}

// tickProgress runs until ctx ends, ticking often enough to meet both
// ProgressAfter and AckWait/3 within a quarter of the shorter.
func (w *Worker) tickProgress(ctx context.Context, slots []*progress) {
	every := w.o.AckWait / 3
	if w.o.ProgressAfter > 0 {
		every = min(every, w.o.ProgressAfter)
	}
	t := time.NewTicker(max(every/4, 5*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, s := range slots {
				s.tick(now)
			}
		}
	}
}
