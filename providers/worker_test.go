package providers_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

func TestWorkerCreatesThenDeletes(t *testing.T) {
	e := newEnv(t)
	p := e.inmemory(t, inmemory.Options{})
	w := e.startWorker(t, p, providers.WorkerOptions{ProgressAfter: -1})
	events := e.events(t)

	e.publish(t, task(wire.OpCreate, inmemory.Name, "c1", "cp-0", ""), task(wire.OpCreate, inmemory.Name, "c1", "md-0-a", ""))
	seen := waitPhases(t, events, wire.PhaseRunning, "c1/cp-0", "c1/md-0-a")
	if got, want := phases(seen["c1/cp-0"]), []wire.Phase{wire.PhaseProvisioning, wire.PhaseRunning}; !slices.Equal(got, want) {
		t.Errorf("events of c1/cp-0: %v; want %v", got, want)
	}
	run := seen["c1/cp-0"][1]
	if run.ProviderID != "inmemory://c1/cp-0" || run.Version != "v1.30.2" || run.TaskID == "" {
		t.Errorf("Running event = %+v; want provider ID, version and task ID", run)
	}
	if count(t, p) != 2 {
		t.Errorf("provider has %d machines; want 2", count(t, p))
	}

	e.publish(t, task(wire.OpDelete, inmemory.Name, "c1", "cp-0", ""))
	seen = waitPhases(t, events, wire.PhaseDeleted, "c1/cp-0")
	if got, want := phases(seen["c1/cp-0"]), []wire.Phase{wire.PhaseDeleting, wire.PhaseDeleted}; !slices.Equal(got, want) {
		t.Errorf("events of deleting c1/cp-0: %v; want %v", got, want)
	}
	eventually(t, "every task acked and removed from the work queue", func() bool { return e.taskCount(t) == 0 })
	if count(t, p) != 1 {
		t.Errorf("provider has %d machines after the delete; want 1", count(t, p))
	}
	if s := w.Stats(); s.Succeeded != 3 || s.Malformed+s.Failed+s.Retried != 0 {
		t.Errorf("stats = %+v; want 3 succeeded and nothing else", s)
	}
}

func TestWorkerTerminatesMalformedAndContinues(t *testing.T) {
	e := newEnv(t)
	p := e.inmemory(t, inmemory.Options{})
	w := e.startWorker(t, p, providers.WorkerOptions{Concurrency: 1})
	events := e.events(t)
	ctx := testCtx(t)
	subj := wire.TaskSubject(inmemory.Name, "c1", "m-1")
	for _, bad := range []string{
		`not json at all`,
		`{"apiVersion": "gitfleet.io/wire/v0", "id": "old", "operation": "create"}`,
		`{"apiVersion": "gitfleet.io/wire/v1", "id": "x", "operation": "explode", "machine": {"name": "m-1", "cluster": "c1"}}`,
		`{"apiVersion": "gitfleet.io/wire/v1", "id": "y", "operation": "create", "machine": {"name": "other", "cluster": "c1"}}`,
	} {
		if _, err := e.js.Publish(ctx, subj, []byte(bad)); err != nil {
			t.Fatal(err)
		}
	}
	e.publish(t, task(wire.OpCreate, inmemory.Name, "c1", "m-1", ""))
	waitPhases(t, events, wire.PhaseRunning, "c1/m-1")
	eventually(t, "malformed tasks terminated and removed", func() bool { return e.taskCount(t) == 0 })
	if s := w.Stats(); s.Malformed != 4 || s.Succeeded != 1 {
		t.Errorf("stats = %+v; want 4 malformed and 1 succeeded", s)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(w.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					got[mf.GetName()+"/"+l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	if got["gitfleet_worker_tasks_total/malformed"] != 4 || got["gitfleet_worker_tasks_total/succeeded"] != 1 {
		t.Errorf("prometheus counters %v; want malformed 4, succeeded 1", got)
	}
}

func TestWorkerPermanentFailureIsFailedEvent(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(t, e.inmemory(t, inmemory.Options{}), providers.WorkerOptions{})
	events := e.events(t)
	e.publish(t, task(wire.OpCreate, inmemory.Name, "c1", "doomed", `{"failureRate": 1}`))
	seen := waitPhases(t, events, wire.PhaseFailed, "c1/doomed")
	last := seen["c1/doomed"][len(seen["c1/doomed"])-1]
	if !strings.Contains(last.Message, "simulated provisioning failure") {
		t.Errorf("Failed event message %q; want the provider's error", last.Message)
	}
	eventually(t, "failed task terminated", func() bool { return e.taskCount(t) == 0 })
	if s := w.Stats(); s.Failed != 1 || s.Retried != 0 {
		t.Errorf("stats = %+v; want 1 failed, no retries", s)
	}
}

// verbose fails every Create permanently with a very long message, as a
// cloud API that returns its whole response body might.
type verbose struct{ providers.Provider }

func (verbose) Create(context.Context, wire.Machine) (providers.Instance, error) {
	return providers.Instance{}, providers.Permanent(errors.New("cloud API said 400: " + strings.Repeat("details ", 100<<10/8)))
}

// An error longer than an event may carry (the event stream refuses
// messages over 64 KiB) is cut: the Failed event is stored and the task
// ends, instead of the event being refused and the task retried for as
// long as the stream keeps it.
func TestWorkerCutsLongErrors(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(t, verbose{e.inmemory(t, inmemory.Options{})}, providers.WorkerOptions{})
	events := e.events(t)
	e.publish(t, task(wire.OpCreate, inmemory.Name, "c1", "told", ""))
	seen := waitPhases(t, events, wire.PhaseFailed, "c1/told")
	last := seen["c1/told"][len(seen["c1/told"])-1]
	if !strings.Contains(last.Message[:min(len(last.Message), 64)], "cloud API said 400: details") || len(last.Message) > 9<<10 || !strings.Contains(last.Message, "bytes cut") {
		t.Errorf("Failed event message of %d bytes, starting %.40q; want the error's start, cut to at most 8 KiB, saying so", len(last.Message), last.Message)
	}
	eventually(t, "failed task terminated", func() bool { return e.taskCount(t) == 0 })
	if s := w.Stats(); s.Failed != 1 || s.Retried != 0 {
		t.Errorf("stats = %+v; want 1 failed, no retries", s)
	}
}

// flaky fails its first n Creates with a transient error and counts calls.
type flaky struct {
	providers.Provider
	fail  atomic.Int64
	calls atomic.Int64
}

func (f *flaky) Create(ctx context.Context, m wire.Machine) (providers.Instance, error) {
	f.calls.Add(1)
	if f.fail.Add(-1) >= 0 {
		return providers.Instance{}, providers.Transient(errors.New("cloud API said 503"))
	}
	return f.Provider.Create(ctx, m)
}

func TestWorkerRetriesTransientErrors(t *testing.T) {
	e := newEnv(t)
	p := &flaky{Provider: e.inmemory(t, inmemory.Options{})}
	p.fail.Store(2)
	var delays []int
	w := e.startWorker(t, p, providers.WorkerOptions{Concurrency: 1, Backoff: func(attempt int) time.Duration {
		delays = append(delays, attempt)
		return 20 * time.Millisecond
	}})
	events := e.events(t)
	e.publish(t, task(wire.OpCreate, inmemory.Name, "c1", "m-1", ""))
	waitPhases(t, events, wire.PhaseRunning, "c1/m-1")
	// A task is counted once its event is published: just after it.
	eventually(t, "the task counted", func() bool { return w.Stats().Succeeded >= 1 })
	if s := w.Stats(); s.Retried != 2 || s.Succeeded != 1 {
		t.Errorf("stats = %+v; want 2 retries then success", s)
	}
	if !slices.Equal(delays, []int{1, 2}) {
		t.Errorf("backoff asked for attempts %v; want [1 2]", delays)
	}
}

func TestWorkerGivesUpAfterMaxAttempts(t *testing.T) {
	e := newEnv(t)
	p := &flaky{Provider: e.inmemory(t, inmemory.Options{})}
	p.fail.Store(100)
	w := e.startWorker(t, p, providers.WorkerOptions{MaxAttempts: 3, Backoff: func(int) time.Duration { return time.Millisecond }})
	events := e.events(t)
	e.publish(t, task(wire.OpCreate, inmemory.Name, "c1", "m-1", ""))
	seen := waitPhases(t, events, wire.PhaseFailed, "c1/m-1")
	if msg := seen["c1/m-1"][len(seen["c1/m-1"])-1].Message; !strings.Contains(msg, "503") {
		t.Errorf("Failed message %q; want the last error", msg)
	}
	if p.calls.Load() != 3 {
		t.Errorf("provider called %d times; want 3 attempts", p.calls.Load())
	}
	eventually(t, "task terminated", func() bool { return e.taskCount(t) == 0 })
	if s := w.Stats(); s.Failed != 1 || s.Retried != 2 {
		t.Errorf("stats = %+v; want 2 retries then 1 failure", s)
	}
}

func TestWorkerInProgressAcksPreventRedelivery(t *testing.T) {
	e := newEnv(t)
	p := &flaky{Provider: e.inmemory(t, inmemory.Options{ProvisioningDelay: 2500 * time.Millisecond})}
	e.startWorker(t, p, providers.WorkerOptions{AckWait: time.Second, ProgressAfter: 100 * time.Millisecond})
	events := e.events(t)
	e.publish(t, task(wire.OpCreate, inmemory.Name, "c1", "slow", ""))
	seen := waitPhases(t, events, wire.PhaseRunning, "c1/slow")
	if got, want := phases(seen["c1/slow"]), []wire.Phase{wire.PhaseProvisioning, wire.PhaseRunning}; !slices.Equal(got, want) {
		t.Errorf("events: %v; want %v", got, want)
	}
	if n := p.calls.Load(); n != 1 {
		t.Errorf("Create called %d times for one 2.5s task with a 1s AckWait; want 1 (in-progress acks)", n)
	}
}

func TestWorkerFastCallSkipsProgressEvent(t *testing.T) {
	e := newEnv(t)
	e.startWorker(t, e.inmemory(t, inmemory.Options{}), providers.WorkerOptions{})
	events := e.events(t)
	e.publish(t, task(wire.OpCreate, inmemory.Name, "c1", "fast", ""))
	seen := waitPhases(t, events, wire.PhaseRunning, "c1/fast")
	if got := phases(seen["c1/fast"]); !slices.Equal(got, []wire.Phase{wire.PhaseRunning}) {
		t.Errorf("events: %v; want only Running for a call faster than the default ProgressAfter", got)
	}
}

// Tasks of one machine run in stream order: a delete published right
// after its create either follows the finished create, or finds the create
// stale (the record already says delete) and runs alone; a machine is never
// Running after it was Deleted.
func TestWorkerKeepsEventsOfAMachineInOrder(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker(t, e.inmemory(t, inmemory.Options{ProvisioningDelayMax: 3 * time.Millisecond}), providers.WorkerOptions{Concurrency: 4, ProgressAfter: -1})
	events := e.events(t)
	var machines []string
	for i := range 5 {
		for _, m := range []string{"a", "b", "c"} {
			name := fmt.Sprintf("%s-%d", m, i)
			machines = append(machines, name)
			e.publish(t, task(wire.OpCreate, inmemory.Name, "c1", name, ""))
			e.publish(t, task(wire.OpDelete, inmemory.Name, "c1", name, ""))
		}
	}
	seen := map[string][]wire.Phase{}
	timeout := time.After(30 * time.Second)
	for done := 0; done < len(machines); {
		select {
		case ev := <-events:
			seen[ev.Machine] = append(seen[ev.Machine], ev.Phase)
			if ev.Phase == wire.PhaseDeleted {
				done++
			}
		case <-timeout:
			t.Fatalf("timed out; saw %v", seen)
		}
	}
	full := []wire.Phase{wire.PhaseProvisioning, wire.PhaseRunning, wire.PhaseDeleting, wire.PhaseDeleted}
	for _, m := range machines {
		if got := seen[m]; !slices.Equal(got, full) && !slices.Equal(got, full[2:]) {
			t.Errorf("events of %s: %v; want a create then its delete, or the delete alone", m, got)
		}
	}
	// A task is counted once its event is published, so the last one's
	// count may follow its event by a moment.
	eventually(t, "every task either ran or was dropped as stale", func() bool {
		st := w.Stats()
		return int(st.Succeeded+st.Stale) == 2*len(machines)
	})
	time.Sleep(100 * time.Millisecond)
	if st := w.Stats(); int(st.Succeeded+st.Stale) != 2*len(machines) {
		t.Errorf("stats %+v: every task either ran or was dropped as stale, once", st)
	}
}

// A task its record no longer names — an older attempt, another task, a
// machine with no record, a create already done — is dropped without a
// provider call, as a task an older leader or a paused worker held would
// be. An orphan delete runs only when no record wants the machine.
func TestWorkerDropsStaleTasks(t *testing.T) {
	e := newEnv(t)
	p := e.inmemory(t, inmemory.Options{})
	w := e.startWorker(t, p, providers.WorkerOptions{})
	events := e.events(t)

	old := task(wire.OpCreate, inmemory.Name, "c1", "retried", "")
	old.Attempt = 1
	current := old
	current.Attempt = 2
	natstest.Intend(t, e.js, current)
	noRecord := task(wire.OpCreate, inmemory.Name, "c1", "forgotten", "")
	wanted := task(wire.OpDelete, inmemory.Name, "c1", "wanted", "")
	wanted.Orphan = true
	natstest.Intend(t, e.js, task(wire.OpCreate, inmemory.Name, "c1", "wanted", ""))
	for _, tk := range []wire.Task{old, noRecord, wanted} {
		if _, err := e.pub.Publish(testCtx(t), &tk); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "three stale tasks dropped", func() bool { return w.Stats().Stale == 3 })
	if n := count(t, p); n != 0 {
		t.Fatalf("%d machines made by stale tasks", n)
	}
	// The current attempt runs; its events name the attempt.
	if _, err := e.pub.Publish(testCtx(t), &current); err != nil {
		t.Fatal(err)
	}
	seen := waitPhases(t, events, wire.PhaseRunning, "c1/retried")
	for _, ev := range seen["c1/retried"] {
		if ev.Attempt != 2 {
			t.Errorf("event %s of attempt %d; want 2", ev.Phase, ev.Attempt)
		}
	}
	// Redelivered once its create is done: dropped too.
	kv, _ := e.js.KeyValue(testCtx(t), wire.BucketMachines)
	if _, err := kv.Put(testCtx(t), wire.RecordKey("c1", "retried"),
		[]byte(`{"name":"retried","cluster":"c1","taskID":"`+current.ID+`","attempt":2,"phase":"Running"}`)); err != nil {
		t.Fatal(err)
	}
	// As a redelivery: the same attempt, without the message ID that
	// would have JetStream drop it.
	// The worker's copy of the records follows the bucket a moment late,
	// and a task it still takes for current runs (harmlessly: the machine
	// exists); so redeliver until one is dropped.
	data, _ := wire.Encode(&current)
	eventually(t, "a create of a Running machine dropped", func() bool {
		if w.Stats().Stale == 4 {
			return true
		}
		if _, err := e.js.Publish(testCtx(t), current.Subject(), data); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		return w.Stats().Stale == 4
	})
	// An orphan delete with no record runs.
	orphan := task(wire.OpDelete, inmemory.Name, "c1", "retried", "")
	orphan.Orphan = true
	kvDelete(t, e, wire.RecordKey("c1", "retried"))
	if _, err := e.pub.Publish(testCtx(t), &orphan); err != nil {
		t.Fatal(err)
	}
	waitPhases(t, events, wire.PhaseDeleted, "c1/retried")
	if n := count(t, p); n != 0 {
		t.Fatalf("orphan not deleted: %d machines", n)
	}
}

func kvDelete(t *testing.T, e *env, key string) {
	t.Helper()
	kv, err := e.js.KeyValue(testCtx(t), wire.BucketMachines)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(testCtx(t), key); err != nil {
		t.Fatal(err)
	}
}
