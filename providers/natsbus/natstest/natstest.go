// Package natstest starts a real embedded nats-server with JetStream for
// tests, its store in a temporary directory removed on cleanup, with
// gitfleet's streams and buckets ensured.
package natstest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
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

// StartCluster starts n routed nats-servers with JetStream on 127.0.0.1,
// in this process, waits until they form a JetStream cluster, and returns
// them (shut down on cleanup).
func StartCluster(tb testing.TB, n int) []*server.Server {
	tb.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	var srvs []*server.Server
	for i := range n {
		opts := &server.Options{ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: -1, JetStream: true,
			StoreDir: tb.TempDir(), NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "gitfleet-test", Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ","))}
		s, err := server.NewServer(opts)
		if err != nil {
			tb.Fatal(err)
		}
		go s.Start()
		srvs = append(srvs, s)
		tb.Cleanup(s.Shutdown)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range srvs {
		for !s.ReadyForConnections(100*time.Millisecond) || !s.JetStreamIsCurrent() {
			if time.Now().After(deadline) {
				tb.Fatal("the NATS cluster did not form within 30s")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// Current is not enough for placement: until the meta leader has heard
	// from every peer, a stream of n replicas is refused with "no suitable
	// peers for placement, peer offline".
	for !allPeersOnline(srvs) {
		if time.Now().After(deadline) {
			tb.Fatal("the NATS cluster's meta leader did not see every peer online within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return srvs
}

// allPeersOnline: some server leads the meta group and counts every other
// server as a current, online peer.
func allPeersOnline(srvs []*server.Server) bool {
	for _, s := range srvs {
		if !s.JetStreamIsLeader() {
			continue
		}
		info, err := s.Jsz(&server.JSzOptions{})
		if err != nil || info.Meta == nil {
			return false
		}
		online := 0
		for _, p := range info.Meta.Replicas {
			if p.Current && !p.Offline {
				online++
			}
		}
		return online == len(srvs)-1
	}
	return false
}

// ClusterURLs lists the servers' client URLs, comma-separated.
func ClusterURLs(srvs []*server.Server) string {
	var urls []string
	for _, s := range srvs {
		urls = append(urls, s.ClientURL())
	}
	return strings.Join(urls, ",")
}

// StreamLeader returns the server that leads stream (a KV bucket's is
// KV_<bucket>), or nil.
func StreamLeader(tb testing.TB, js jetstream.JetStream, srvs []*server.Server, stream string) *server.Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	for _, srv := range srvs {
		if info.Cluster != nil && srv.Name() == info.Cluster.Leader {
			return srv
		}
	}
	return nil
}
