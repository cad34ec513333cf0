package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// cloudFleet is one cluster of inmemory machines (one control-plane
// machine, two workers) on a real NATS server, with a real worker whose
// cloud is the inmemory provider's KV bucket: the test changes that cloud
// through a provider of its own, as someone outside gitfleet would change
// a cloud.
type cloudFleet struct {
	t     *testing.T
	repo  *benchRepo
	js    jetstream.JetStream
	cloud *inmemory.Provider // another client of the worker's cloud
	recs  jetstream.KeyValue // the daemon's records
	// stopWorker stops the worker: no report comes from it any more.
	stopWorker func()
}

func newCloudFleet(t *testing.T) *cloudFleet {
	t.Helper()
	f := &cloudFleet{t: t, repo: &benchRepo{tb: t, dir: t.TempDir()}}
	f.repo.git("init", "-q", "-b", "main")
	f.repo.write("classes/small.yaml", fmt.Sprintf(loopClass, "inmemory"))
	f.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 2))
	f.repo.commit("one cluster")
	srv := natstest.Start(t)
	_, f.js = natstest.Connect(t, srv.ClientURL())
	ctx := t.Context()
	p, err := inmemory.New(ctx, f.js, inmemory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := providers.NewWorker(ctx, f.js, p, providers.WorkerOptions{Concurrency: 4, InventoryInterval: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = w.Run(wctx) }()
	f.stopWorker = func() { stop(); <-stopped }
	if f.cloud, err = inmemory.New(ctx, f.js, inmemory.Options{}); err != nil {
		t.Fatal(err)
	}
	if f.recs, err = f.js.KeyValue(ctx, wire.BucketMachines); err != nil {
		t.Fatal(err)
	}
	return f
}

// machines lists what the cloud has, as "cluster.name".
func (f *cloudFleet) machines() []string {
	list, err := f.cloud.List(f.t.Context())
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, in := range list {
		out = append(out, in.Cluster+"."+in.Name)
	}
	return out
}

// records reads the daemon's machine records.
func (f *cloudFleet) records() map[string]*Record {
	out := map[string]*Record{}
	keys, err := f.recs.Keys(f.t.Context())
	if err != nil && err != jetstream.ErrNoKeysFound {
		f.t.Fatal(err)
	}
	for _, k := range keys {
		e, err := f.recs.Get(f.t.Context(), k)
		if err != nil {
			continue
		}
		rec, err := decodeRecord(k, e.Value())
		if err != nil {
			f.t.Fatal(err)
		}
		out[k] = rec
	}
	return out
}

// converged: the cloud has exactly the three machines the records say
// are Running, and nothing else is in flight.
func (f *cloudFleet) converged() bool {
	recs := f.records()
	var running []string
	for k, r := range recs {
		if r.Phase != wire.PhaseRunning {
			return false
		}
		running = append(running, k)
	}
	slices.Sort(running)
	return len(running) == 3 && slices.Equal(running, f.machines())
}

func (f *cloudFleet) wait(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: not within a minute; cloud %v, records %v", what, f.machines(), f.summary())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *cloudFleet) summary() []string {
	var out []string
	for k, r := range f.records() {
		out = append(out, k+"="+string(r.Phase)+"/"+r.Reason)
	}
	slices.Sort(out)
	return out
}

// loseWorker deletes a worker from the cloud behind the daemon's back and
// returns it as "cluster.name".
func (f *cloudFleet) loseWorker() string {
	f.t.Helper()
	for _, k := range f.machines() {
		if strings.Contains(k, "-md-0-") {
			cluster, name, _ := strings.Cut(k, ".")
			if err := f.cloud.Delete(f.t.Context(), wire.Machine{Cluster: cluster, Name: name, Provider: inmemory.Name}); err != nil {
				f.t.Fatal(err)
			}
			return k
		}
	}
	f.t.Fatalf("no worker in the cloud: %v", f.machines())
	return ""
}

// TestInventoryReplacesMissingMachine: a Running machine its provider no
// longer has — with no health check and no heartbeats to notice — is
// recorded Failed with reason MachineMissing and replaced, without a
// create backoff on its pool.
func TestInventoryReplacesMissingMachine(t *testing.T) {
	f := newCloudFleet(t)
	_, m := runLeader(t, f.js, f.repo.dir)
	f.wait("three Running machines", f.converged)
	before := f.machines()
	lost := f.loseWorker()
	f.wait("the lost machine recorded missing", func() bool {
		r := f.records()[lost]
		return r == nil || r.Reason == ReasonMachineMissing
	})
	f.wait("the lost machine replaced", func() bool { return f.converged() && !slices.Contains(f.machines(), lost) })
	after := f.machines()
	if kept := slices.DeleteFunc(slices.Clone(before), func(k string) bool { return k == lost }); len(kept) != 2 ||
		!slices.Contains(after, kept[0]) || !slices.Contains(after, kept[1]) {
		t.Errorf("machines that kept running were touched: before %v, after %v", before, after)
	}
	if n := counter(t, m.Missing.WithLabelValues("inmemory", ReasonMachineMissing)); n != 1 {
		t.Errorf("gitfleet_machines_missing_total = %v, want 1", n)
	}
	if n := counter(t, m.CreateFailures.WithLabelValues("small", "inmemory")); n != 0 {
		t.Errorf("a missing machine counted as %v create failures; it is not one", n)
	}
	rkv, err := f.js.KeyValue(t.Context(), wire.BucketRollouts)
	if err != nil {
		t.Fatal(err)
	}
	if b := readRecords(t, rkv).Clusters["c1"].Backoff; len(b) > 0 {
		t.Errorf("the pool backs off after a missing machine: %+v", b)
	}
}

// TestInventoryOrphans: a machine the provider has and no record wants is
// counted as an orphan; with --orphans report it is left alone, with
// delete it is deleted after the grace period. The fleet's own machines
// are not touched either way.
func TestInventoryOrphans(t *testing.T) {
	for _, mode := range []string{OrphansReport, OrphansDelete} {
		t.Run(mode, func(t *testing.T) {
			f := newCloudFleet(t)
			_, m := runLeader(t, f.js, f.repo.dir, func(o *Options) {
				o.Orphans, o.OrphanGrace = mode, 500*time.Millisecond
			})
			f.wait("three Running machines", f.converged)
			fleet := f.machines()
			stray := wire.Machine{Name: "stray-1", Cluster: "c1", Role: wire.RoleWorker, Deployment: "md-0", Provider: inmemory.Name}
			if _, err := f.cloud.Create(t.Context(), stray); err != nil {
				t.Fatal(err)
			}
			gauge := m.Orphans.WithLabelValues("inmemory")
			f.wait("the stray counted as an orphan", func() bool { return gaugeValue(t, gauge) == 1 })
			if mode == OrphansReport {
				seen := counter(t, m.Inventories.WithLabelValues("inmemory"))
				f.wait("three more inventories", func() bool {
					return counter(t, m.Inventories.WithLabelValues("inmemory")) >= seen+3
				})
				if !slices.Contains(f.machines(), "c1.stray-1") || gaugeValue(t, gauge) != 1 {
					t.Fatalf("--orphans report: the stray was touched: cloud %v", f.machines())
				}
			} else {
				f.wait("the orphan deleted", func() bool { return !slices.Contains(f.machines(), "c1.stray-1") })
				f.wait("the orphan forgotten", func() bool { return gaugeValue(t, gauge) == 0 })
				if n := len(f.records()); n != 3 {
					t.Errorf("%d records after the orphan delete, want the fleet's 3", n)
				}
			}
			if got := slices.DeleteFunc(f.machines(), func(k string) bool { return k == "c1.stray-1" }); !slices.Equal(got, fleet) {
				t.Errorf("the fleet's machines changed: %v, want %v", got, fleet)
			}
		})
	}
}

// TestRebuildFromEmptyStore: the machines bucket is lost while the fleet
// runs. The next leader rebuilds its records from the provider's
// inventory and the status branch before it plans: it creates no machine,
// and no status commit says a machine that kept running was removed.
func TestRebuildFromEmptyStore(t *testing.T) {
	f := newCloudFleet(t)
	g, err := git.PlainOpen(f.repo.dir)
	if err != nil {
		t.Fatal(err)
	}
	withStatus := func(w *status.Writer) func(*Options) {
		return func(o *Options) { o.Status = w }
	}
	wA := newStatusWriter(t, g)
	stopA, _ := runLeader(t, f.js, f.repo.dir, withStatus(wA))
	f.wait("three Running machines", f.converged)
	fleet := f.machines()
	created := map[string]time.Time{}
	for k, r := range f.records() {
		created[k] = r.Created.Time()
	}
	stopA()
	closeStatusWriter(t, wA)
	tipA := statusTip(t, g)

	// The store is lost: the bucket is made again, empty.
	if err := f.js.DeleteKeyValue(t.Context(), wire.BucketMachines); err != nil {
		t.Fatal(err)
	}
	if err := natsbus.Ensure(t.Context(), f.js); err != nil {
		t.Fatal(err)
	}
	if f.recs, err = f.js.KeyValue(t.Context(), wire.BucketMachines); err != nil {
		t.Fatal(err)
	}

	wB := newStatusWriter(t, g)
	stopB, mB := runLeader(t, f.js, f.repo.dir, withStatus(wB))
	f.wait("the records rebuilt", f.converged)
	// The first plan after the rebuild publishes whatever it would create.
	deadline := time.Now().Add(time.Minute)
	for histogramCount(t, mB.PlanDuration) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the new leader did not plan within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopB()
	closeStatusWriter(t, wB)
	if got := f.machines(); !slices.Equal(got, fleet) {
		t.Errorf("machines after the rebuild %v, want the same %v", got, fleet)
	}
	if n := counter(t, mB.TasksPublished.WithLabelValues(string(wire.OpCreate))); n != 0 {
		t.Errorf("the new leader published %v creates; it must create nothing", n)
	}
	for k, r := range f.records() {
		if c := r.Created.Time(); !c.Equal(created[k].Truncate(time.Second)) && !c.Equal(created[k]) {
			t.Errorf("%s: created %v after the rebuild, %v before", k, r.Created, created[k])
		}
	}
	// Every status commit since the loss still lists the three machines.
	names := map[string]bool{}
	for _, k := range fleet {
		names[strings.TrimPrefix(k, "c1.")] = true
	}
	for c := range statusCommitsSince(t, g, tipA) {
		snap, err := status.ReadAt(g.Storer, c.Hash)
		if err != nil {
			t.Fatal(err)
		}
		cs := snap.Cluster("c1")
		if cs == nil {
			t.Fatalf("status commit %s %q has no c1", c.Hash, c.Message)
		}
		for n := range names {
			if !slices.ContainsFunc(cs.Machines, func(m status.MachineStatus) bool { return m.Name == n }) {
				t.Errorf("status commit %s %q drops machine %s, which kept running", c.Hash, firstLine(c.Message), n)
			}
		}
	}
}

func newStatusWriter(t *testing.T, g *git.Repository) *status.Writer {
	t.Helper()
	w, err := status.NewWriter(t.Context(), status.Options{Repo: g, Interval: 50 * time.Millisecond, Logger: testLog(t, "status")})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func closeStatusWriter(t *testing.T, w *status.Writer) {
	t.Helper()
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
}

func statusTip(t *testing.T, g *git.Repository) string {
	t.Helper()
	h, err := status.ResolveBranch(g, "gitfleet/status")
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// statusCommitsSince yields the status branch's commits after since,
// newest first.
func statusCommitsSince(t *testing.T, g *git.Repository, since string) func(func(*object.Commit) bool) {
	t.Helper()
	tip, err := status.ResolveBranch(g, "gitfleet/status")
	if err != nil {
		t.Fatal(err)
	}
	return func(yield func(*object.Commit) bool) {
		for h := tip; h.String() != since; {
			c, err := g.CommitObject(h)
			if err != nil {
				t.Fatal(err)
			}
			if !yield(c) || c.NumParents() == 0 {
				return
			}
			h = c.ParentHashes[0]
		}
	}
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// TestDeposedLeaderHandsEventsBack: a replica whose lease may be gone (it
// was paused past it) settles no event, not even one about a machine it
// never heard of, which a new leader may have created meanwhile: the
// event stays in the stream for whoever leads.
func TestDeposedLeaderHandsEventsBack(t *testing.T) {
	f := newCloudFleet(t)
	var deposed atomic.Bool
	_, m := runLeader(t, f.js, f.repo.dir, func(o *Options) {
		o.Fence = func() error {
			if deposed.Load() {
				return ErrNotLeader
			}
			return nil
		}
	})
	f.wait("three Running machines", f.converged)
	deposed.Store(true)
	data, _ := wire.Encode(&wire.Event{TaskID: "create.c1.c1-md-0-new", Attempt: 1, Cluster: "c1", Machine: "c1-md-0-new",
		Phase: wire.PhaseRunning, Time: time.Now()})
	if _, err := f.js.Publish(t.Context(), wire.EventSubject("c1", "w1"), data); err != nil {
		t.Fatal(err)
	}
	refused := m.Refused.WithLabelValues("event", refusedNoRecord)
	cons, err := f.js.Consumer(t.Context(), wire.StreamEvents, "gitfleet-reconciler")
	if err != nil {
		t.Fatal(err)
	}
	f.wait("the event handed back", func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.NumRedelivered > 0
	})
	if n := counter(t, refused); n != 0 {
		t.Fatalf("a deposed leader settled an event (%v refused as about no record)", n)
	}
	// Leading again, the same event is handled.
	deposed.Store(false)
	f.wait("the event handled once the lease is back", func() bool { return counter(t, refused) == 1 })
}
