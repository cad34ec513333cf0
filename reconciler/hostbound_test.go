package reconciler

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A local worker's report covers its own machines only, whatever the
// report says of its provider: worker w2, on its own credential's subject
// and in its own name (all NATS lets it publish), reports that it has no
// machine and that local machines do not live on one host, and answers
// every inventory request so. Before, the leader took the report's word:
// the report covered every local machine, and all of w1's were found gone
// and replaced.
func TestAReportCannotUnbindAHostBoundProvider(t *testing.T) {
	l := newLoop(t, "local", 1, 2)
	l.opts.Metrics = NewMetrics(nil)
	l.start()
	// The control plane first, then the workers, each made by worker
	// w1: its events name it, the machine's holder.
	for _, n := range []int{1, 2} {
		for _, r := range l.nextTasks(n) {
			l.event(wire.Event{TaskID: r.task.ID, Attempt: r.task.Attempt, Worker: "w1", Cluster: r.task.Machine.Cluster,
				Machine: r.task.Machine.Name, Phase: wire.PhaseRunning, Version: r.task.Machine.Version,
				ProviderID: "local://" + r.task.Machine.Name, Time: time.Now().UTC()})
			_ = r.msg.Ack()
		}
	}
	before := l.waitRecords("Running Running Running")
	for name, rec := range before {
		if rec.Worker != "w1" {
			t.Fatalf("%s is held by %q, want w1", name, rec.Worker)
		}
	}

	// Running for longer than a List may take, so a report that leaves
	// them out is heard.
	time.Sleep(1500 * time.Millisecond)

	w2, _ := natstest.Connect(t, l.srv.ClientURL())
	n := 0
	report := func(request string) {
		n++
		data, err := wire.Encode(&wire.Inventory{Provider: "local", Worker: "w2", HostBound: false,
			Report: fmt.Sprintf("w2-%d", n), Parts: 1, Request: request, Time: time.Now().UTC()})
		if err != nil {
			t.Error(err)
			return
		}
		if err := w2.Publish(wire.InventorySubject("local", "w2"), data); err != nil {
			t.Error(err)
		}
	}
	if _, err := w2.Subscribe(wire.SubjectInventoryRequest, func(m *nats.Msg) {
		if req, err := wire.DecodeInventoryRequest(m.Data); err == nil {
			report(req.ID)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := w2.Flush(); err != nil {
		t.Fatal(err)
	}
	report("")
	inventories := l.opts.Metrics.Inventories.WithLabelValues("local")
	l.waitFor("w2's report taken", func() (bool, string) {
		got := counter(t, inventories)
		return got >= 1, fmt.Sprintf("%v reports", got)
	})
	// Time for requests, answers and a replacement, at 50 ms a tick.
	time.Sleep(2 * time.Second)
	for name, rec := range l.records() {
		if before[name] == nil || rec.Phase != wire.PhaseRunning || rec.Reason != "" {
			t.Errorf("%s: %s %s %s; want w1's machines Running as they were", name, rec.Phase, rec.Reason, rec.Message)
		}
	}
	if got := counter(t, l.opts.Metrics.Missing.WithLabelValues("local", ReasonMachineMissing)); got != 0 {
		t.Errorf("%v machines found missing", got)
	}
	l.noMoreTasks(100 * time.Millisecond)
}
