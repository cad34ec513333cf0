package natsbus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerOptions configure the embedded nats-server.
type ServerOptions struct {
	DataDir string // JetStream store lives in DataDir/jetstream; required
	Host    string // default 127.0.0.1
	Port    int    // 0 picks a free port
	// Auth, when set, is required of every client (LoadAuth).
	Auth *Auth
}

// Server is an embedded nats-server with JetStream.
type Server struct {
	srv  *server.Server
	port int
}

// ErrServer is wrapped by every failure to start the embedded server.
var ErrServer = errors.New("embedded nats-server")

// StartServer starts an embedded nats-server with JetStream storing under
// opts.DataDir and returns once it accepts connections.
func StartServer(ctx context.Context, opts ServerOptions) (*Server, error) {
	if opts.DataDir == "" {
		return nil, fmt.Errorf("%w: no data dir (set --data-dir)", ErrServer)
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrServer, err)
	}
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port := opts.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	so := &server.Options{
		ServerName: "gitfleet",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   opts.DataDir,
		NoSigs:     true,
		NoLog:      true,
		// Work-queue acks and dedup need no more than this; keep the
		// embedded server from taking the whole machine.
		JetStreamMaxMemory: 256 << 20,
	}
	if opts.Auth != nil {
		if err := opts.Auth.configure(so); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrServer, err)
		}
	}
	s, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrServer, err)
	}
	go s.Start()
	wait := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	if !s.ReadyForConnections(wait) {
		s.Shutdown()
		return nil, fmt.Errorf("%w: not ready after %s (is port %d taken?)", ErrServer, wait, opts.Port)
	}
	addr, ok := s.Addr().(*net.TCPAddr)
	if !ok {
		s.Shutdown()
		return nil, fmt.Errorf("%w: no TCP listener", ErrServer)
	}
	return &Server{srv: s, port: addr.Port}, nil
}

// ClientURL is nats://127.0.0.1:PORT, for clients and child processes.
func (s *Server) ClientURL() string { return s.srv.ClientURL() }

// Port the server listens on; pass it back in ServerOptions to restart on
// the same address.
func (s *Server) Port() int { return s.port }

// Shutdown stops the server and waits until it has stopped.
func (s *Server) Shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}
