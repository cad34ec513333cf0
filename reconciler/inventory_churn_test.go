package reconciler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// clockedReconciler is a reconciler on a server of its own whose clock
// reads *now; its loop does not run.
func clockedReconciler(t *testing.T, now *time.Time) *Reconciler {
	t.Helper()
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv.ClientURL())
	r, err := New(Options{JS: js, Log: zerolog.Nop(), Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// forget gives r no machine and an inventory that has heard nothing.
func forget(r *Reconciler) {
	r.inv = newInventory()
	r.machines = map[string]machineList{}
	r.counts = newFleetCounts()
	r.dirty, r.clock, r.unsent = map[string]bool{}, map[string]time.Time{}, map[string]*machine{}
}

// TestReportsJudgeWhatPredatesTheirList: a report judges only what was
// so before the worker's List began. A machine that turned Running after
// it, or whose record went after it, is judged by a later report: neither
// is suspected, so no report is asked for. (Suspecting them made a fleet
// whose machines keep coming ask for one 130,000-machine report after
// another.) What was so before the List is judged as ever, on the
// leader's clock whatever the worker's says.
func TestReportsJudgeWhatPredatesTheirList(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	now := t0
	r := clockedReconciler(t, &now)
	running := func(name string, since time.Time) {
		r.put(&machine{rec: &Record{Name: name, Shape: &Shape{Cluster: "c1", Provider: "inmemory",
			Role: wire.RoleWorker, Deployment: "md-0"}, Phase: wire.PhaseRunning, Running: StampOf(since)}})
	}
	n := 0
	// report sends a one-part report of listed, whose List the worker
	// says began at listed, arriving now.
	report := func(said time.Time, listed ...string) {
		t.Helper()
		n++
		inv := wire.Inventory{Provider: "inmemory", Worker: "w1", Report: "r" + string(rune('a'+n)), Parts: 1, Time: said}
		for _, m := range listed {
			inv.Instances = append(inv.Instances, wire.Instance{Cluster: "c1", Machine: m, Deployment: "md-0", Role: wire.RoleWorker})
		}
		r.handleInventory(t.Context(), inventoryPart{subject: wire.InventorySubject("inmemory", "w1"), inv: inv})
	}
	reset := func() { forget(r) }

	for _, tc := range []struct {
		name string
		said time.Time // the List's start, as the worker says it
		// Running since, relative to t0 (the report's arrival)
		old, fresh time.Duration
		suspects   []string
	}{
		{"clocks agree", t0.Add(-3 * time.Second), -10 * time.Minute, -2 * time.Second, []string{"old"}},
		{"a fresh machine is judged by the next report", t0.Add(-3 * time.Second), -10 * time.Minute, -500 * time.Millisecond, []string{"old"}},
		{"Running before the List began", t0.Add(-3 * time.Second), -10 * time.Minute, -5 * time.Second, []string{"fresh", "old"}},
		{"worker's clock an hour ahead", t0.Add(time.Hour), -10 * time.Minute, -500 * time.Millisecond, []string{"old"}},
		{"worker's clock a day behind", t0.Add(-24 * time.Hour), -10 * time.Minute, -30 * time.Second, []string{"old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reset()
			now = t0
			running("old", t0.Add(tc.old))
			running("fresh", t0.Add(tc.fresh))
			running("listed", t0.Add(-time.Hour))
			seq := r.inv.seq
			report(tc.said, "listed")
			var got []string
			for _, m := range []string{"fresh", "old"} {
				if _, ok := r.inv.suspects[recordKey("c1", m)]; ok {
					got = append(got, m)
				}
			}
			if !slices.Equal(got, tc.suspects) {
				t.Fatalf("suspected %v, want %v", got, tc.suspects)
			}
			if asked := r.inv.want || r.inv.seq > seq; asked != (len(got) > 0) {
				t.Errorf("a report asked for: %v, with suspects %v", asked, got)
			}
		})
	}

	t.Run("nothing fresh asks for nothing", func(t *testing.T) {
		reset()
		now = t0
		running("fresh", t0.Add(-time.Second/2))
		running("listed", t0.Add(-time.Hour))
		seq := r.inv.seq
		report(t0.Add(-3*time.Second), "listed")
		now = now.Add(2 * time.Second) // past requestInventory's once a second
		report(t0.Add(-time.Second), "listed", "fresh")
		if len(r.inv.suspects) != 0 || r.inv.want || r.inv.seq != seq {
			t.Fatalf("suspects %v, want %v, requests %d → %d: a machine newer than the List was suspected", r.inv.suspects, r.inv.want, seq, r.inv.seq)
		}
	})

	t.Run("a record removed while the List ran is no orphan", func(t *testing.T) {
		reset()
		now = t0.Add(-2 * time.Second)
		running("deleted", t0.Add(-time.Hour))
		running("listed", t0.Add(-time.Hour))
		r.remove("c1", "deleted") // its delete finished 2 s before the report came
		now = t0
		seq := r.inv.seq
		report(t0.Add(-3*time.Second), "listed", "deleted")
		if len(r.inv.orphans) != 0 || r.inv.want || r.inv.seq != seq {
			t.Fatalf("orphans %v (report due: %v): a machine deleted while the List ran was suspected", r.inv.orphans, r.inv.want)
		}
		// A List that began after the record went does list an orphan.
		now = t0.Add(10 * time.Second)
		report(t0.Add(5*time.Second), "listed", "deleted")
		if r.inv.orphans[recordKey("c1", "deleted")] == nil || r.inv.seq == seq {
			t.Fatalf("orphans %v: a machine listed after its record went is an orphan suspect", r.inv.orphans)
		}
		// Removals are forgotten once no List can predate them.
		now = t0.Add(listAge + 2*clockSlack)
		r.inv.pruneRemoved(now)
		if len(r.inv.removed) != 0 {
			t.Errorf("%d removals kept past listAge", len(r.inv.removed))
		}
	})
}

// A worker hears that a part of its report is taken only once the
// leader's loop has taken it: while the loop is busy, the part waits
// undecided and the worker sends no more, so a leader holds one part of
// each worker's report, not whole reports queued behind a long pass
// (130,000 machines from two workers were ~40 MiB of decoded parts).
func TestInventoryPartAnsweredOnceTaken(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv.ClientURL())
	var mu sync.Mutex
	var hold chan struct{} // while set, the loop's clock waits for it
	now := func() time.Time {
		mu.Lock()
		h := hold
		mu.Unlock()
		if h != nil {
			<-h
		}
		return time.Now()
	}
	r, err := New(Options{JS: js, Log: zerolog.Nop(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	release := func() {
		mu.Lock()
		if hold != nil {
			close(hold)
			hold = nil
		}
		mu.Unlock()
	}
	t.Cleanup(func() { release(); cancel(); <-done })

	part := func(report string, n int) []byte {
		data, err := wire.Encode(&wire.Inventory{Provider: "inmemory", Worker: "w1", Report: report, Part: n, Parts: 2, Time: time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	subject := wire.InventorySubject("inmemory", "w1")
	// The leader listens once its loop runs.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := nc.Request(subject, part("r1", 0), time.Second); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no leader took a part: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	mu.Lock()
	hold = make(chan struct{})
	mu.Unlock()
	answers, err := nc.SubscribeSync(nats.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(subject, answers.Subject, part("r2", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := answers.NextMsg(500 * time.Millisecond); err == nil {
		t.Fatal("a part was answered while the leader's loop was busy")
	}
	release()
	if _, err := answers.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("the part was not answered once the loop went on: %v", err)
	}
}

// A report in the making marks the machines it lists on their entries
// (one bit a report) instead of keeping their keys. The marks are each
// report's own: a report that never completes takes its marks with it, so
// the next report to hold its bit sees only what it listed itself; a
// machine whose entry is replaced while a report is in the making (a
// record change) keeps its mark; and past 32 reports in the making, a
// report without a bit still judges by what it listed.
func TestReportMarksAreTheirOwn(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	now := t0
	r := clockedReconciler(t, &now)
	reset := func() {
		forget(r)
		for _, name := range []string{"a", "b"} {
			r.put(&machine{rec: &Record{Name: name, Shape: &Shape{Cluster: "c1", Provider: "inmemory",
				Role: wire.RoleWorker, Deployment: "md-0"}, Phase: wire.PhaseRunning, Running: StampOf(t0.Add(-time.Hour))}})
		}
	}
	// part sends part n of worker's report (of: 0 while more follow),
	// listing machines of c1.
	part := func(worker string, n, of int, listed ...string) {
		t.Helper()
		inv := wire.Inventory{Provider: "inmemory", Worker: worker, Report: worker + "-r", Part: n, Parts: of, Time: now.Add(-time.Second)}
		for _, m := range listed {
			inv.Instances = append(inv.Instances, wire.Instance{Cluster: "c1", Machine: m, Deployment: "md-0", Role: wire.RoleWorker})
		}
		r.handleInventory(t.Context(), inventoryPart{subject: wire.InventorySubject("inmemory", worker), inv: inv})
	}
	suspects := func() []string {
		var got []string
		for _, m := range []string{"a", "b"} {
			if _, ok := r.inv.suspects[recordKey("c1", m)]; ok {
				got = append(got, m)
			}
		}
		return got
	}

	t.Run("a report that never completes takes its marks with it", func(t *testing.T) {
		reset()
		now = t0
		part("w1", 0, 0, "a", "b") // its last part never comes
		now = t0.Add(time.Minute + time.Second)
		part("w2", 0, 1, "a") // takes w1's bit, once w1's report is dropped
		if got := suspects(); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("suspected %v, want [b]: the second report saw the first one's marks", got)
		}
	})

	t.Run("a replaced entry keeps its mark", func(t *testing.T) {
		reset()
		now = t0
		part("w1", 0, 0, "a", "b")
		cur := r.lookup("c1", "b")
		next := cur.rec.clone()
		r.stored(cur, next, cur.rev+1) // a record change while the report is in the making
		part("w1", 1, 2)
		if got := suspects(); len(got) != 0 {
			t.Fatalf("suspected %v, want none: a record changed while the report listed it", got)
		}
	})

	t.Run("past 32 reports in the making", func(t *testing.T) {
		reset()
		now = t0
		for i := range 32 {
			part(fmt.Sprintf("x%02d", i), 0, 0, "a", "b")
		}
		if r.inv.bits != ^uint32(0) {
			t.Fatalf("bits in use %b, want all 32", r.inv.bits)
		}
		part("y", 0, 1, "a") // no bit left: its machines are kept by key
		if got := suspects(); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("suspected %v by a report without a bit, want [b]", got)
		}
		part("x00", 1, 2) // listed both: b is no longer suspected
		if got := suspects(); len(got) != 0 {
			t.Fatalf("suspected %v after a report that listed both, want none", got)
		}
		if r.inv.bits != ^uint32(1) {
			t.Errorf("bits in use %b, want all but the complete report's", r.inv.bits)
		}
	})
}
