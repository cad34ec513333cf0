// Package natstest starts a real embedded nats-server with JetStream for
// tests, its store in a temporary directory removed on cleanup, with
// gitfleet's streams and buckets ensured.
package natstest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Server is an embedded server that a test can restart on the same store
// and port.
type Server struct {
	tb  testing.TB
	dir string
	*natsbus.Server
}

// Start starts a server with its store in tb.TempDir() and ensures the
// streams and buckets. It is shut down on cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{tb: tb, dir: tb.TempDir()}
	s.start(0)
	nc, js := Connect(tb, s.ClientURL())
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := natsbus.Ensure(ctx, js); err != nil {
		tb.Fatal(err)
	}
	return s
}

func (s *Server) start(port int) {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, err := natsbus.StartServer(ctx, natsbus.ServerOptions{DataDir: s.dir, Port: port})
	if err != nil {
		s.tb.Fatal(err)
	}
	s.Server = srv
	s.tb.Cleanup(srv.Shutdown)
}

// Restart shuts the server down and starts it again on the same store and
// port, as a crash and restart would.
func (s *Server) Restart() {
	s.tb.Helper()
	port := s.Port()
	s.Shutdown()
	s.start(port)
}

// Connect opens a client connection that reconnects forever, closed on
// cleanup.
func Connect(tb testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := natsbus.Connect(ctx, url, natsbus.Options{ReconnectWait: 50 * time.Millisecond}, zerolog.Nop())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return nc, js
}

// StartWithToken starts a plain nats-server (no JetStream) that accepts
// only clients presenting token, and returns its URL. Shut down on cleanup.
func StartWithToken(tb testing.TB, token string) string {
	tb.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, Authorization: token, NoSigs: true, NoLog: true})
	if err != nil {
		tb.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server with token auth not ready after 10s")
	}
	tb.Cleanup(s.Shutdown)
	return s.ClientURL()
}

// Intend writes, for each task, the machine record that makes it the
// machine's current work, as the daemon does before it publishes a task
// (workers drop tasks their record does not name: wire.Task.Stale).
func Intend(tb testing.TB, js jetstream.JetStream, tasks ...wire.Task) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, wire.BucketMachines)
	if err != nil {
		tb.Fatal(err)
	}
	for _, t := range tasks {
		phase := wire.PhasePending
		if t.Operation == wire.OpDelete {
			phase = wire.PhaseDeleting
		}
		data, err := json.Marshal(map[string]any{"name": t.Machine.Name, "cluster": t.Machine.Cluster,
			"taskID": t.ID, "attempt": t.Attempt, "phase": phase, "worker": t.Worker})
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := kv.Put(ctx, wire.RecordKey(t.Machine.Cluster, t.Machine.Name), data); err != nil {
			tb.Fatal(err)
		}
	}
}
