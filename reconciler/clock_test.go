package reconciler

import (
	"fmt"
	"testing"
	"time"

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
		data, err := wire.Encode(&wire.Heartbeat{Cluster: "c1", Machine: name, Version: task.task.Machine.Version, Healthy: healthy, Time: time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.nc.Publish(wire.HeartbeatSubject("c1", name), data); err != nil {
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
