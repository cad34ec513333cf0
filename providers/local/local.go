// Package local is a provider whose machines are real child processes:
// each machine is `gitfleet node` with its own state folder, bootstrap
// file, health endpoint and NATS heartbeats. Nodes run in their own process
// group and outlive the worker; a restarted worker adopts them through the
// pid files in their state folders.
package local

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Name of the provider in machine templates and task subjects.
const Name = "local"

// Options configure the local provider.
type Options struct {
	// StateDir holds one folder per machine: StateDir/<cluster>/<machine>.
	StateDir string
	// Binary is the gitfleet executable that runs `node`; default os.Executable().
	Binary string
	// NATSURL and NATS tell nodes where to send heartbeats (credentials are
	// passed as flags, secrets through the environment).
	NATSURL string
	NATS    natsbus.Options
	// StopGrace between SIGTERM and SIGKILL on Delete; default 5s.
	StopGrace time.Duration
	// StartTimeout for a node to answer its health endpoint; default 30s
	// plus the machine's startupDelay.
	StartTimeout time.Duration
	Log          zerolog.Logger
}

// Provider runs machines as `gitfleet node` processes.
type Provider struct {
	o      Options
	client *http.Client

	mu       sync.Mutex
	locks    map[string]*sync.Mutex  // per machine folder
	children map[int]<-chan struct{} // nodes this process started: closed when reaped
}

var _ providers.Provider = (*Provider)(nil)

// New checks the options and returns the provider; it starts nothing.
func New(o Options) (*Provider, error) {
	if o.StateDir == "" {
		return nil, errors.New("local: no state dir (set --state-dir)")
	}
	abs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return nil, fmt.Errorf("local: state dir: %w", err)
	}
	o.StateDir = abs
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("local: state dir: %w", err)
	}
	if o.Binary == "" {
		if o.Binary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("local: find the gitfleet binary: %w", err)
		}
	}
	if o.NATSURL == "" {
		return nil, errors.New("local: nodes need a NATS URL for heartbeats")
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 5 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	return &Provider{o: o, client: &http.Client{Timeout: time.Second},
		locks: map[string]*sync.Mutex{}, children: map[int]<-chan struct{}{}}, nil
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

func (p *Provider) dir(m wire.Machine) (string, error) {
	for _, s := range []string{m.Cluster, m.Name} {
		if s == "" || s == "." || s == ".." || strings.ContainsAny(s, `/\`) {
			return "", providers.Permanent(fmt.Errorf("local: %q is not usable as a folder name (cluster %q, machine %q)", s, m.Cluster, m.Name))
		}
	}
	return filepath.Join(p.o.StateDir, m.Cluster, m.Name), nil
}

func (p *Provider) lock(dir string) func() {
	p.mu.Lock()
	l, ok := p.locks[dir]
	if !ok {
		l = &sync.Mutex{}
		p.locks[dir] = l
	}
	p.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Create implements providers.Provider: it adopts a running node for the
// machine or starts one, and returns once the node is healthy.
func (p *Provider) Create(ctx context.Context, m wire.Machine) (providers.Instance, error) {
	dir, err := p.dir(m)
	if err != nil {
		return providers.Instance{}, err
	}
	spec, err := decodeSpec(m)
	if err != nil {
		return providers.Instance{}, err
	}
	defer p.lock(dir)()
	pid := nodePID(dir)
	if pid != 0 {
		p.o.Log.Debug().Str("dir", dir).Int("pid", pid).Msg("adopting running node")
	} else if pid, err = p.start(m, dir, spec); err != nil {
		return providers.Instance{}, err
	}
	port, err := p.waitHealthy(ctx, dir, pid, p.o.StartTimeout+spec.startupDelay())
	if err != nil {
		return providers.Instance{}, err
	}
	return instance(m.Cluster, m.Name, pid, port, m.Version), nil
}

func instance(cluster, name string, pid, port int, version string) providers.Instance {
	return providers.Instance{Cluster: cluster, Name: name, ProviderID: "local://" + strconv.Itoa(pid),
		Addresses: []string{"127.0.0.1:" + strconv.Itoa(port)}, Version: version}
}

// start launches a node in its own process group and records its pid.
func (p *Provider) start(m wire.Machine, dir string, spec Spec) (int, error) {
	for _, f := range []string{pidFile, portFile} {
		_ = os.Remove(filepath.Join(dir, f)) // left by a node that died
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("local: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("local: %w", err)
	}
	defer logf.Close()
	args := []string{"node", "--cluster", m.Cluster, "--machine", m.Name, "--state-dir", dir,
		"--kubernetes-version", m.Version, "--heartbeat-interval", spec.heartbeat().String(),
		"--startup-delay", spec.startupDelay().String(), "--machine-json", machineJSON(m)}
	args = append(args, p.o.NATS.Args(p.o.NATSURL)...)
	cmd := exec.Command(p.o.Binary, args...)
	cmd.Dir = dir
	cmd.Env = os.Environ() // secrets reach the node here, never on its command line
	if p.o.NATS.Password != "" {
		cmd.Env = append(cmd.Env, "GITFLEET_NATS_PASSWORD="+p.o.NATS.Password)
	}
	if p.o.NATS.Token != "" {
		cmd.Env = append(cmd.Env, "GITFLEET_NATS_TOKEN="+p.o.NATS.Token)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // outlives the worker
	p.o.Log.Info().Str("cluster", m.Cluster).Str("machine", m.Name).Str("dir", dir).Msg("starting node")
	if err := cmd.Start(); err != nil {
		return 0, providers.Permanent(fmt.Errorf("local: start %s node: %w", p.o.Binary, err))
	}
	pid := cmd.Process.Pid
	if err := writeFileAtomic(filepath.Join(dir, pidFile), []byte(strconv.Itoa(pid)+"\n")); err != nil {
		_ = signalGroup(pid, syscall.SIGKILL)
		_ = cmd.Wait()
		return 0, fmt.Errorf("local: record pid: %w", err)
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.children[pid] = exited
	p.mu.Unlock()
	go func() { // reap, so a dead node is gone and not a zombie
		_ = cmd.Wait()
		p.mu.Lock()
		delete(p.children, pid)
		p.mu.Unlock()
		close(exited)
	}()
	return pid, nil
}

// waitHealthy polls the node's port file and health endpoint.
func (p *Provider) waitHealthy(ctx context.Context, dir string, pid int, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if port, err := readInt(filepath.Join(dir, portFile)); err == nil && p.healthy(ctx, port) {
			return port, nil
		}
		if !isNode(pid, dir) {
			return 0, providers.Transient(fmt.Errorf("local: node %d exited before it was healthy; see %s", pid, filepath.Join(dir, logFile)))
		}
		select {
		case <-ctx.Done():
			return 0, providers.Transient(fmt.Errorf("local: node %d not healthy: %w", pid, ctx.Err()))
		case <-tick.C:
		}
	}
}

func (p *Provider) healthy(ctx context.Context, port int) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Delete implements providers.Provider: SIGTERM, SIGKILL after StopGrace,
// then the state folder is removed.
func (p *Provider) Delete(ctx context.Context, m wire.Machine) error {
	dir, err := p.dir(m)
	if err != nil {
		return err
	}
	defer p.lock(dir)()
	if pid := nodePID(dir); pid != 0 {
		p.o.Log.Info().Str("cluster", m.Cluster).Str("machine", m.Name).Int("pid", pid).Msg("stopping node")
		if err := p.stop(ctx, pid, dir); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return providers.Transient(fmt.Errorf("local: remove %s: %w", dir, err))
	}
	_ = os.Remove(filepath.Dir(dir)) // the cluster folder, once empty
	return nil
}

func (p *Provider) stop(ctx context.Context, pid int, dir string) error {
	if err := signalGroup(pid, syscall.SIGTERM); err != nil {
		return providers.Transient(fmt.Errorf("local: SIGTERM node %d: %w", pid, err))
	}
	if p.waitGone(ctx, pid, dir, p.o.StopGrace) {
		return nil
	}
	p.o.Log.Warn().Int("pid", pid).Dur("grace", p.o.StopGrace).Msg("node ignored SIGTERM; killing it")
	if err := signalGroup(pid, syscall.SIGKILL); err != nil {
		return providers.Transient(fmt.Errorf("local: SIGKILL node %d: %w", pid, err))
	}
	if !p.waitGone(ctx, pid, dir, 5*time.Second) {
		return providers.Transient(fmt.Errorf("local: node %d still running after SIGKILL", pid))
	}
	return nil
}

// waitGone waits until pid no longer runs the node of dir.
func (p *Provider) waitGone(ctx context.Context, pid int, dir string, d time.Duration) bool {
	p.mu.Lock()
	exited := p.children[pid]
	p.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if exited == nil && !isNode(pid, dir) {
			return true
		}
		select {
		case <-exited:
			return true
		case <-tick.C:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// List implements providers.Provider: every machine folder with a live
// node. A folder whose node died is a failed machine and is not listed.
func (p *Provider) List(ctx context.Context) ([]providers.Instance, error) {
	dirs, err := filepath.Glob(filepath.Join(p.o.StateDir, "*", "*", pidFile))
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	sort.Strings(dirs)
	var out []providers.Instance
	for _, f := range dirs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dir := filepath.Dir(f)
		pid := nodePID(dir)
		if pid == 0 {
			continue
		}
		port, _ := readInt(filepath.Join(dir, portFile))
		version := ""
		if m, err := readMachine(dir); err == nil {
			version = m.Version
		}
		out = append(out, instance(filepath.Base(filepath.Dir(dir)), filepath.Base(dir), pid, port, version))
	}
	return out, nil
}
