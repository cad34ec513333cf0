package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// NodeOptions are what `gitfleet node` is started with.
type NodeOptions struct {
	Cluster, Machine string
	StateDir         string
	// SeedDir holds the NoCloud seed (user-data, meta-data); default
	// StateDir. Listen is the health endpoint's address (default
	// 127.0.0.1:0: a free loopback port, written to the port file).
	SeedDir, Listen   string
	KubernetesVersion string
	MachineJSON       string // the wire.Machine the node is; written to machine.json
	HeartbeatInterval time.Duration
	StartupDelay      time.Duration // unhealthy (booting) this long after start
	NATS              natsbus.Options
	// Log receives the node's lines; RunNode adds the cluster and machine.
	Log zerolog.Logger
}

// RunNode is a machine: it writes its machine spec and bootstrap data into
// its state folder, serves /healthz on a loopback port (written to the
// folder's port file) and publishes a wire.Heartbeat every interval until
// ctx ends.
func RunNode(ctx context.Context, o NodeOptions) error {
	if o.Cluster == "" || o.Machine == "" || o.StateDir == "" {
		return errors.New("node: --cluster, --machine and --state-dir are required")
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	o.Log = o.Log.With().Str("cluster", o.Cluster).Str("machine", o.Machine).Logger()
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	// One node per machine: the lock is held until the process ends.
	lock, err := lockNode(o.StateDir, 2*time.Second)
	if err != nil {
		return fmt.Errorf("node %s/%s: %w", o.Cluster, o.Machine, err)
	}
	defer lock.Close()
	if err := writeFileAtomic(filepath.Join(o.StateDir, pidFile), []byte(strconv.Itoa(os.Getpid())+"\n")); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if err := writeBootFiles(o); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	// With bootstrap data the node is ready only once it has joined its
	// cluster (docs/bootstrap.md); a refusal ends it, saying why.
	var ready readiness
	ready.joined.Store(true)
	var mb *member
	seed := o.SeedDir
	if seed == "" {
		seed = o.StateDir
	}
	if ud, err := os.ReadFile(filepath.Join(seed, userDataFile)); err == nil {
		d, err := bootstrap.Parse(ud)
		if err != nil {
			failJoin(o.StateDir, err)
			return fmt.Errorf("node: %w", err)
		}
		mb = &member{o: o, d: d}
		ready.joined.Store(false)
	}
	started := time.Now()
	time.AfterFunc(o.StartupDelay, func() { ready.booted.Store(true) })

	addr := o.Listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("node: listen: %w", err)
	}
	srv := &http.Server{Handler: healthHandler(o, &ready, mb), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if err := writeFileAtomic(filepath.Join(o.StateDir, portFile), []byte(strconv.Itoa(port)+"\n")); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	o.Log.Info().Int("port", port).
		Dur("startupDelay", o.StartupDelay).Msg("node up")

	hctx, stop := context.WithCancel(ctx)
	defer stop()
	var joinErr atomic.Pointer[error]
	if mb != nil {
		defer mb.close()
		go func() {
			if err := mb.joinCluster(hctx); err != nil {
				if hctx.Err() == nil {
					o.Log.Error().Err(err).Msg("refused by the cluster")
					failJoin(o.StateDir, err)
					joinErr.Store(&err)
					stop()
				}
				return
			}
			o.Log.Info().Bool("controlPlane", mb.d.ControlPlane).Bool("init", mb.d.Init).Msg("joined the cluster")
			ready.joined.Store(true)
			if mb.d.ControlPlane {
				mb.serve(hctx)
			}
		}()
	}
	heartbeats(hctx, o, &ready)
	o.Log.Info().Dur("uptime", time.Since(started)).Msg("node stopping")
	if err := joinErr.Load(); err != nil {
		return fmt.Errorf("node %s/%s: %w", o.Cluster, o.Machine, *err)
	}
	return nil
}

// readiness: the node is ready once booted (its startup delay is over)
// and joined (at once without bootstrap data).
type readiness struct{ booted, joined atomic.Bool }

func (r *readiness) Load() bool { return r.booted.Load() && r.joined.Load() }

func writeBootFiles(o NodeOptions) error {
	mj := o.MachineJSON
	if mj == "" {
		b, _ := json.Marshal(wire.Machine{Name: o.Machine, Cluster: o.Cluster, Version: o.KubernetesVersion, Provider: Name})
		mj = string(b)
	}
	var m wire.Machine
	if err := json.Unmarshal([]byte(mj), &m); err != nil {
		return fmt.Errorf("--machine-json: %w", err)
	}
	pretty, _ := json.MarshalIndent(m, "", "  ")
	if err := writeFileAtomic(filepath.Join(o.StateDir, machineFile), append(pretty, '\n')); err != nil {
		return err
	}
	boot := fmt.Sprintf("# bootstrap data of machine %s/%s, written by gitfleet node\n"+
		"cluster: %q\nmachine: %q\nrole: %q\nkubernetesVersion: %q\nheartbeatSubject: %q\nheartbeatInterval: %q\n",
		o.Cluster, o.Machine, o.Cluster, o.Machine, m.Role, o.KubernetesVersion,
		wire.HeartbeatSubject(o.Cluster, o.Machine), o.HeartbeatInterval)
	return writeFileAtomic(filepath.Join(o.StateDir, bootstrapFile), []byte(boot))
}

// readMachine reads the machine a node wrote into its state folder.
func readMachine(dir string) (wire.Machine, error) {
	var m wire.Machine
	b, err := os.ReadFile(filepath.Join(dir, machineFile))
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}

func healthHandler(o NodeOptions, ready *readiness, mb *member) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		h := map[string]any{"cluster": o.Cluster, "machine": o.Machine,
			"version": o.KubernetesVersion, "healthy": ready.Load(), "pid": os.Getpid()}
		if mb != nil {
			h["joined"] = ready.joined.Load()
			if mb.d.ControlPlane {
				h["nodes"] = mb.nodes() // the machines that joined through this control plane
			}
		}
		_ = json.NewEncoder(w).Encode(h)
	})
	return mux
}

// heartbeats connects to NATS (retrying while it is away) and publishes a
// heartbeat every interval until ctx ends. Whatever NATS does — gone,
// stalled, reconnecting — the node returns within a second of ctx's end:
// a connection attempt is not waited for, and the last flush has a short
// deadline.
func heartbeats(ctx context.Context, o NodeOptions, ready *readiness) {
	tick := time.NewTicker(o.HeartbeatInterval)
	defer tick.Stop()
	subject := wire.HeartbeatSubject(o.Cluster, o.Machine)
	var nc *nats.Conn
	defer func() {
		if nc != nil {
			_ = nc.FlushTimeout(300 * time.Millisecond)
			closed := make(chan struct{})
			go func() { nc.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	conns := make(chan *nats.Conn, 1)
	connecting := false
	for {
		if nc == nil && !connecting {
			connecting = true
			go func() {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				c, err := natsbus.Connect(cctx, o.NATS.URL, o.NATS, o.Log)
				if err != nil {
					o.Log.Warn().Err(err).Msg("heartbeats: cannot reach NATS yet")
				}
				conns <- c
			}()
		}
		select {
		case c := <-conns:
			connecting = false
			if c == nil {
				break
			}
			if ctx.Err() != nil {
				go c.Close()
				return
			}
			nc = c
		default:
		}
		if nc != nil {
			hb := wire.Heartbeat{Cluster: o.Cluster, Machine: o.Machine, Version: o.KubernetesVersion,
				Healthy: ready.Load(), Time: time.Now().UTC()}
			if !hb.Healthy {
				hb.Message = "booting"
			}
			if data, err := wire.Encode(&hb); err == nil {
				_ = nc.Publish(subject, data)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case c := <-conns:
			connecting = false
			if c != nil {
				if ctx.Err() != nil {
					go c.Close()
					return
				}
				nc = c
			}
		}
	}
}
