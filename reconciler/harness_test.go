package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
	"github.com/gitfleet/gitfleet/sources"
)

// loopClass is a class of inmemory machines with a health check on the
// workers when the cluster has one.
const loopClass = `apiVersion: gitfleet.io/v1alpha1
kind: ClusterClass
metadata:
  name: small
spec:
  version: v1.31.2
  controlPlane:
    machineTemplate:
      provider: %[1]s
  workers:
    machineDeployments:
      - class: worker
        template:
          provider: %[1]s
`

const loopCluster = `apiVersion: gitfleet.io/v1alpha1
kind: Cluster
metadata:
  name: %s
spec:
  topology:
    classRef: {name: small}
    controlPlane:
      replicas: %d
    workers:
      machineDeployments:
        - class: worker
          name: md-0
          replicas: %d
`

// loop is one reconciler on a real NATS server and a real git repository,
// with no worker: the test reads the tasks from the stream and answers
// them on the events stream as a worker would.
type loop struct {
	t      testing.TB
	srv    *natstest.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	repo   *benchRepo
	src    *sources.Repo
	g      *git.Repository
	writer *status.Writer
	health *LoopHealth
	opts   Options
	sums   string // the status writer's summary cache, kept across starts

	revs   chan *sources.Revision
	cancel context.CancelFunc
	done   chan struct{}
	tasks  jetstream.Consumer
}

// newLoop makes a fleet repository with one cluster (cp control-plane
// machines, workers workers) of provider and a NATS server. Call start.
func newLoop(t testing.TB, provider string, cp, workers int) *loop {
	t.Helper()
	l := &loop{t: t, srv: natstest.Start(t), repo: &benchRepo{tb: t, dir: t.TempDir()},
		sums: filepath.Join(t.TempDir(), "status-sums")}
	l.nc, l.js = natstest.Connect(t, l.srv.ClientURL())
	l.repo.git("init", "-q", "-b", "main")
	l.repo.write("classes/small.yaml", fmt.Sprintf(loopClass, provider))
	l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", cp, workers))
	l.repo.commit("one cluster")
	var err error
	if l.src, err = sources.Open(t.Context(), sources.Options{Location: l.repo.dir}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.src.Close() })
	if l.g, err = git.PlainOpen(l.repo.dir); err != nil {
		t.Fatal(err)
	}
	l.health = NewLoopHealth()
	// The test answers no inventory request: a short wait for one.
	l.opts = Options{JS: l.js, Log: testLog(t, "daemon"), Tick: 50 * time.Millisecond, Health: l.health, InventoryWait: 100 * time.Millisecond}
	// The test is the worker: one pull consumer on every task.
	l.tasks, err = l.js.CreateOrUpdateConsumer(t.Context(), wire.StreamTasks, jetstream.ConsumerConfig{
		Durable: "test-worker", FilterSubject: wire.SubjectTasks + ".>", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// start runs a reconciler (a new leader) on the current head of main.
func (l *loop) start() {
	l.t.Helper()
	l.run()
	l.apply()
}

// run runs a reconciler (a new leader) and hands it no revision: the
// test sends them on l.revs.
func (l *loop) run() {
	l.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	var err error
	l.writer, err = status.NewWriter(ctx, status.Options{Repo: l.g, Interval: 50 * time.Millisecond, Logger: l.opts.Log,
		SumCache: l.sums})
	if err != nil {
		l.t.Fatal(err)
	}
	l.revs = make(chan *sources.Revision, 4)
	o := l.opts
	o.Revisions, o.Status = l.revs, l.writer
	r, err := New(o)
	if err != nil {
		l.t.Fatal(err)
	}
	go func() {
		defer close(l.done)
		if err := r.Run(ctx); err != nil {
			l.t.Errorf("reconciler: %v", err)
		}
	}()
	l.t.Cleanup(l.stop)
}

// apply hands the head of main to the reconciler.
func (l *loop) apply() {
	l.t.Helper()
	rev, err := l.src.Revision(l.t.Context(), "main")
	if err != nil {
		l.t.Fatal(err)
	}
	if rev.Rejected() {
		l.t.Fatalf("test fleet rejected: %v", rev.Err)
	}
	l.revs <- rev
}

// stop ends the reconciler (as a leader that stops) and flushes status.
func (l *loop) stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
	l.cancel = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = l.writer.Flush(ctx)
	_ = l.writer.Close()
}

// received is a task as the test worker took it.
type received struct {
	task  wire.Task
	msgID string
	msg   jetstream.Msg
}

// nextTasks fetches the tasks published so far, waiting up to a minute for
// at least n.
func (l *loop) nextTasks(n int) []received {
	l.t.Helper()
	var out []received
	deadline := time.Now().Add(time.Minute)
	for len(out) < n && time.Now().Before(deadline) {
		batch, err := l.tasks.FetchNoWait(100)
		if err != nil {
			l.t.Fatal(err)
		}
		for m := range batch.Messages() {
			task, err := wire.DecodeTask(m.Data())
			if err != nil {
				l.t.Fatalf("task on %s: %v", m.Subject(), err)
			}
			out = append(out, received{task: task, msgID: m.Headers().Get(jetstream.MsgIDHeader), msg: m})
		}
		if len(out) < n {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if len(out) < n {
		l.t.Fatalf("%d tasks within a minute, want %d: %v", len(out), n, out)
	}
	return out
}

// noMoreTasks checks that nothing more is published for a while.
func (l *loop) noMoreTasks(within time.Duration) {
	l.t.Helper()
	time.Sleep(within)
	batch, err := l.tasks.FetchNoWait(100)
	if err != nil {
		l.t.Fatal(err)
	}
	for m := range batch.Messages() {
		l.t.Errorf("unexpected task on %s: %s", m.Subject(), m.Data())
	}
}

// answer publishes an event for a task, as its worker would, and acks it.
func (l *loop) answer(r received, phase wire.Phase) {
	l.t.Helper()
	ev := wire.Event{TaskID: r.task.ID, Attempt: r.task.Attempt, Cluster: r.task.Machine.Cluster,
		Machine: r.task.Machine.Name, Phase: phase, Version: r.task.Machine.Version, Time: time.Now().UTC()}
	if phase == wire.PhaseRunning {
		// As the inmemory provider names its machines: the record keeps
		// the head only (Record.NamedID).
		ev.ProviderID = "test://" + r.task.Machine.Cluster + "/" + r.task.Machine.Name
	}
	l.event(ev)
	_ = r.msg.Ack()
}

// heartbeat publishes a heartbeat for m on nc, as its node would. It
// returns the error rather than failing the test: a flood sends from a
// goroutine of its own.
func heartbeat(nc *nats.Conn, m wire.Machine, healthy bool) error {
	data, err := wire.Encode(&wire.Heartbeat{Cluster: m.Cluster, Machine: m.Name, Version: m.Version, Healthy: healthy, Time: time.Now().UTC()})
	if err != nil {
		return err
	}
	return nc.Publish(wire.HeartbeatSubject(m.Cluster, m.Name), data)
}

func (l *loop) event(ev wire.Event) {
	l.t.Helper()
	data, err := wire.Encode(&ev)
	if err != nil {
		l.t.Fatal(err)
	}
	// On the subject of the event's worker's credential, as that worker
	// would publish it; on w1's when it names none, or a worker that is
	// no credential's (a forged one, which no subject could carry).
	from := ev.Worker
	if !wire.ValidCredential(wire.WorkerCredential(from)) {
		from = "w1"
	}
	if _, err := l.js.Publish(l.t.Context(), wire.EventSubject(ev.Cluster, from), data); err != nil {
		l.t.Fatal(err)
	}
}

// records reads every record in the bucket.
func (l *loop) records() map[string]*Record {
	l.t.Helper()
	return machineRecords(l.t, l.js)
}

// machineRecords reads every record in js's machines bucket, by machine
// name.
func machineRecords(t testing.TB, js jetstream.JetStream) map[string]*Record {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), wire.BucketMachines)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Record{}
	keys, err := kv.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		e, err := kv.Get(t.Context(), k)
		if err != nil {
			continue
		}
		rec, err := decodeRecord(k, e.Value())
		if err != nil {
			t.Fatal(err)
		}
		out[rec.Name] = rec
	}
	return out
}

// waitFor polls cond for up to a minute.
func (l *loop) waitFor(what string, cond func() (bool, string)) {
	l.t.Helper()
	deadline := time.Now().Add(time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		time.Sleep(25 * time.Millisecond)
	}
	l.t.Fatalf("%s: not within a minute: %s", what, last)
}

// waitRecords waits until the bucket holds machines whose phases, sorted,
// are want (e.g. "Pending Pending Running").
func (l *loop) waitRecords(want string) map[string]*Record {
	l.t.Helper()
	var recs map[string]*Record
	l.waitFor("records "+want, func() (bool, string) {
		recs = l.records()
		got := phases(recs)
		return got == want, got
	})
	return recs
}

func phases(recs map[string]*Record) string {
	var ps []string
	for _, r := range recs {
		ps = append(ps, string(r.Phase))
	}
	sortStrings(ps)
	return strings.Join(ps, " ")
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// statusSnapshot reads the status branch.
func (l *loop) statusSnapshot() *status.Snapshot {
	l.t.Helper()
	s, err := status.Read(l.g, "gitfleet/status")
	if err != nil {
		return &status.Snapshot{}
	}
	return s
}

// fleetYAML is fleet.yaml on the status branch as committed, "" before it
// is.
func (l *loop) fleetYAML() string {
	l.t.Helper()
	ref, err := l.g.Reference("refs/heads/gitfleet/status", true)
	if err != nil {
		return ""
	}
	c, err := l.g.CommitObject(ref.Hash())
	if err != nil {
		l.t.Fatal(err)
	}
	f, err := c.File("fleet.yaml")
	if err != nil {
		return ""
	}
	data, err := f.Contents()
	if err != nil {
		l.t.Fatal(err)
	}
	return data
}

// breakStore makes every write to the machines bucket fail (its stream
// accepts no message larger than one byte) until the returned func is
// called. Reads keep working, as with a store that is full.
func (l *loop) breakStore() (repair func()) {
	l.t.Helper()
	ctx := l.t.Context()
	s, err := l.js.Stream(ctx, "KV_"+wire.BucketMachines)
	if err != nil {
		l.t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	broken := cfg
	broken.MaxMsgSize = 1
	if _, err := l.js.UpdateStream(ctx, broken); err != nil {
		l.t.Fatal(err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if _, err := l.js.UpdateStream(context.Background(), cfg); err != nil {
				l.t.Fatal(err)
			}
		})
	}
}

// putRecord writes a record as an earlier leader would have.
func (l *loop) putRecord(rec *Record) {
	l.t.Helper()
	kv, err := l.js.KeyValue(l.t.Context(), wire.BucketMachines)
	if err != nil {
		l.t.Fatal(err)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		l.t.Fatal(err)
	}
	if _, err := kv.Put(l.t.Context(), rec.key(), data); err != nil {
		l.t.Fatal(err)
	}
}
