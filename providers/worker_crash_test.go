package providers_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A worker whose connection dies in the middle of a create never acks; the
// task is redelivered to another worker and the end state is one machine.
// (providers/local tests the same with a SIGKILLed worker process.)
func TestWorkerLostMidCreateIsRedelivered(t *testing.T) {
	e := newEnv(t)
	p := &gated{Provider: e.inmemory(t, inmemory.Options{}), gate: make(chan struct{})}
	opts := providers.WorkerOptions{AckWait: 500 * time.Millisecond}

	nc1, js1 := natstest.Connect(t, e.srv.ClientURL())
	w1, err := providers.NewWorker(testCtx(t), js1, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = w1.Run(context.Background()) }()
	t.Cleanup(w1.Close)

	events := e.events(t)
	e.publish(t, task(wire.OpCreate, inmemory.Name, "c1", "m-1", ""))
	eventually(t, "the first worker started the create", func() bool { return p.calls.Load() == 1 })
	nc1.Close() // the worker is gone as far as NATS can tell
	close(p.gate)

	w2 := e.startWorker(t, p, opts)
	seen := waitPhases(t, events, wire.PhaseRunning, "c1/m-1")
	if p.calls.Load() != 2 {
		t.Errorf("Create called %d times; want 2 (the lost attempt, then the redelivery)", p.calls.Load())
	}
	list, _ := p.List(testCtx(t))
	if len(list) != 1 {
		t.Errorf("machines after the redelivery: %v; want exactly one", list)
	}
	// A task is counted once its event is published: just after it.
	eventually(t, "the task counted", func() bool { return w2.Stats().Succeeded >= 1 })
	if s := w2.Stats(); s.Succeeded != 1 {
		t.Errorf("second worker stats %+v; want it to finish the task", s)
	}
	t.Logf("events: %v", phases(seen["c1/m-1"]))
	eventually(t, "task acked", func() bool { return e.taskCount(t) == 0 })
}

// The NATS server restarted on the same store while tasks are queued: no
// task is lost, and the worker reconnects and finishes them all.
func TestWorkerSurvivesServerRestart(t *testing.T) {
	e := newEnv(t)
	p := e.inmemory(t, inmemory.Options{ProvisioningDelay: 5 * time.Millisecond})
	e.startWorker(t, p, providers.WorkerOptions{Concurrency: 1, AckWait: 2 * time.Second})
	const n = 200
	var tasks []wire.Task
	var names []string
	for i := range n {
		name := fmt.Sprintf("m-%03d", i)
		tasks = append(tasks, task(wire.OpCreate, inmemory.Name, "c1", name, ""))
		names = append(names, "c1/"+name)
	}
	e.publish(t, tasks...)
	eventually(t, "some tasks done", func() bool { return count(t, p) >= 10 })
	e.srv.Restart()
	if done := count(t, p); done == n {
		t.Fatalf("all %d tasks finished before the restart; the test proves nothing", n)
	} else {
		t.Logf("%d of %d tasks done at the restart", done, n)
	}
	eventually(t, "every machine created after the restart", func() bool { return count(t, p) == n })
	eventually(t, "every task acked", func() bool { return e.taskCount(t) == 0 })
	waitPhases(t, e.events(t), wire.PhaseRunning, names...)
}

// gated holds every Create until gate is closed, and counts calls.
type gated struct {
	providers.Provider
	gate  chan struct{}
	calls atomic.Int64
}

func (g *gated) Create(ctx context.Context, m wire.Machine) (providers.Instance, error) {
	g.calls.Add(1)
	select {
	case <-g.gate:
	case <-ctx.Done():
		return providers.Instance{}, ctx.Err()
	}
	return g.Provider.Create(ctx, m)
}
