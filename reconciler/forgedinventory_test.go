package reconciler

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A worker's credentials may publish any provider's inventory. Machines
// reported under names no task can carry — a wildcard, a space, a name of
// 4,000 characters — or by a provider or worker so named are no orphans:
// their delete could never be published. A machine of a proper name
// beside them (ghost-1, which keeps the leader asking for inventories) is
// one. Before, each was confirmed an
// orphan and its delete tried again every second, for ever, an error
// logged each time; the delete of the long one made NATS close the
// leader's connection for good (the publisher now refuses such a subject,
// TestPublisherRefusesASubjectTooLong).
func TestInventoryNamesNoTaskCanCarry(t *testing.T) {
	f := newCloudFleet(t)
	_, m := runLeader(t, f.js, f.repo.dir, func(o *Options) {
		o.Orphans, o.OrphanGrace, o.Tick = OrphansDelete, 100*time.Millisecond, 50*time.Millisecond
	})
	f.wait("three Running machines", f.converged)
	fleet := f.machines()

	// The forger answers every inventory request with its report, as a
	// worker does, so that what it lists is confirmed.
	fc, _ := natstest.Connect(t, f.js.Conn().ConnectedUrl())
	long := strings.Repeat("g", 4000)
	forgers := []struct{ provider, worker string }{{"bogus", "w1"}, {"bogus", "w.x"}, {strings.Repeat("p", 300), "w1"}}
	report := func(request string) error {
		for _, fg := range forgers {
			data, err := wire.Encode(&wire.Inventory{Provider: fg.provider, Worker: fg.worker, Report: request + "r", Parts: 1,
				Request: request, Time: time.Now().UTC(), Instances: []wire.Instance{
					{Cluster: "ghost", Machine: "g.*"}, {Cluster: "gh ost", Machine: "x"}, {Cluster: "ghost", Machine: long},
					{Cluster: "ghost", Machine: "ghost-1"}}})
			if err != nil {
				return err
			}
			// Its subject names its worker, as the leader wants; a worker
			// with a dot is two tokens, read back as one.
			subj := wire.InventorySubject(fg.provider, fg.worker)
			if _, err := fc.Request(subj, data, 10*time.Second); err != nil {
				return fmt.Errorf("%.40s: %w", subj, err)
			}
		}
		return nil
	}
	gauge := m.Orphans.WithLabelValues("bogus")
	f.forge(fc, report, "ghost-1 confirmed an orphan", func() bool { return gaugeValue(t, gauge) >= 1 })
	time.Sleep(time.Second) // the grace, and a few ticks
	// ghost-1 is an orphan like any other: its delete can be published.
	for p, want := range map[string]int{"bogus": 1, forgers[2].provider: 0} {
		if n := int(gaugeValue(t, m.Orphans.WithLabelValues(p))); n != want {
			t.Errorf("%d orphans of provider %.10s… counted, want %d", n, p, want)
		}
	}
	if !f.js.Conn().IsConnected() {
		t.Fatalf("the leader's connection is %v", f.js.Conn().Status())
	}
	if got := f.machines(); !f.converged() || len(got) != len(fleet) {
		t.Errorf("the fleet changed: %v, records %v", got, f.summary())
	}
}

// A value in the inmemory provider's cloud that names no cluster or
// machine (anyone with a worker's credentials may write that bucket, as
// anyone may meddle with a cloud) is left out of the worker's reports.
// Before, the worker reported it as an instance without names, the
// leader refused every part that carried one, and no report of the
// provider was ever complete: a machine the cloud lost afterwards was
// never found missing, nor replaced. So is one whose version is longer
// than any provider writes, which the leader refuses as it refuses an
// event that says so (wire.CheckInstance).
func TestNamelessCloudValueLeavesReportsWhole(t *testing.T) {
	f := newCloudFleet(t)
	_, m := runLeader(t, f.js, f.repo.dir)
	f.wait("three Running machines", f.converged)
	cloud, err := f.js.KeyValue(t.Context(), "gitfleet-inmemory")
	if err != nil {
		t.Fatal(err)
	}
	long := fmt.Sprintf(`{"groups":[{"machine":{"cluster":"huge","version":"v1.%s"},"machines":[{"name":"huge-1"}]}]}`,
		strings.Repeat("9", wire.MaxVersion))
	for key, value := range map[string]string{"ghost.x": `{}`, "ghost": `{"groups":[{"machine":{"cluster":"ghost"},"machines":[{"name":""}]}]}`,
		"huge": long} {
		if _, err := cloud.Put(t.Context(), key, []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	lost := f.loseWorker()
	f.wait("the lost machine recorded missing", func() bool {
		r := f.records()[lost]
		return r == nil || r.Reason == ReasonMachineMissing
	})
	if n := counter(t, m.Malformed.WithLabelValues("inventory")); n != 0 {
		t.Errorf("%v inventory parts refused as malformed", n)
	}
}

// floodParts hands r parts of reports that never end, from provider
// bogus: parts parts of per machines no record wants, every name new.
func floodParts(t *testing.T, r *Reconciler, worker string, parts, per int) {
	t.Helper()
	for i := range parts {
		inv := wire.Inventory{Provider: "bogus", Worker: worker, Report: fmt.Sprintf("flood-%d", i), Time: r.o.Now()}
		for j := range per {
			inv.Instances = append(inv.Instances, wire.Instance{Cluster: "ghost", Machine: fmt.Sprintf("g-%s-%d-%d", worker, i, j)})
		}
		r.handleInventory(t.Context(), inventoryPart{subject: wire.InventorySubject("bogus", worker), inv: inv})
	}
}

// Orphans that no report ever confirms are forgotten, and no more than
// 100,000 are tracked. A worker's credentials may publish any provider's
// inventory as fast as the leader takes it: 20,000 parts of 50 machines
// no record wants, sent to a running daemon in three seconds, made a
// million orphans to confirm that were never forgotten — half a gigabyte
// of its heap for good, and more with every flood.
func TestForgedOrphansAreBounded(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	r := clockedReconciler(t, &now)
	forget(r)
	floodParts(t, r, "w1", 2400, 50) // 120,000 machines
	if n := len(r.inv.orphans); n > 100_000 {
		t.Errorf("%d orphans tracked after a flood, want 100,000 at most", n)
	}
	// No report confirms them: a new leader's hold on requests and a
	// worker's List later, they are forgotten.
	now = now.Add(2 * time.Minute)
	r.inv.pruneRemoved(now)
	if n := len(r.inv.orphans); n != 0 {
		t.Errorf("%d orphans no report confirmed still tracked two minutes later", n)
	}
	// A machine listed again is an orphan again.
	floodParts(t, r, "w2", 1, 1)
	if n := len(r.inv.orphans); n != 1 {
		t.Errorf("%d orphans tracked after a report of one, want 1", n)
	}
}

// The reports being received hold at most maxListed machines listed
// apart from their records' marks together, and maxReports reports: a
// part past either drops the reports whose last part came longest ago
// (counted as malformed), and a report dropped gives its share back.
func TestInventoryListingsAreBounded(t *testing.T) {
	defer func(n int) { maxListed = n }(maxListed)
	maxListed = 1000
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	r := clockedReconciler(t, &now)
	forget(r)
	malformed := counter(t, r.metrics.Malformed.WithLabelValues("inventory"))
	floodParts(t, r, "w1", 30, 50)
	held := 0
	for _, p := range r.inv.parts {
		held += len(p.listed)
	}
	if held > maxListed || held != r.inv.listedN {
		t.Errorf("reports being received list %d machines (counted %d), want %d at most", held, r.inv.listedN, maxListed)
	}
	if n := counter(t, r.metrics.Malformed.WithLabelValues("inventory")) - malformed; n != 10 {
		t.Errorf("%v reports dropped, want the 10 oldest, past the bound", n)
	}
	if r.inv.parts["bogus/w1/flood-0"] != nil || r.inv.parts["bogus/w1/flood-29"] == nil {
		t.Errorf("the reports dropped are not the oldest")
	}
	// Parts that list nothing, of as many reports, are bounded too.
	defer func(n int) { maxReports = n }(maxReports)
	maxReports = 100
	floodParts(t, r, "w3", 300, 0)
	if n := len(r.inv.parts); n > maxReports || n != r.inv.idle.Len() {
		t.Errorf("%d reports being received (%d in order), want %d at most", n, r.inv.idle.Len(), maxReports)
	}
	// A minute later the reports that never ended are dropped with the
	// next part, and give their share back.
	now = now.Add(2 * time.Minute)
	floodParts(t, r, "w2", 1, 1)
	if r.inv.listedN != 1 || len(r.inv.parts) != 1 || r.inv.idle.Len() != 1 {
		t.Errorf("%d machines listed in %d reports being received (%d in order), want w2's one", r.inv.listedN, len(r.inv.parts), r.inv.idle.Len())
	}
}

// A flood of forged inventory parts, sent with a worker's credentials,
// holds up no real report once it is over: the real worker's next report
// after the flood is taken, and a machine its cloud lost meanwhile is
// found missing and replaced within seconds. Before, the flood's reports,
// which never end, held the whole of what the leader keeps of reports
// being received until a minute after they began, and every part of the
// real worker's reports was refused until then: the lost machine stayed
// Running in its record for that minute.
func TestARealReportCountsAfterAFlood(t *testing.T) {
	bound := maxListed
	t.Cleanup(func() { maxListed = bound }) // once the leader stopped: cleanups run last first
	maxListed = 5_000
	f := newCloudFleet(t)
	_, m := runLeader(t, f.js, f.repo.dir)
	f.wait("three Running machines", f.converged)
	fleet := f.machines()

	// Parts of reports that never end, 50 machines no record wants in
	// each, twice what the leader keeps; each waits to be taken, as a
	// worker's parts do.
	fc, _ := natstest.Connect(t, f.js.Conn().ConnectedUrl())
	for i := range 2 * maxListed / 50 {
		inv := wire.Inventory{Provider: "bogus", Worker: "w1", Report: fmt.Sprintf("flood-%d", i), Time: time.Now().UTC()}
		for j := range 50 {
			inv.Instances = append(inv.Instances, wire.Instance{Cluster: "ghost", Machine: fmt.Sprintf("g-%d-%d", i, j)})
		}
		data, err := wire.Encode(&inv)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fc.Request(wire.InventorySubject("bogus", "w1"), data, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	flooded := time.Now()
	lost := f.loseWorker()
	for deadline := flooded.Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r := f.records()[lost]; r == nil || r.Reason == ReasonMachineMissing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the machine the cloud lost after the flood is not found missing within 15s (the worker reports every 0.3s): records %v", f.summary())
		}
	}
	t.Logf("the lost machine found missing %v after the flood", time.Since(flooded).Round(time.Millisecond))
	f.wait("the lost machine replaced", func() bool { return f.converged() && !slices.Contains(f.machines(), lost) })
	if kept := slices.DeleteFunc(slices.Clone(fleet), func(k string) bool { return k == lost }); !slices.Contains(f.machines(), kept[0]) ||
		!slices.Contains(f.machines(), kept[1]) {
		t.Errorf("machines the cloud kept were touched: before %v, after %v", fleet, f.machines())
	}
	if n := counter(t, m.Missing.WithLabelValues("inmemory", ReasonMachineMissing)); n != 1 {
		t.Errorf("gitfleet_machines_missing_total = %v, want 1", n)
	}
}

// An inventory says of a machine what a provider writes of one, and no
// more, as an event does (wire.CheckInstance): a part that lists a
// machine with a provider ID, version or address past an event's bounds,
// a pool, role, template hash or reason longer than a name, or more
// labels and annotations than a template carries, is refused as
// malformed (counted), and nothing of it is taken. Before, each such
// machine was an orphan like any other, in fleet.yaml with a provider ID
// of any length, its delete a task carrying its labels. A refused part
// leaves its report unfinished: the machines of the report's other parts
// are not judged, so none is found missing for the part refused (taking
// the rest of the report would have the machine it lists replaced).
func TestInventoryBoundsWhatItCarries(t *testing.T) {
	f := newCloudFleet(t)
	_, m := runLeader(t, f.js, f.repo.dir, func(o *Options) { o.Orphans = OrphansReport })
	f.wait("three Running machines", f.converged)
	fleet := f.machines()
	f.stopWorker() // the forger's reports alone tell of the cloud's machines

	ghost := func(name string) wire.Instance { return wire.Instance{Cluster: "ghost", Machine: name} }
	over := []wire.Instance{ghost("g-id"), ghost("g-version"), ghost("g-address"), ghost("g-addresses"), ghost("g-deployment"),
		ghost("g-role"), ghost("g-hash"), ghost("g-reason"), ghost("g-labels")}
	over[0].ProviderID = strings.Repeat("p", wire.MaxProviderID+1)
	over[1].Version = "v1.31." + strings.Repeat("9", wire.MaxVersion)
	over[2].Addresses = []string{strings.Repeat("10.0.0.1", 40)}
	over[3].Addresses = strings.Split(strings.Repeat("10.0.0.1,", wire.MaxAddresses)+"10.0.0.2", ",")
	over[4].Deployment = strings.Repeat("d", wire.MaxName+1)
	over[5].Role = wire.Role(strings.Repeat("r", wire.MaxName+1))
	over[6].TemplateHash = strings.Repeat("h", wire.MaxName+1)
	over[7].Reason, over[7].Message = strings.Repeat("R", wire.MaxName+1), "dead"
	over[8].Labels = map[string]string{"a": strings.Repeat("l", 80<<10)}
	over[8].Annotations = map[string]string{"b": strings.Repeat("n", 80<<10)}
	cloudMachine := func(k string) wire.Instance {
		cluster, name, _ := strings.Cut(k, ".")
		return wire.Instance{Cluster: cluster, Machine: name}
	}
	last := cloudMachine(fleet[2])
	last.ProviderID = over[0].ProviderID

	fc, _ := natstest.Connect(t, f.js.Conn().ConnectedUrl())
	send := func(inv wire.Inventory) error {
		inv.Time = time.Now().UTC()
		data, err := wire.Encode(&inv)
		if err != nil {
			return err
		}
		_, err = fc.Request(wire.InventorySubject(inv.Provider, inv.Worker), data, 10*time.Second)
		return err
	}
	// The forger answers every request, as a worker does, so that what it
	// lists is confirmed: a report of the cloud's three machines in two
	// parts, the second refused, and a report of a part for each ghost
	// past a bound and a last one within them all (ghost-1, which the
	// leader confirms an orphan, so the forger is heard).
	report := func(request string) error {
		if err := send(wire.Inventory{Provider: "inmemory", Worker: "w1", Report: request + "r", Request: request,
			Instances: []wire.Instance{cloudMachine(fleet[0]), cloudMachine(fleet[1])}}); err != nil {
			return err
		}
		if err := send(wire.Inventory{Provider: "inmemory", Worker: "w1", Report: request + "r", Request: request, Part: 1, Parts: 2,
			Instances: []wire.Instance{last}}); err != nil {
			return err
		}
		for i, in := range append(over, ghost("ghost-1")) {
			inv := wire.Inventory{Provider: "bogus", Worker: "w1", Report: request + "g", Request: request, Part: i,
				Instances: []wire.Instance{in}}
			if i == len(over) {
				inv.Parts = i + 1
			}
			if err := send(inv); err != nil {
				return err
			}
		}
		// A report ID longer than a name is refused too: it is kept until
		// the report's last part (which never comes).
		return send(wire.Inventory{Provider: "bogus", Worker: "w1", Report: strings.Repeat("i", wire.MaxName+1), Request: request,
			Instances: []wire.Instance{ghost("g-report")}})
	}
	gauge := m.Orphans.WithLabelValues("bogus")
	f.forge(fc, report, "ghost-1 confirmed an orphan", func() bool { return gaugeValue(t, gauge) >= 1 })
	time.Sleep(2 * time.Second) // more requests, more reports
	if n := gaugeValue(t, gauge); n != 1 {
		t.Errorf("%v orphans of provider bogus, want ghost-1 alone: a machine past a bound is no machine a provider has", n)
	}
	if n, want := counter(t, m.Malformed.WithLabelValues("inventory")), float64(len(over)+2); n < want {
		t.Errorf("%v inventory parts refused as malformed, want %v at least (each report's)", n, want)
	}
	if got := f.machines(); !f.converged() || !slices.Equal(got, fleet) {
		t.Errorf("the fleet changed: %v, records %v", got, f.summary())
	}
	if n := counter(t, m.Missing.WithLabelValues("inmemory", ReasonMachineMissing)); n != 0 {
		t.Errorf("%v machines found missing, want none: the report whose part was refused is not whole", n)
	}
}

// forge has report answer every inventory request on fc, as a worker
// does, so that what it lists is confirmed; sends it once; and waits
// until done.
func (f *cloudFleet) forge(fc *nats.Conn, report func(request string) error, what string, done func() bool) {
	f.t.Helper()
	if _, err := fc.Subscribe(wire.SubjectInventoryRequest, func(msg *nats.Msg) {
		if req, err := wire.DecodeInventoryRequest(msg.Data); err == nil {
			_ = report(req.ID) // the first report's errors are the test's
		}
	}); err != nil {
		f.t.Fatal(err)
	}
	if err := report(""); err != nil {
		f.t.Fatal(err)
	}
	f.wait(what, done)
}

// A flood of forged inventory parts, sent with one worker's credentials
// while another worker's report is being received, drops the flood's own
// reports to make room, not the other worker's: that report's last part
// completes it even while the flood goes on. Workers publish reports in
// their own credential's name only (wire.InventoryPublishedFor), so the
// credential a report counts against is its sender's. Before, the reports
// whose last part came longest ago went first, whoever sent them: the real
// report, waiting for its next part, was dropped, and no report of a
// worker with more than one part's machines was whole while a flood went
// on.
func TestAFloodDropsItsOwnReportsFirst(t *testing.T) {
	defer func(n int) { maxListed = n }(maxListed)
	maxListed = 1000
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	r := clockedReconciler(t, &now)
	forget(r)
	real := func(part, parts int) {
		inv := wire.Inventory{Provider: "bogus", Worker: "w1_pod-a", Report: "real", Part: part, Parts: parts, Time: r.o.Now()}
		for j := range 100 {
			inv.Instances = append(inv.Instances, wire.Instance{Cluster: "kept", Machine: fmt.Sprintf("k-%d-%d", part, j)})
		}
		r.handleInventory(t.Context(), inventoryPart{subject: wire.InventorySubject("bogus", "w1_pod-a"), inv: inv})
	}
	real(1, 0) // more parts follow
	floodParts(t, r, "forger", 30, 50)
	if r.inv.parts["bogus/w1_pod-a/real"] == nil {
		t.Fatal("the report being received from w1_pod-a was dropped to make room for another credential's flood")
	}
	if r.inv.listedN > maxListed {
		t.Errorf("reports being received list %d machines, want %d at most", r.inv.listedN, maxListed)
	}
	real(2, 2)
	if r.inv.parts["bogus/w1_pod-a/real"] != nil {
		t.Error("w1_pod-a's report is still being received after its last part")
	}
	kept := 0
	for key := range r.inv.orphans {
		if strings.HasPrefix(key, recordKey("kept", "")) {
			kept++
		}
	}
	if kept != 200 {
		t.Errorf("w1_pod-a's whole report made %d orphans of the 200 machines it lists, want all (it was taken whole)", kept)
	}
	if l := r.inv.loads["w1"]; l != nil {
		t.Errorf("w1's load %+v after its report ended, want none", *l)
	}
}
