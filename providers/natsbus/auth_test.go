package natsbus_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestGeneratedAuth: the embedded server requires the credentials it made
// at first start. With the worker's, a worker can do its work (take and ack
// a task, publish its event, read records) but cannot publish a task or a
// heartbeat; a node's credentials publish its own heartbeats and nothing
// else. Everything secret is readable by its owner alone, and a restart
// keeps the same account (the store's streams are still there).
func TestGeneratedAuth(t *testing.T) {
	dir := t.TempDir()
	bus := openEmbedded(t, dir)
	if bus.Auth == nil {
		t.Fatal("the embedded server runs without generated credentials")
	}
	if err := natsbus.Ensure(ctx(t), bus.JS); err != nil {
		t.Fatal(err)
	}
	url := bus.URL

	// No credentials, no connection.
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("connected to the embedded server without credentials")
	}

	authDir := filepath.Join(dir, natsbus.AuthDirName)
	if fi, err := os.Stat(authDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v, mode %v; want 0700", authDir, err, fi.Mode().Perm())
	}
	files, _ := os.ReadDir(authDir)
	for _, f := range files {
		fi, _ := f.Info()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v; want 0600", f.Name(), fi.Mode().Perm())
		}
	}

	checkPermissions(t, bus, authDir)

	// A restart on the same data dir keeps the account, so the streams
	// are still there.
	bus.Close()
	bus = openEmbedded(t, dir)
	defer bus.Close()
	if _, err := bus.JS.Stream(ctx(t), wire.StreamTasks); err != nil {
		t.Errorf("after a restart: %v", err)
	}
}

// workerCredsFile writes the credentials of worker credential name, of
// the inmemory provider, as gitfleet nats-creds --worker makes them from
// authDir's keys.
func workerCredsFile(t *testing.T, authDir, name string) string {
	t.Helper()
	a, err := natsbus.LoadAuth(authDir)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := a.WorkerCreds(name, "inmemory")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, provider, err := natsbus.CredsWorker(path); err != nil || got != name || provider != "inmemory" {
		t.Errorf("CredsWorker of %s's credentials = %q, %q, %v; want %[1]s, inmemory", name, got, provider, err)
	}
	return path
}

// checkPermissions checks the generated layout on a running server, bus
// being the daemon's connection: a worker's credentials (made from
// authDir's keys for worker w1) do a worker's work and cannot publish a
// task, write a record, change a stream or send a heartbeat, nor speak in
// another worker's name or hear another's replies; a node's credentials,
// minted with the signer file, publish its own heartbeats and nothing else.
func checkPermissions(t *testing.T, bus *natsbus.Bus, authDir string) {
	t.Helper()
	url := bus.URL
	w1Creds := workerCredsFile(t, authDir, "w1")
	// A worker of another process gets the node signer from its file.
	signer, err := natsbus.LoadNodeSigner(filepath.Join(authDir, natsbus.NodeSignerFile))
	if err != nil {
		t.Fatal(err)
	}
	// The daemon's subscriptions see what reaches the subjects.
	seen := make(chan *nats.Msg, 16)
	sub, err := bus.Conn.ChanSubscribe("gitfleet.heartbeat.>", seen)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	worker, err := nats.Connect(url, nats.UserCredentials(w1Creds), nats.CustomInboxPrefix(wire.WorkerInboxPrefix("w1")))
	if err != nil {
		t.Fatalf("worker credentials: %v", err)
	}
	defer worker.Close()
	wjs, err := jetstream.New(worker)
	if err != nil {
		t.Fatal(err)
	}
	// What a worker does: make sure the streams are there, take a task and
	// ack it, report an event, read a record.
	if err := natsbus.EnsureMissing(ctx(t), wjs); err != nil {
		t.Fatalf("worker: EnsureMissing: %v", err)
	}
	pub := natsbus.NewPublisher(bus.JS)
	task := wire.Task{ID: "create.c.m1", Attempt: 1, Operation: wire.OpCreate, Machine: wire.Machine{Name: "m1", Cluster: "c", Provider: "inmemory"}}
	if _, err := pub.Publish(ctx(t), &task); err != nil {
		t.Fatal(err)
	}
	cons, err := wjs.CreateOrUpdateConsumer(ctx(t), wire.StreamTasks, jetstream.ConsumerConfig{Durable: "inmemory", FilterSubject: "gitfleet.tasks.inmemory.>", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatalf("worker: consumer: %v", err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatalf("worker: fetch: %v", err)
	}
	got := 0
	for m := range batch.Messages() {
		got++
		if err := m.DoubleAck(ctx(t)); err != nil {
			t.Errorf("worker: ack: %v", err)
		}
	}
	if got != 1 {
		t.Fatalf("worker fetched %d tasks, want 1 (%v)", got, batch.Error())
	}
	data, _ := wire.Encode(&wire.Event{TaskID: task.ID, Attempt: 1, Cluster: "c", Machine: "m1", Phase: wire.PhaseRunning, Time: time.Now()})
	if _, err := wjs.Publish(ctx(t), wire.EventSubject("c", "w1"), data); err != nil {
		t.Errorf("worker: publish an event: %v", err)
	}
	if _, err := wjs.Publish(ctx(t), wire.EventSubject("c", "w1_pod-a"), data); err != nil {
		t.Errorf("worker: publish an event as w1_pod-a: %v", err)
	}
	checkNotInAnothersName(t, bus, worker, data)
	recs, err := wjs.KeyValue(ctx(t), wire.BucketMachines)
	if err != nil {
		t.Fatalf("worker: machines bucket: %v", err)
	}
	dkv, err := bus.JS.KeyValue(ctx(t), wire.BucketMachines)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dkv.Put(ctx(t), "c.m1", []byte(`{"taskID":"create.c.m1","phase":"Running"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := recs.Get(ctx(t), "c.m1"); err != nil {
		t.Errorf("worker: read a record: %v", err)
	}
	// The inmemory provider's cloud, as gitfleet worker --provider
	// inmemory keeps it: a machine made and listed (the inventory).
	cloud, err := inmemory.New(ctx(t), wjs, inmemory.Options{})
	if err != nil {
		t.Fatalf("worker: inmemory: %v", err)
	}
	if _, err := cloud.Create(ctx(t), wire.Machine{Name: "m1", Cluster: "c", Role: wire.RoleWorker, Provider: inmemory.Name, Version: "v1.31.2"}); err != nil {
		t.Fatalf("worker: inmemory create: %v", err)
	}
	if list, err := cloud.List(ctx(t)); err != nil || len(list) != 1 {
		t.Errorf("worker: inmemory list: %d machines, %v; want the one made", len(list), err)
	}
	// What a worker may not do: publish a task (it would stay unstored),
	// write a record, change a stream, send a heartbeat.
	stream, _ := bus.JS.Stream(ctx(t), wire.StreamTasks)
	before, _ := stream.Info(ctx(t))
	forged, _ := wire.Encode(&wire.Task{ID: "create.c.evil", Operation: wire.OpCreate, Machine: wire.Machine{Name: "evil", Cluster: "c", Provider: "inmemory"}})
	short, cancel := contextWithTimeout(t, time.Second)
	if _, err := wjs.Publish(short, wire.TaskSubject("inmemory", "c", "evil"), forged); err == nil {
		t.Error("worker credentials published a task")
	}
	cancel()
	after, _ := stream.Info(ctx(t))
	if after.State.LastSeq != before.State.LastSeq {
		t.Errorf("a worker's task reached the task stream (sequence %d → %d)", before.State.LastSeq, after.State.LastSeq)
	}
	short, cancel = contextWithTimeout(t, time.Second)
	if _, err := recs.Put(short, "c.evil", []byte("{}")); err == nil {
		t.Error("worker credentials wrote a machine record")
	}
	cancel()
	short, cancel = contextWithTimeout(t, time.Second)
	if _, err := wjs.CreateOrUpdateStream(short, natsbus.TaskStreamConfig()); err == nil {
		t.Error("worker credentials changed the task stream")
	}
	cancel()
	_ = worker.Publish(wire.HeartbeatSubject("c", "m1"), []byte("{}"))
	_ = worker.Flush()

	// A node's credentials: its own heartbeats only.
	creds, err := signer.Creds("c", "m1")
	if err != nil {
		t.Fatal(err)
	}
	credsFile := filepath.Join(t.TempDir(), "nats.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	creds2, err := signer.Creds("c", "m2")
	if err != nil {
		t.Fatal(err)
	}
	credsFile2 := filepath.Join(t.TempDir(), "nats.creds")
	if err := os.WriteFile(credsFile2, creds2, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range []struct{ creds, own, other string }{{credsFile, "m1", "m2"}, {credsFile2, "m2", "m1"}} {
		node, err := nats.Connect(url, nats.UserCredentials(n.creds))
		if err != nil {
			t.Fatalf("node credentials: %v", err)
		}
		_ = node.Publish(wire.HeartbeatSubject("c", n.other), []byte("forged"))
		_ = node.Publish(wire.TaskSubject("inmemory", "c", n.own), forged)
		_ = node.Publish(wire.HeartbeatSubject("c", n.own), []byte("own"))
		_ = node.Flush()
		node.Close()
	}
	deadline := time.After(10 * time.Second)
	var heard []string
	for len(heard) < 2 {
		select {
		case m := <-seen:
			heard = append(heard, m.Subject+"="+string(m.Data))
		case <-deadline:
			t.Fatalf("heard %v; want each node's own heartbeat", heard)
		}
	}
	select {
	case m := <-seen:
		heard = append(heard, m.Subject+"="+string(m.Data))
	case <-time.After(300 * time.Millisecond):
	}
	want := []string{"gitfleet.heartbeat.c.m1=own", "gitfleet.heartbeat.c.m2=own"}
	if len(heard) != 2 || heard[0] != want[0] || heard[1] != want[1] {
		t.Errorf("heartbeats heard %v; want only %v (no forged one, none from the worker)", heard, want)
	}
	if _, err := signer.Creds("c", "m1.>"); err == nil {
		t.Error("a node name with subject wildcards was minted")
	}

	// A real worker of the inmemory provider, on the worker's credentials,
	// runs a task to its end (in place of the test's consumer).
	if err := bus.JS.DeleteConsumer(ctx(t), wire.StreamTasks, "inmemory"); err != nil {
		t.Fatal(err)
	}
	p, err := inmemory.New(ctx(t), wjs, inmemory.Options{})
	if err != nil {
		t.Fatalf("inmemory provider on worker credentials: %v", err)
	}
	w, err := providers.NewWorker(ctx(t), wjs, p, providers.WorkerOptions{ID: "w1_pod-a"})
	if err != nil {
		t.Fatalf("worker on worker credentials: %v", err)
	}
	wctx, stop := context.WithCancel(t.Context())
	go func() { _ = w.Run(wctx) }()
	defer stop()
	if _, err := dkv.Put(ctx(t), "c.m3", []byte(`{"taskID":"create.c.m3","attempt":1,"phase":"Pending"}`)); err != nil {
		t.Fatal(err)
	}
	events, err := bus.Conn.SubscribeSync(wire.EventSubject("c", "w1"))
	if err != nil {
		t.Fatal(err)
	}
	t3 := wire.Task{ID: "create.c.m3", Attempt: 1, Operation: wire.OpCreate, Machine: wire.Machine{Name: "m3", Cluster: "c", Provider: "inmemory"}}
	if _, err := pub.Publish(ctx(t), &t3); err != nil {
		t.Fatal(err)
	}
	m, err := events.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no event from a worker on worker credentials: %v", err)
	}
	if ev, err := wire.DecodeEvent(m.Data); err != nil || ev.Phase != wire.PhaseRunning {
		t.Errorf("event %s (%v); want Running", m.Data, err)
	}
	stop()

}

// checkNotInAnothersName: worker w1's connection (with event, a valid
// event) can publish no event or inventory on another credential's
// subjects or on those earlier workers shared, and hears no reply sent to
// another inbox than its own.
func checkNotInAnothersName(t *testing.T, bus *natsbus.Bus, worker *nats.Conn, event []byte) {
	t.Helper()
	wjs, err := jetstream.New(worker)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := bus.JS.Stream(ctx(t), wire.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := stream.Info(ctx(t))
	for _, subject := range []string{wire.EventSubject("c", "w2"), wire.EventSubject("c", "w2_w1"), wire.SubjectEvents + ".c", wire.SubjectEvents + ".c.m1"} {
		short, cancel := contextWithTimeout(t, time.Second)
		if _, err := wjs.Publish(short, subject, event); err == nil {
			t.Errorf("worker w1 published an event on %s", subject)
		}
		cancel()
	}
	after, _ := stream.Info(ctx(t))
	if after.State.LastSeq != before.State.LastSeq {
		t.Errorf("worker w1's events in another's name reached the event stream (sequence %d → %d)", before.State.LastSeq, after.State.LastSeq)
	}
	inventories := make(chan *nats.Msg, 8)
	isub, err := bus.Conn.ChanSubscribe(wire.SubjectInventory+".>", inventories)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = isub.Unsubscribe() }()
	if err := bus.Conn.Flush(); err != nil {
		t.Fatal(err)
	}
	// An empty complete report in w2's name would have every machine w2
	// holds found gone and replaced.
	empty := []byte(`{"apiVersion":"gitfleet.io/wire/v1","provider":"inmemory","worker":"w2","report":"r","part":1,"parts":1,"machines":[]}`)
	// And one in its own name, of another provider than its own, whose
	// report would cover every machine of that provider (local's covers
	// its worker's only, whatever it says, but docker's does not).
	ownOther := []byte(`{"apiVersion":"gitfleet.io/wire/v1","provider":"docker","worker":"w1","report":"r","part":1,"parts":1,"machines":[]}`)
	_ = worker.Publish(wire.InventorySubject("docker", "w1"), ownOther)
	for _, subject := range []string{wire.InventorySubject("inmemory", "w2"), wire.InventorySubject("inmemory", "w2_x"), wire.SubjectInventory + ".inmemory.w2"} {
		_ = worker.Publish(subject, empty)
	}
	_ = worker.Publish(wire.InventorySubject("inmemory", "w1"), []byte("own"))
	_ = worker.Flush()
	// Its own report is published last: once it is heard, every report
	// NATS let through has been.
	own := false
	for deadline := time.After(5 * time.Second); !own; {
		select {
		case m := <-inventories:
			if own = m.Subject == wire.InventorySubject("inmemory", "w1"); !own {
				t.Errorf("worker w1's report in another's name, or of another provider, reached %s", m.Subject)
			}
		case <-deadline:
			t.Fatal("worker w1's own report never arrived")
		}
	}
	select {
	case m := <-inventories:
		t.Errorf("worker w1's report in another's name, or of another provider, reached %s", m.Subject)
	case <-time.After(300 * time.Millisecond):
	}
	// Nor through a stream of its own settings: the inmemory bucket's
	// stream, made or changed to republish what the worker writes in the
	// bucket, would put it on any subject, in any name, past NATS's
	// permissions (the server publishes it). The daemon makes the bucket.
	cloud := jetstream.StreamConfig{Name: "KV_" + inmemory.Bucket, Subjects: []string{"$KV." + inmemory.Bucket + ".>"}, MaxMsgsPerSubject: 1,
		RePublish: &jetstream.RePublish{Source: "$KV." + inmemory.Bucket + ".forged", Destination: wire.InventorySubject("inmemory", "w2")}}
	for what, change := range map[string]func(context.Context, jetstream.StreamConfig) (jetstream.Stream, error){
		"made": wjs.CreateStream, "changed": wjs.UpdateStream} {
		short, cancel := contextWithTimeout(t, time.Second)
		if _, err := change(short, cloud); err == nil {
			t.Errorf("worker w1 %s the inmemory bucket's stream, republishing to %s", what, cloud.RePublish.Destination)
		}
		cancel()
	}
	short, cancel := contextWithTimeout(t, 5*time.Second)
	if _, err := wjs.Publish(short, "$KV."+inmemory.Bucket+".forged", empty); err != nil {
		t.Errorf("worker w1 cannot write in the inmemory bucket: %v", err)
	}
	cancel()
	select {
	case m := <-inventories:
		t.Errorf("worker w1's report in another's name reached %s through the inmemory bucket", m.Subject)
	case <-time.After(300 * time.Millisecond):
	}
	checkNoPushInAnothersName(t, bus, wjs, inventories, event)
	// Another inbox: the daemon's, or another worker's.
	snoop, err := worker.SubscribeSync("_INBOX.>")
	if err == nil {
		_ = worker.Flush()
		_ = bus.Conn.Publish("_INBOX.daemon-reply", []byte("secret"))
		_ = bus.Conn.Publish(wire.WorkerInboxPrefix("w2")+".reply", []byte("secret"))
		_ = bus.Conn.Flush()
		if m, err := snoop.NextMsg(300 * time.Millisecond); err == nil {
			t.Errorf("worker w1 heard a reply on %s", m.Subject)
		}
	}
}

// TestLegacyWorkerCredsRevoked: the worker.creds an earlier version wrote
// (one user every worker shared, allowed to publish events and
// inventories in any worker's name) is refused once this version starts
// on the data dir, and the file is gone; the daemon's own credentials and
// a node's still connect.
func TestLegacyWorkerCredsRevoked(t *testing.T) {
	dir := t.TempDir()
	authDir := filepath.Join(dir, natsbus.AuthDirName)
	if _, err := natsbus.LoadAuth(authDir); err != nil {
		t.Fatal(err)
	}
	legacy, _ := natstest.LegacyWorkerCreds(t, authDir)
	legacyFile := filepath.Join(authDir, natsbus.LegacyWorkerCredsFile)
	kept := filepath.Join(t.TempDir(), "copy-on-a-worker-host.creds")
	if err := os.WriteFile(kept, legacy, 0o600); err != nil {
		t.Fatal(err)
	}
	node, err := natsbus.LoadNodeSigner(filepath.Join(authDir, natsbus.NodeSignerFile))
	if err != nil {
		t.Fatal(err)
	}
	nodeCreds, _ := node.Creds("c", "m1")
	nodeFile := filepath.Join(t.TempDir(), "node.creds")
	if err := os.WriteFile(nodeFile, nodeCreds, 0o600); err != nil {
		t.Fatal(err)
	}

	bus := openEmbedded(t, dir)
	if nc, err := nats.Connect(bus.URL, nats.UserCredentials(kept)); err == nil {
		nc.Close()
		t.Error("the shared worker.creds of an earlier version still connects")
	}
	if _, err := os.Stat(legacyFile); !os.IsNotExist(err) {
		t.Errorf("%s: %v; want it removed", legacyFile, err)
	}
	for _, f := range []string{nodeFile, filepath.Join(authDir, natsbus.DaemonCredsFile), workerCredsFile(t, authDir, "w1")} {
		nc, err := nats.Connect(bus.URL, nats.UserCredentials(f))
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		nc.Close()
	}
	// And after another start, which finds no worker.creds: still revoked.
	bus.Close()
	bus = openEmbedded(t, dir)
	defer bus.Close()
	if nc, err := nats.Connect(bus.URL, nats.UserCredentials(kept)); err == nil {
		nc.Close()
		t.Error("after a second start, the shared worker.creds of an earlier version connects again")
	}
}

// TestAuthNone: --nats-auth none runs the embedded server open, as before.
func TestAuthNone(t *testing.T) {
	bus, err := natsbus.Open(ctx(t), natsbus.Options{URL: natsbus.Embedded, DataDir: t.TempDir(), Auth: natsbus.AuthNone}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	nc, err := nats.Connect(bus.URL)
	if err != nil {
		t.Fatalf("--nats-auth none: %v", err)
	}
	nc.Close()
	if _, err := natsbus.Open(ctx(t), natsbus.Options{URL: natsbus.Embedded, DataDir: t.TempDir(), Auth: "nkeys"}, zerolog.Nop()); err == nil {
		t.Error("--nats-auth nkeys was accepted")
	}
}

func contextWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), d)
}

// TestExternalServerLayout: the same layout on an external nats-server
// process, configured with ServerConfig as docs/operations.md says: the
// daemon connects with daemon.creds, and the permissions hold.
func TestExternalServerLayout(t *testing.T) {
	authDir := filepath.Join(t.TempDir(), natsbus.AuthDirName)
	a, err := natsbus.LoadAuth(authDir)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := a.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"operator.nk", "account.nk", "system.nk", natsbus.NodeSignerFile} {
		b, err := os.ReadFile(filepath.Join(authDir, f))
		seed := strings.Fields(string(b))
		if err != nil || len(seed) == 0 || strings.Contains(conf, seed[len(seed)-1]) {
			t.Errorf("%s: %v, or the server config holds its seed", f, err)
		}
	}
	path := filepath.Join(t.TempDir(), "gitfleet.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartProcess(t, "-c", path)
	if nc, err := nats.Connect(srv.URL()); err == nil {
		nc.Close()
		t.Fatal("the configured server let a client in without credentials")
	}
	bus, err := natsbus.Open(ctx(t), natsbus.Options{URL: srv.URL(), CredsFile: filepath.Join(authDir, natsbus.DaemonCredsFile)}, zerolog.Nop())
	if err != nil {
		t.Fatalf("daemon credentials: %v", err)
	}
	defer bus.Close()
	if err := natsbus.Ensure(ctx(t), bus.JS); err != nil {
		t.Fatalf("daemon: Ensure: %v", err)
	}
	checkPermissions(t, bus, authDir)
}

// TestCredsForbid: of the generated credentials, the worker's visibly may
// not publish a heartbeat (its JWT lists what it may publish) and may
// publish an event; the daemon's may publish anything; a node's, made by a
// scoped key, carry no permissions of their own and are not reported. A
// deny that matches forbids; a file that is no credentials is an error.
func TestCredsForbid(t *testing.T) {
	dir := t.TempDir()
	a, err := natsbus.LoadAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	nodeCreds, err := a.NodeSigner().Creds("c", "m")
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node.creds")
	denyAll := filepath.Join(dir, "deny.creds")
	if err := os.WriteFile(node, nodeCreds, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(denyAll, denyingCreds(t, "gitfleet.heartbeat.>"), 0o600); err != nil {
		t.Fatal(err)
	}
	heartbeat := wire.HeartbeatSubject("c", "m")
	worker, err := a.WorkerCreds("w1", "local")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "w1.creds"), worker, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file, subject string
		want          bool
	}{
		{"w1.creds", heartbeat, true},
		{"w1.creds", wire.EventSubject("c", "w1"), false},
		{"w1.creds", wire.EventSubject("c", "w2"), true},
		{natsbus.DaemonCredsFile, heartbeat, false},
		{"node.creds", heartbeat, false},
		{"deny.creds", heartbeat, true},
		{"deny.creds", wire.SubjectEvents + ".c", false},
	} {
		got, err := natsbus.CredsForbid(filepath.Join(dir, c.file), c.subject)
		if err != nil || got != c.want {
			t.Errorf("%s publishing %s: forbidden %t, %v; want %t", c.file, c.subject, got, err, c.want)
		}
	}
	bad := filepath.Join(dir, "bad.creds")
	if err := os.WriteFile(bad, []byte("not credentials\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := natsbus.CredsForbid(bad, heartbeat); err == nil {
		t.Error("a file that holds no credentials gave no error")
	}
}

// denyingCreds is a user's credentials whose JWT denies publishing deny
// and allows everything else.
func denyingCreds(t *testing.T, deny string) []byte {
	t.Helper()
	account, _ := nkeys.CreateAccount()
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	uc := jwt.NewUserClaims(pub)
	uc.Pub.Deny.Add(deny)
	j, err := uc.Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(j, seed)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

// checkNoPushInAnothersName: a worker may make consumers (of the task
// stream, the records, the inmemory bucket it writes) and NATS checks no
// permission on a push consumer's deliver subject, so the server itself
// would deliver what the worker wrote in its bucket on a subject the
// worker may not publish on. It delivers only to a subscription of that
// very subject (nats-server's push consumers wait for literal interest),
// and the leader's are wildcards (gitfleet.inventory.>, gitfleet.heartbeat.>,
// the event stream's gitfleet.events.>, the JetStream API's $JS.API.>):
// nothing reaches them, which this holds against a server that would
// change it. (What a push consumer delivers carries the subject it was
// stored under, here $KV.…, which the leader's check of a report's or an
// event's subject would refuse too.)
func checkNoPushInAnothersName(t *testing.T, bus *natsbus.Bus, wjs jetstream.JetStream, inventories chan *nats.Msg, event []byte) {
	t.Helper()
	beats := make(chan *nats.Msg, 8)
	bsub, err := bus.Conn.ChanSubscribe(wire.SubjectHeartbeats+".>", beats)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bsub.Unsubscribe() }()
	if err := bus.Conn.Flush(); err != nil {
		t.Fatal(err)
	}
	streamSeq := func(name string) uint64 {
		st, err := bus.JS.Stream(ctx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	records := "KV_" + wire.BucketMachines
	recs, err := bus.JS.KeyValue(ctx(t), wire.BucketMachines)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recs.Put(ctx(t), "c.m1", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	events, recsBefore := streamSeq(wire.StreamEvents), streamSeq(records)
	report := []byte(`{"apiVersion":"gitfleet.io/wire/v1","provider":"inmemory","worker":"w2","report":"p","part":1,"parts":1,"machines":[]}`)
	beat := []byte(`{"apiVersion":"gitfleet.io/wire/v1","cluster":"c","machine":"m1","ready":false}`)
	made := 0
	for i, c := range []struct {
		deliver string
		data    []byte
	}{
		{wire.InventorySubject("inmemory", "w2"), report},
		{wire.EventSubject("c", "w2"), event},
		{wire.SubjectHeartbeats + ".c.m1", beat},
		{"$JS.API.STREAM.PURGE." + records, nil}, // an empty body purges it all
	} {
		key := fmt.Sprintf("push%d", i)
		short, cancel := contextWithTimeout(t, 5*time.Second)
		if _, err := wjs.Publish(short, "$KV."+inmemory.Bucket+"."+key, c.data); err != nil {
			t.Fatalf("worker w1 cannot write in the inmemory bucket: %v", err)
		}
		if _, err := wjs.CreateConsumer(short, "KV_"+inmemory.Bucket, jetstream.ConsumerConfig{DeliverSubject: c.deliver,
			FilterSubject: "$KV." + inmemory.Bucket + "." + key, AckPolicy: jetstream.AckNonePolicy}); err == nil {
			made++
		}
		cancel()
	}
	if made == 0 {
		t.Log("the server refused every push consumer")
	}
	select {
	case m := <-inventories:
		t.Errorf("a push consumer of worker w1 delivered a report in another's name on %s", m.Subject)
	case m := <-beats:
		t.Errorf("a push consumer of worker w1 delivered a heartbeat on %s", m.Subject)
	case <-time.After(time.Second):
	}
	if got := streamSeq(wire.StreamEvents); got != events {
		t.Errorf("a push consumer of worker w1 put an event in another's name in the event stream (sequence %d → %d)", events, got)
	}
	if _, err := recs.Get(ctx(t), "c.m1"); err != nil || streamSeq(records) != recsBefore {
		t.Errorf("a push consumer of worker w1 reached the records through the JetStream API: %v", err)
	}
}
