package reconciler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A machine whose heartbeats stop is recorded unhealthy once the heartbeat
// timeout has passed, and healthy again with its next heartbeat, although
// nothing else happens in the fleet: the tick looks at a cluster when its
// machines' time comes, not only when something arrives for it.
func TestHeartbeatsThatStopAreNoticed(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	// Long enough that a loaded machine (-race, every package at once)
	// does not delay a heartbeat past it.
	l.opts.HeartbeatTimeout = 1500 * time.Millisecond
	l.start()
	task := l.nextTasks(1)[0]
	l.answer(task, wire.PhaseRunning)
	l.waitRecords("Running")
	name := task.task.Machine.Name
	var lastBeat time.Time
	beat := func(healthy bool) {
		t.Helper()
		lastBeat = time.Now()
		if err := heartbeat(l.nc, task.task.Machine, healthy); err != nil {
			t.Fatal(err)
		}
	}
	health := func() (*Record, string) {
		rec := l.records()[name]
		if rec == nil {
			return nil, "no record"
		}
		if rec.Health == nil {
			return rec, "no health recorded"
		}
		return rec, fmt.Sprintf("healthy=%v reason=%q", rec.Health.Healthy, rec.Health.Reason)
	}
	// Heartbeats for two timeouts: the machine is never judged silent.
	for end := time.Now().Add(2 * l.opts.HeartbeatTimeout); time.Now().Before(end); {
		beat(true)
		time.Sleep(100 * time.Millisecond)
	}
	if rec, why := health(); rec == nil || !rec.Heartbeats || (rec.Health != nil && !rec.Health.Healthy) {
		t.Fatalf("while heartbeats arrive: %s, heartbeats recorded %v; want a healthy machine that sends them", why, rec != nil && rec.Heartbeats)
	}
	l.waitFor("the silent machine recorded unhealthy", func() (bool, string) {
		rec, why := health()
		return rec != nil && rec.Health != nil && rec.Health.Reason == ReasonHeartbeatMissing, why
	})
	if waited := time.Since(lastBeat); waited < l.opts.HeartbeatTimeout {
		t.Errorf("recorded silent %v after the last heartbeat, before the %v timeout", waited, l.opts.HeartbeatTimeout)
	}
	beat(true)
	l.waitFor("the machine healthy again", func() (bool, string) {
		rec, why := health()
		return rec != nil && rec.Health != nil && rec.Health.Healthy, why
	})
}

// A node that floods its heartbeat subject (as fast as one connection
// publishes, flipping its health each time) gets no more than one
// heartbeat in 50 ms read: its record is written a few dozen times, not
// once a message, and the others' heartbeats still count, so no healthy
// machine is ever recorded silent while the flood lasts (a heartbeat the
// loop had no room for makes the time until then not count as missed).
func TestAFloodOfHeartbeatsCostsLittle(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 1)
	l.opts.HeartbeatTimeout = 1500 * time.Millisecond
	l.opts.Metrics = NewMetrics(nil)
	l.start()
	cp := l.nextTasks(1)[0]
	l.answer(cp, wire.PhaseRunning)
	worker := l.nextTasks(1)[0]
	l.answer(worker, wire.PhaseRunning)
	l.waitRecords("Running Running")
	beat := func(task received) {
		t.Helper()
		if err := heartbeat(l.nc, task.task.Machine, true); err != nil {
			t.Fatal(err)
		}
	}
	beat(cp)
	beat(worker)
	l.waitFor("both machines recorded as sending heartbeats", func() (bool, string) {
		recs := l.records()
		c, w := recs[cp.task.Machine.Name], recs[worker.task.Machine.Name]
		return c != nil && w != nil && c.Heartbeats && w.Heartbeats, phases(recs)
	})
	bucket, err := l.js.Stream(t.Context(), "KV_"+wire.BucketMachines)
	if err != nil {
		t.Fatal(err)
	}
	writes := func() uint64 {
		t.Helper()
		info, err := bucket.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	before := writes()

	flood := 2 * l.opts.HeartbeatTimeout
	end := time.Now().Add(flood)
	flooder, _ := natstest.Connect(t, l.srv.ClientURL())
	done := make(chan int, 1) // the flood ends at end, whether or not the test waits
	go func() {
		n := 0
		for ; time.Now().Before(end); n++ {
			if err := heartbeat(flooder, worker.task.Machine, n%2 == 0); err != nil {
				t.Errorf("flood: %v", err)
				break
			}
		}
		_ = flooder.Flush()
		done <- n
	}()
	for time.Now().Before(end) {
		beat(cp)
		rec := l.records()[cp.task.Machine.Name]
		if rec != nil && rec.Health != nil && !rec.Health.Healthy {
			t.Fatalf("during the flood the control plane, which sends a heartbeat every 100ms, was recorded %s: %s", rec.Health.Reason, rec.Health.Message)
		}
		time.Sleep(100 * time.Millisecond)
	}
	sent := <-done
	refused := metricValueWhere(l.opts.Metrics.Refused, "reason", refusedRate)
	// One heartbeat read every 25 ms at most is 120 in 3 s; each may
	// change the flooder's health, a write.
	if got, most := writes()-before, uint64(flood/(wire.MinHeartbeatInterval/2))+10; got > most {
		t.Errorf("%d heartbeats sent in %v made %d record writes; want at most %d", sent, flood, got, most)
	}
	if refused == 0 {
		t.Errorf("%d heartbeats sent in %v, none refused for its rate", sent, flood)
	}
	t.Logf("%d heartbeats sent, %v refused for their rate, %v dropped unread", sent, refused, metricValue(l.opts.Metrics.HeartbeatsDropped))
}

// Heartbeats the subscription had no room for may be any machine's: the
// tick that finds them dropped makes the time until then not count as
// missed, as a disconnection does, and counts them.
func TestDroppedHeartbeatsAreNotMissed(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv.ClientURL())
	full := make(chan *nats.Msg, 1) // never read: every heartbeat after the first is dropped
	sub, err := nc.ChanSubscribe(wire.SubjectHeartbeats+".>", full)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	now := start
	r, err := New(Options{JS: js, Log: testLog(t, "daemon"), Metrics: NewMetrics(nil), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	// The loop's state as Run sets it up, with no machine.
	r.wake, r.clock, r.machines, r.unsent = map[string]time.Time{}, map[string]time.Time{}, map[string]machineList{}, map[string]*machine{}
	r.beats, r.heard = sub, start
	tick := func(at time.Time) {
		now = at
		r.checkTime(t.Context())
	}
	tick(start.Add(time.Second))
	if !r.heard.Equal(start) {
		t.Fatalf("nothing dropped, yet heartbeats count from %v", r.heard)
	}
	for range 5 {
		if err := nc.Publish(wire.HeartbeatSubject("c1", "m1"), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := sub.Dropped(); n < 4 && time.Now().Before(deadline); n, _ = sub.Dropped() {
		time.Sleep(10 * time.Millisecond)
	}
	dropped := start.Add(2 * time.Second)
	tick(dropped)
	if !r.heard.Equal(dropped) {
		t.Errorf("4 heartbeats dropped; heartbeats count from %v, want from the tick that found them (%v)", r.heard, dropped)
	}
	if got := metricValue(r.metrics.HeartbeatsDropped); got != 4 {
		t.Errorf("gitfleet_heartbeats_dropped_total %v, want 4", got)
	}
	// fleet.yaml's Reconciling condition says so, until heartbeats have
	// come without a drop for heartbeatsQuiet.
	problem := func() string {
		for _, p := range r.health.Problems() {
			if p.Kind == ProblemHeartbeats {
				return p.Message
			}
		}
		return ""
	}
	if msg := problem(); !strings.Contains(msg, "4 heartbeats dropped unread") || !strings.Contains(msg, "is not noticed") {
		t.Errorf("loop problem %q; want one saying 4 heartbeats were dropped and what that costs", msg)
	}
	tick(dropped.Add(time.Second))
	if !r.heard.Equal(dropped) {
		t.Errorf("no more dropped, yet heartbeats count from %v", r.heard)
	}
	if problem() == "" {
		t.Error("the Heartbeats problem cleared a second after the drop; want it kept for a quiet while")
	}
	tick(dropped.Add(heartbeatsQuiet))
	if msg := problem(); msg != "" {
		t.Errorf("no drop for %v, yet the loop still reports %q", heartbeatsQuiet, msg)
	}
}

// A node's heartbeat message is the node's to write, at any length NATS
// carries (1 MiB): the record keeps its start only, as the status branch
// and every later record write would carry it.
func TestAHeartbeatsMessageIsCut(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	l.start()
	task := l.nextTasks(1)[0]
	l.answer(task, wire.PhaseRunning)
	l.waitRecords("Running")
	m := task.task.Machine
	data, err := wire.Encode(&wire.Heartbeat{Cluster: m.Cluster, Machine: m.Name, Version: m.Version, Healthy: false,
		Message: "kubelet: " + strings.Repeat("stuck ", 100<<10/6), Time: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.nc.Publish(wire.HeartbeatSubject(m.Cluster, m.Name), data); err != nil {
		t.Fatal(err)
	}
	l.waitFor("the machine recorded unhealthy", func() (bool, string) {
		rec := l.records()[m.Name]
		if rec == nil || rec.Health == nil {
			return false, "no health recorded"
		}
		return !rec.Health.Healthy, fmt.Sprintf("healthy=%v", rec.Health.Healthy)
	})
	h := l.records()[m.Name].Health
	if !strings.HasPrefix(h.Message, "kubelet: stuck") || len(h.Message) > 2<<10 || !strings.Contains(h.Message, "bytes cut") {
		t.Errorf("recorded message of %d bytes, starting %.30q; want its start, at most 2 KiB, saying it was cut", len(h.Message), h.Message)
	}
}

// A node heartbeats while it boots, saying it is not healthy yet; the
// provider reports it Running once it is up. Those early heartbeats say
// nothing of the running machine: it is not recorded unhealthy for them,
// so the status branch does not tell an auditor that every new machine
// was unhealthy when it was only booting.
func TestBootingHeartbeatsDoNotMakeARunningMachineUnhealthy(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	l.start()
	task := l.nextTasks(1)[0]
	m := task.task.Machine
	data, err := wire.Encode(&wire.Heartbeat{Cluster: m.Cluster, Machine: m.Name, Version: m.Version, Healthy: false,
		Message: "booting", Time: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.nc.Publish(wire.HeartbeatSubject(m.Cluster, m.Name), data); err != nil {
		t.Fatal(err)
	}
	l.waitFor("the booting heartbeat taken in", func() (bool, string) {
		rec := l.records()[m.Name]
		return rec != nil && rec.Heartbeats, "no heartbeat recorded"
	})
	l.answer(task, wire.PhaseRunning)
	l.waitRecords("Running")
	// The loop ticks every 50 ms and judges the machine's health at its
	// first tick after Running: ten ticks.
	for range 10 {
		if rec := l.records()[m.Name]; rec.Health != nil && !rec.Health.Healthy {
			t.Fatalf("a machine that booted and came up Running was recorded %s: %s", rec.Health.Reason, rec.Health.Message)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A heartbeat after Running that says unhealthy still counts.
	if err := heartbeat(l.nc, m, false); err != nil {
		t.Fatal(err)
	}
	l.waitFor("the machine recorded unhealthy", func() (bool, string) {
		rec := l.records()[m.Name]
		return rec.Health != nil && !rec.Health.Healthy, fmt.Sprintf("health %+v", rec.Health)
	})
}

// A node's first heartbeat may follow the Running event that made the
// daemon take the machine as heard from by a few milliseconds: it is no
// flood, and is taken, not refused for its rate (that refusal was logged
// as a node flooding its subject, at every new machine and every new
// leader's start).
func TestAHeartbeatRightAfterRunningIsTaken(t *testing.T) {
	created := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	now := created.Add(5 * time.Second)
	r := clockedReconciler(t, &now)
	forget(r)
	m := &machine{rec: &Record{Name: "c1-md-0-a", Shape: &Shape{Cluster: "c1", Provider: "local", Version: "v1.31.0",
		Role: wire.RoleWorker, Deployment: "md-0"}, Phase: wire.PhaseRunning, Heartbeats: true,
		Created: StampOf(created), Running: StampOf(now)}}
	r.put(m)
	r.noteRunning(m, true) // the Running event
	if !m.lastHeartbeat().After(created) {
		t.Fatalf("after Running the machine was last heard at %v, not after its creation %v: it would not count as ready", m.lastHeartbeat(), created)
	}
	now = now.Add(2 * time.Millisecond)
	data, err := wire.Encode(&wire.Heartbeat{Cluster: "c1", Machine: "c1-md-0-a", Version: "v1.31.0", Healthy: true, Time: now})
	if err != nil {
		t.Fatal(err)
	}
	r.handleHeartbeat(t.Context(), &nats.Msg{Subject: wire.HeartbeatSubject("c1", "c1-md-0-a"), Data: data})
	if got := metricValueWhere(r.metrics.Refused, "reason", refusedRate); got != 0 {
		t.Errorf("the node's first heartbeat, 2 ms after its Running event, was refused for its rate (%v refused)", got)
	}
	if !m.lastHeartbeat().Equal(now) {
		t.Errorf("last heard at %v, want the heartbeat's arrival %v", m.lastHeartbeat(), now)
	}
}

// TestASilentMachineIsPlannedWhenItsCheckComesDue: a Running machine that
// never sent a heartbeat, in a cluster with a MachineHealthCheck, has its
// cluster planned again when a check comes due for it, not before. A
// local node that does not come up, under a check that allows it 6 s, is
// remediated once those 6 s have passed; an inmemory machine (which sends
// none) under a check of Ready False only never comes due. Before, the
// tick took such a machine as stale 3 s after it was last heard from and
// planned its cluster again at every tick (each second in a daemon; here
// each 50 ms) — gitfleet_clusters_planned_total climbing in a quiet
// fleet, until the machine was remediated, or for ever.
func TestASilentMachineIsPlannedWhenItsCheckComesDue(t *testing.T) {
	for _, tc := range []struct {
		name, provider, condition string
		remediated                bool
	}{
		{"a local node that does not come up", "local", "{type: Ready, status: Unknown, timeoutSeconds: 6}", true},
		{"an inmemory machine, which sends none", "inmemory", `{type: Ready, status: "False", timeoutSeconds: 6}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoop(t, tc.provider, 1, 1)
			l.repo.write("clusters/c1-health.yaml", strings.Replace(replaceHealthCheck,
				"{type: Ready, status: Unknown, timeoutSeconds: 1}", tc.condition, 1))
			l.repo.commit("c1: a health check of 6 s")
			l.opts.Metrics = NewMetrics(prometheus.NewRegistry())
			l.start()
			l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
			worker := l.nextTasks(1)[0]
			l.answer(worker, wire.PhaseRunning)
			running := time.Now()
			l.waitRecords("Running Running")
			planned := func() float64 { return metricValue(l.opts.Metrics.ClustersPlanned) }
			time.Sleep(time.Until(running.Add(3500 * time.Millisecond)))
			before := planned()
			time.Sleep(time.Until(running.Add(5500 * time.Millisecond)))
			if n := planned() - before; n > 0 {
				t.Errorf("c1 planned %v times in the 2 s before its health check could come due, with nothing changed (ticks every %v)", n, l.opts.Tick)
			}
			name := worker.task.Machine.Name
			if !tc.remediated {
				if rec := l.records()[name]; rec == nil || rec.Phase != wire.PhaseRunning {
					t.Errorf("the inmemory worker is %v, want Running", rec)
				}
				return
			}
			l.waitFor("the silent worker remediated", func() (bool, string) {
				rec := l.records()[name]
				if rec == nil {
					return false, "no record"
				}
				return rec.Phase == wire.PhaseDeleting, string(rec.Phase)
			})
			if waited := time.Since(running); waited < 6*time.Second {
				t.Errorf("remediated %v after it ran, before the check's 6 s", waited)
			}
			if cause := l.records()[name].Cause; !strings.Contains(cause, "no heartbeat for 6") {
				t.Errorf("remediated because %q, want no heartbeat for 6 s", cause)
			}
		})
	}
}
