// Package natstest starts a real embedded nats-server with JetStream for
// tests, its store in a temporary directory removed on cleanup, with
// gitfleet's streams and buckets ensured.
package natstest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/internal/freeport"
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

// Inventories takes every worker's inventory parts on nc and answers each,
// as a leader does (the test is the leader), and hands them over decoded.
func Inventories(tb testing.TB, nc *nats.Conn) <-chan wire.Inventory {
	tb.Helper()
	reports := make(chan wire.Inventory, 64)
	if _, err := nc.Subscribe(wire.SubjectInventory+".>", func(m *nats.Msg) {
		if inv, err := wire.DecodeInventory(m.Data); err == nil {
			reports <- inv
		}
		_ = m.Respond(nil)
	}); err != nil {
		tb.Fatal(err)
	}
	return reports
}

// NextInventory waits up to d for a part of reports whose machines, by
// name, are as want says, skipping the others; false when none came.
func NextInventory(reports <-chan wire.Inventory, d time.Duration, want func(map[string]wire.Instance) bool) bool {
	deadline := time.After(d)
	for {
		select {
		case inv := <-reports:
			got := make(map[string]wire.Instance, len(inv.Instances))
			for _, in := range inv.Instances {
				got[in.Machine] = in
			}
			if want(got) {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// StartCluster starts n routed nats-servers with JetStream on 127.0.0.1,
// in this process, waits until they form a JetStream cluster, and returns
// them (shut down on cleanup).
//
// Each server must be told every route port before it starts, so the ports
// are chosen first and bound later (package freeport says how), and when a
// server could not bind its route port all are stopped and started again
// on other ports.
func StartCluster(tb testing.TB, n int) []*server.Server {
	tb.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for attempt := 1; ; attempt++ {
		srvs, stuck := startCluster(tb, n, deadline)
		if stuck == "" {
			return srvs
		}
		for _, s := range srvs {
			s.Shutdown()
		}
		if attempt == 3 || time.Now().After(deadline) {
			tb.Fatalf("the NATS cluster did not form (attempt %d): %s", attempt, stuck)
		}
		tb.Logf("the NATS cluster did not form, starting it again on other ports: %s", stuck)
	}
}

// startCluster starts n servers and waits for them until deadline. When
// they do not form a cluster it returns why (and the servers, to be shut
// down).
func startCluster(tb testing.TB, n int, deadline time.Time) ([]*server.Server, string) {
	tb.Helper()
	ports := pickRoutePorts(tb, n)
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
	started := time.Now()
	for !allCurrent(srvs) {
		// A server that listens for clients but, seconds later, not for
		// routes lost its route port to someone else.
		for i, s := range srvs {
			if s.Addr() != nil && s.ClusterAddr() == nil && time.Since(started) > 5*time.Second {
				return srvs, fmt.Sprintf("%s could not listen on its route port %d; %s", s.Name(), ports[i], describe(srvs))
			}
		}
		if time.Now().After(deadline) {
			return srvs, "not current in time; " + describe(srvs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Current is not enough for placement: until the meta leader has heard
	// from every peer, a stream of n replicas is refused with "no suitable
	// peers for placement, peer offline".
	for !allPeersOnline(srvs) {
		if time.Now().After(deadline) {
			return srvs, "the meta leader did not see every peer online in time; " + describe(srvs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return srvs, ""
}

// pickRoutePorts is freeport.Ports; a test of StartCluster replaces it.
var pickRoutePorts = freeport.Ports

// describe says, for each server, what a failed formation leaves to read.
func describe(srvs []*server.Server) string {
	var parts []string
	for _, s := range srvs {
		route := "none"
		if a := s.ClusterAddr(); a != nil {
			route = a.String()
		}
		parts = append(parts, fmt.Sprintf("%s: route listener %s, %d routes, current %t, meta leader %t",
			s.Name(), route, s.NumRoutes(), s.JetStreamIsCurrent(), s.JetStreamIsLeader()))
	}
	return strings.Join(parts, "; ")
}

// allCurrent: every server takes clients and routes and is current with
// its JetStream meta leader.
func allCurrent(srvs []*server.Server) bool {
	for _, s := range srvs {
		if !s.ReadyForConnections(10*time.Millisecond) || !s.JetStreamIsCurrent() {
			return false
		}
	}
	return true
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
