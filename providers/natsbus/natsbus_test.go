package natsbus_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func openEmbedded(t *testing.T, dir string) *natsbus.Bus {
	t.Helper()
	bus, err := natsbus.Open(ctx(t), natsbus.Options{URL: natsbus.Embedded, DataDir: dir}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return bus
}

func TestEnsureIsIdempotentAndTasksSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	bus := openEmbedded(t, dir)
	for range 2 {
		if err := natsbus.Ensure(ctx(t), bus.JS); err != nil {
			t.Fatalf("Ensure: %v", err)
		}
	}
	s, err := bus.JS.Stream(ctx(t), wire.StreamTasks)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s.CachedInfo().Config; cfg.Retention != jetstream.WorkQueuePolicy || cfg.Duplicates != natsbus.DedupWindow {
		t.Errorf("%s: retention %v, duplicates %v; want work queue and %v", wire.StreamTasks, cfg.Retention, cfg.Duplicates, natsbus.DedupWindow)
	}
	kv, err := bus.JS.KeyValue(ctx(t), wire.BucketLeader)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := kv.Status(ctx(t)); st.TTL() != natsbus.LeaderTTL {
		t.Errorf("leader bucket TTL %v; want %v", st.TTL(), natsbus.LeaderTTL)
	}

	// The same task published twice is stored once.
	pub := natsbus.NewPublisher(bus.JS)
	task := wire.Task{ID: "t-1", Operation: wire.OpCreate, Machine: wire.Machine{Name: "m", Cluster: "c", Provider: "inmemory"}}
	for range 2 {
		if _, err := pub.Publish(ctx(t), &task); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if n := msgs(t, bus.JS); n != 1 {
		t.Errorf("tasks stored after publishing one task twice: %d; want 1", n)
	}
	bus.Close()

	bus = openEmbedded(t, dir)
	defer bus.Close()
	if err := natsbus.Ensure(ctx(t), bus.JS); err != nil {
		t.Fatal(err)
	}
	if n := msgs(t, bus.JS); n != 1 {
		t.Errorf("tasks after a restart on the same data dir: %d; want 1", n)
	}
}

func msgs(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := js.Stream(ctx(t), wire.StreamTasks)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestPublishRejectsATaskWithoutProvider(t *testing.T) {
	bus := openEmbedded(t, t.TempDir())
	defer bus.Close()
	task := wire.Task{ID: "t-1", Operation: wire.OpCreate, Machine: wire.Machine{Name: "m", Cluster: "c"}}
	_, err := natsbus.NewPublisher(bus.JS).Publish(ctx(t), &task)
	if err == nil || !strings.Contains(err.Error(), "machine needs provider, cluster and name") {
		t.Fatalf("Publish without provider: %v", err)
	}
}

func TestConnectWithToken(t *testing.T) {
	url := natstest.StartWithToken(t, "s3cret")
	_, err := natsbus.Connect(ctx(t), url, natsbus.Options{Token: "wrong"}, zerolog.Nop())
	if !errors.Is(err, natsbus.ErrConnect) || !strings.Contains(err.Error(), url) {
		t.Errorf("wrong token: %v; want ErrConnect naming the URL", err)
	}
	t.Setenv("GITFLEET_NATS_TOKEN", "s3cret")
	nc, err := natsbus.Connect(ctx(t), url, natsbus.Options{}, zerolog.Nop())
	if err != nil {
		t.Fatalf("token from $GITFLEET_NATS_TOKEN: %v", err)
	}
	nc.Close()
}

func TestConnectOptionErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		opts natsbus.Options
		want string
	}{
		{natsbus.Options{NKeySeed: "/nonexistent/seed.nk"}, "--nats-nkey /nonexistent/seed.nk"},
		{natsbus.Options{CredsFile: "/nonexistent/user.creds"}, "--nats-creds"},
		{natsbus.Options{TLSCert: "cert.pem"}, "--nats-tls-cert and --nats-tls-key go together"},
	} {
		_, err := natsbus.Connect(ctx(t), "nats://127.0.0.1:1", tc.opts, zerolog.Nop())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want %q", tc.opts, err, tc.want)
		}
	}
}

func TestEmbeddedNeedsADataDir(t *testing.T) {
	_, err := natsbus.Open(ctx(t), natsbus.Options{URL: natsbus.Embedded}, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("embedded without data dir: %v; want it to say --data-dir", err)
	}
}

// TestStreamsHaveLimits: an oversized event is refused by the server, and
// both streams carry their size and age limits, also when Ensure updates
// streams an older version made without them.
func TestStreamsHaveLimits(t *testing.T) {
	bus := openEmbedded(t, t.TempDir())
	// A stream as an older version made it: no limits.
	old := natsbus.EventStreamConfig()
	old.MaxBytes, old.MaxMsgSize = 0, 0
	if _, err := bus.JS.CreateStream(ctx(t), old); err != nil {
		t.Fatal(err)
	}
	oldTasks := natsbus.TaskStreamConfig()
	oldTasks.MaxBytes, oldTasks.MaxMsgSize, oldTasks.MaxAge, oldTasks.Discard = 0, 0, 0, jetstream.DiscardOld
	if _, err := bus.JS.CreateStream(ctx(t), oldTasks); err != nil {
		t.Fatal(err)
	}
	if err := natsbus.Ensure(ctx(t), bus.JS); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]jetstream.StreamConfig{wire.StreamTasks: natsbus.TaskStreamConfig(), wire.StreamEvents: natsbus.EventStreamConfig()} {
		s, err := bus.JS.Stream(ctx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		if cfg.Discard != want.Discard || cfg.MaxMsgSize != want.MaxMsgSize || cfg.MaxBytes != want.MaxBytes || cfg.MaxAge != want.MaxAge || cfg.MaxMsgSize <= 0 || cfg.MaxBytes <= 0 || cfg.MaxAge <= 0 {
			t.Errorf("%s: max message %d, bytes %d, age %v; want %d, %d, %v", name, cfg.MaxMsgSize, cfg.MaxBytes, cfg.MaxAge, want.MaxMsgSize, want.MaxBytes, want.MaxAge)
		}
	}
	big := make([]byte, natsbus.EventMaxMsgSize+1)
	if _, err := bus.JS.Publish(ctx(t), wire.EventSubject("c", "w1"), big); err == nil {
		t.Error("the server stored an event larger than the limit")
	}
	if _, err := bus.JS.Publish(ctx(t), wire.EventSubject("c", "w1"), []byte(`{}`)); err != nil {
		t.Errorf("a small event: %v", err)
	}
}

// TestStreamLimitsFromFlags: the limits an operator sets on the command
// line are the streams' limits, and a size that is no size is refused.
func TestStreamLimitsFromFlags(t *testing.T) {
	l := natsbus.DefaultLimits()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l.BindFlags(fs)
	if err := fs.Parse([]string{"--task-stream-max-bytes", "64MiB", "--event-stream-max-age", "2h", "--event-stream-max-bytes", "1048576"}); err != nil {
		t.Fatal(err)
	}
	bus := openEmbedded(t, t.TempDir())
	defer bus.Close()
	if err := l.Ensure(ctx(t), bus.JS); err != nil {
		t.Fatal(err)
	}
	tasks, _ := bus.JS.Stream(ctx(t), wire.StreamTasks)
	events, _ := bus.JS.Stream(ctx(t), wire.StreamEvents)
	if c := tasks.CachedInfo().Config; c.MaxBytes != 64<<20 || c.MaxAge != natsbus.TaskMaxAge {
		t.Errorf("task stream: max bytes %d, max age %v; want 64 MiB and the default age", c.MaxBytes, c.MaxAge)
	}
	if c := events.CachedInfo().Config; c.MaxBytes != 1<<20 || c.MaxAge != 2*time.Hour {
		t.Errorf("event stream: max bytes %d, max age %v; want 1 MiB and 2h", c.MaxBytes, c.MaxAge)
	}
	for _, bad := range []string{"lots", "-5", "1TB"} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		l.BindFlags(fs)
		if err := fs.Parse([]string{"--task-stream-max-bytes", bad}); err == nil || !strings.Contains(err.Error(), "512MiB") {
			t.Errorf("--task-stream-max-bytes %s: %v; want an error with an example", bad, err)
		}
	}
}

// A task whose subject would be too long for NATS is refused before it is
// sent: sent, it made the server close the connection, which does not
// come back (the daemon's, with every in-process worker's), where a
// record named such a worker. Tasks on the connection still go through.
func TestPublisherRefusesASubjectTooLong(t *testing.T) {
	bus := openEmbedded(t, t.TempDir())
	if err := natsbus.Ensure(ctx(t), bus.JS); err != nil {
		t.Fatal(err)
	}
	pub := natsbus.NewPublisher(bus.JS)
	long := wire.Task{ID: "t-long", Operation: wire.OpDelete, Worker: strings.Repeat("w", 5000),
		Machine: wire.Machine{Name: "m", Cluster: "c", Provider: "local"}}
	if f, err := pub.Publish(ctx(t), &long); err == nil {
		select {
		case <-f.Ok():
		case err = <-f.Err():
		case <-time.After(5 * time.Second):
		}
		t.Errorf("a task on a subject of %d bytes was sent (%v)", len(long.Subject()), err)
	}
	time.Sleep(100 * time.Millisecond)
	if !bus.Conn.IsConnected() {
		t.Fatalf("connection %v after the task was refused", bus.Conn.Status())
	}
	ok := wire.Task{ID: "t-ok", Operation: wire.OpDelete, Worker: "w1", Machine: wire.Machine{Name: "m", Cluster: "c", Provider: "local"}}
	f, err := pub.Publish(ctx(t), &ok)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.Ok():
	case err := <-f.Err():
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("a task was not stored")
	}
}
