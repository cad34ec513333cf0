// Package local is a provider whose machines are real child processes:
// each machine is `gitfleet node` with its own state folder, bootstrap
// file, health endpoint and NATS heartbeats. Nodes run in their own process
// group and outlive the worker; a restarted worker adopts them. A node
// holds a lock on its state folder for as long as it runs, so no second
// node can run for one machine, and the provider tells a live node from a
// dead one by that lock, not by a pid file.
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

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/internal/secret"
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
	// NodeSigner, when set, gives every node credentials of its own
	// (nats.creds in its folder, 0600), which let it publish its own
	// heartbeats and nothing else; the worker's credentials stay here.
	NodeSigner *natsbus.NodeSigner
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
	stopping map[int]bool            // children Delete stops: their end is no news
	adopted  map[string]*adoptedNode // by folder: nodes it did not start, watched
	lost     map[string]int          // by folder: nodes found running without it, already logged
	changed  chan struct{}           // a node ended that Delete did not stop (Changed)
	noPidfd  bool                    // tests: watch adopted nodes as where there is no pidfd
}

var _ providers.Watcher = (*Provider)(nil)

// Changed implements providers.Watcher: it receives when a node ends and
// no Delete stopped it (it crashed, or someone killed it): a node this
// process started, which it reaps, or one it adopted (a node an earlier
// worker started, which List or Create found running), which it watches.
func (p *Provider) Changed() <-chan struct{} { return p.changed }

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
	if err := os.MkdirAll(abs, 0o700); err != nil {
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
	if o.NodeSigner == nil && o.NATS.CredsFile != "" {
		// Without a signer the nodes connect as the worker. A worker's user
		// that may not send heartbeats (a worker's own, of gitfleet nats-creds, may
		// not) would leave every machine without them, to be judged dead
		// and replaced over and over.
		forbid, err := natsbus.CredsForbid(o.NATS.CredsFile, wire.HeartbeatSubject("cluster", "machine"))
		if err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
		if forbid {
			return nil, fmt.Errorf("local: nodes connect with this worker's NATS credentials (%s) when no node signer makes theirs, "+
				"and those may not publish heartbeats: give --nats-node-signer (the daemon's DATA-DIR/nats-auth/node-signer.nk, docs/operations.md)", o.NATS.CredsFile)
		}
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 5 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	return &Provider{o: o, client: &http.Client{Timeout: time.Second},
		locks: map[string]*sync.Mutex{}, children: map[int]<-chan struct{}{}, stopping: map[int]bool{},
		adopted: map[string]*adoptedNode{}, lost: map[string]int{}, changed: make(chan struct{}, 1)}, nil
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

// mutex is the mutex of one machine folder: Create and Delete of a
// machine run one at a time in this process.
func (p *Provider) mutex(dir string) *sync.Mutex {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.locks[dir]
	if !ok {
		l = &sync.Mutex{}
		p.locks[dir] = l
	}
	return l
}

func (p *Provider) lock(dir string) func() {
	l := p.mutex(dir)
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
	runs, err := nodeRuns(dir)
	if err != nil {
		return providers.Instance{}, providers.Transient(fmt.Errorf("local: %w", err))
	}
	var pid int
	if runs {
		if pid, err = p.runningPID(ctx, dir); err != nil {
			return providers.Instance{}, err
		}
		p.o.Log.Debug().Str("dir", dir).Int("pid", pid).Msg("adopting running node")
		p.adopt(pid, dir)
	} else if pid, err = p.start(m, dir, spec); err != nil {
		return providers.Instance{}, err
	}
	port, err := p.waitHealthy(ctx, dir, pid, p.o.StartTimeout+spec.startupDelay())
	if err != nil {
		return providers.Instance{}, err
	}
	return instance(m, pid, port), nil
}

// runningPID is the pid of the node that holds dir's lock, from the pid
// file it writes once it holds it.
func (p *Provider) runningPID(ctx context.Context, dir string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		if pid := nodePID(dir); pid != 0 {
			return pid, nil
		}
		if runs, _ := nodeRuns(dir); !runs {
			return 0, providers.Transient(fmt.Errorf("local: the node of %s stopped", dir))
		}
		select {
		case <-ctx.Done():
			return 0, providers.Transient(fmt.Errorf("local: a node holds %s but wrote no pid file", dir))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func instance(m wire.Machine, pid, port int) providers.Instance {
	in := providers.Instance{Cluster: m.Cluster, Name: m.Name, ProviderID: "local://" + strconv.Itoa(pid),
		Version: m.Version, Deployment: m.Deployment, Role: m.Role, TemplateHash: m.TemplateHash, Labels: m.Labels, Annotations: m.Annotations}
	if port != 0 {
		in.Addresses = []string{"127.0.0.1:" + strconv.Itoa(port)}
	}
	return in
}

// HostBound implements providers.HostBound: a machine lives on the host of
// the worker that started it, and only that worker can stop it.
func (p *Provider) HostBound() bool { return true }

// start launches a node in its own process group; the node takes the
// folder's lock and writes its pid file.
func (p *Provider) start(m wire.Machine, dir string, spec Spec) (int, error) {
	for _, f := range []string{pidFile, portFile, joinFailedFile} {
		_ = os.Remove(filepath.Join(dir, f)) // left by a node that died
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("local: %w", err)
	}
	if len(m.Bootstrap) > 0 {
		// The bootstrap data holds the machine's token (and an init
		// machine's CA keys): a file only the node's user reads.
		if err := writeFileAtomic(filepath.Join(dir, userDataFile), m.Bootstrap); err != nil {
			return 0, fmt.Errorf("local: %w", err)
		}
		if err := writeFileAtomic(filepath.Join(dir, metaDataFile), bootstrap.MetaData(m)); err != nil {
			return 0, fmt.Errorf("local: %w", err)
		}
	}
	logf, err := os.OpenFile(filepath.Join(dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("local: %w", err)
	}
	defer logf.Close()
	args := []string{"node", "--cluster", m.Cluster, "--machine", m.Name, "--state-dir", dir,
		"--kubernetes-version", m.Version, "--heartbeat-interval", spec.heartbeat().String(),
		"--startup-delay", spec.startupDelay().String(), "--machine-json", machineJSON(m)}
	// Secrets reach the node through a file only its user reads or its
	// environment, never its command line; it gets the NATS credentials
	// it needs and none of the daemon's own.
	cmd := exec.Command(p.o.Binary)
	cmd.Env = secret.ChildEnv(os.Environ())
	if p.o.NodeSigner != nil {
		creds, err := p.o.NodeSigner.Creds(m.Cluster, m.Name)
		if err != nil {
			return 0, providers.Permanent(fmt.Errorf("local: %w", err))
		}
		path := filepath.Join(dir, credsFile)
		if err := os.WriteFile(path, creds, 0o600); err != nil {
			return 0, fmt.Errorf("local: %w", err)
		}
		args = append(args, p.o.NATS.NodeArgs(p.o.NATSURL, path)...)
	} else {
		args = append(args, p.o.NATS.Args(p.o.NATSURL)...)
		if p.o.NATS.Password != "" {
			cmd.Env = append(cmd.Env, "GITFLEET_NATS_PASSWORD="+p.o.NATS.Password)
		}
		if p.o.NATS.Token != "" {
			cmd.Env = append(cmd.Env, "GITFLEET_NATS_TOKEN="+p.o.NATS.Token)
		}
	}
	cmd.Args = append(cmd.Args, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // outlives the worker
	p.o.Log.Info().Str("cluster", m.Cluster).Str("machine", m.Name).Str("dir", dir).Msg("starting node")
	if err := cmd.Start(); err != nil {
		return 0, providers.Permanent(fmt.Errorf("local: start %s node: %w", p.o.Binary, err))
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	p.mu.Lock()
	p.children[pid] = exited
	p.mu.Unlock()
	go func() { // reap, so a dead node is gone and not a zombie
		_ = cmd.Wait()
		p.mu.Lock()
		delete(p.children, pid)
		stopped := p.stopping[pid]
		delete(p.stopping, pid)
		p.mu.Unlock()
		close(exited)
		if !stopped {
			p.tell()
		}
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
		if !p.alive(pid, dir) {
			if why, err := os.ReadFile(filepath.Join(dir, joinFailedFile)); err == nil {
				return 0, providers.Permanent(fmt.Errorf("local: refused by its cluster: %s", strings.TrimSpace(string(why))))
			}
			return 0, providers.Transient(fmt.Errorf("local: node %d exited before it was healthy; see %s", pid, filepath.Join(dir, logFile)))
		}
		select {
		case <-ctx.Done():
			return 0, providers.Transient(fmt.Errorf("local: node %d not healthy: %w", pid, ctx.Err()))
		case <-tick.C:
		}
	}
}

// alive reports whether the node pid of dir still runs: a node this
// provider started until it is reaped (its command line is not readable in
// /proc for a moment after exec), an adopted one while it holds the lock.
func (p *Provider) alive(pid int, dir string) bool {
	p.mu.Lock()
	exited, ours := p.children[pid]
	p.mu.Unlock()
	if ours {
		select {
		case <-exited:
			return false
		default:
			return true
		}
	}
	runs, err := nodeRuns(dir)
	return err == nil && runs
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

// Delete implements providers.Provider: SIGTERM to the node that holds the
// machine's lock, SIGKILL after StopGrace, then the state folder is
// removed once the lock is free.
func (p *Provider) Delete(ctx context.Context, m wire.Machine) error {
	dir, err := p.dir(m)
	if err != nil {
		return err
	}
	defer p.lock(dir)()
	runs, err := nodeRuns(dir)
	if err != nil {
		return providers.Transient(fmt.Errorf("local: %w", err))
	}
	if runs {
		pid, err := p.runningPID(ctx, dir)
		if err != nil {
			return err
		}
		p.o.Log.Info().Str("cluster", m.Cluster).Str("machine", m.Name).Int("pid", pid).Msg("stopping node")
		if err := p.stop(ctx, pid, dir); err != nil {
			return err
		}
	}
	for _, n := range lostNodes(p.o.StateDir, dir) {
		p.o.Log.Info().Str("cluster", m.Cluster).Str("machine", m.Name).Int("pid", n.pid).Msg("stopping node, found by its process: its state folder is gone")
		if err := p.stop(ctx, n.pid, dir); err != nil {
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
	p.mu.Lock()
	if _, ours := p.children[pid]; ours {
		p.stopping[pid] = true
	}
	if n := p.adopted[dir]; n != nil && n.pid == pid {
		n.stopping = true
	}
	p.mu.Unlock()
	if err := signalNode(pid, syscall.SIGTERM); err != nil {
		return providers.Transient(fmt.Errorf("local: SIGTERM node %d: %w", pid, err))
	}
	if p.waitGone(ctx, pid, dir, p.o.StopGrace) {
		return nil
	}
	p.o.Log.Warn().Int("pid", pid).Dur("grace", p.o.StopGrace).Msg("node ignored SIGTERM; killing it")
	if err := signalNode(pid, syscall.SIGKILL); err != nil {
		return providers.Transient(fmt.Errorf("local: SIGKILL node %d: %w", pid, err))
	}
	if !p.waitGone(ctx, pid, dir, 5*time.Second) {
		return providers.Transient(fmt.Errorf("local: node %d still running after SIGKILL", pid))
	}
	return nil
}

// waitGone waits until no node holds dir's lock (and the provider's own
// child is reaped).
func (p *Provider) waitGone(ctx context.Context, pid int, dir string, d time.Duration) bool {
	p.mu.Lock()
	exited := p.children[pid]
	p.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if runs, err := nodeRuns(dir); err == nil && !runs && !isNode(pid, dir) {
			if exited == nil {
				return true
			}
			select {
			case <-exited:
				return true
			default:
			}
		}
		select {
		case <-tick.C:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// List implements providers.Provider: every machine folder, with what the
// node wrote of itself. A folder whose node no longer runs is reported with
// reason NodeExited: the machine died. A folder being created or deleted
// right now is reported as it is.
func (p *Provider) List(ctx context.Context) ([]providers.Instance, error) {
	dirs, err := filepath.Glob(filepath.Join(p.o.StateDir, "*", "*"))
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	sort.Strings(dirs)
	var out []providers.Instance
	for _, dir := range dirs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		m, err := readMachine(dir)
		if err != nil {
			m = wire.Machine{}
		}
		m.Cluster, m.Name = filepath.Base(filepath.Dir(dir)), filepath.Base(dir)
		busy := !p.tryLock(dir)
		if !busy {
			runs, err := nodeRuns(dir)
			if err == nil && runs {
				// Watched from now on, unless this process started it;
				// under the folder's mutex, so that no Delete stops it
				// before it is marked as adopted.
				if pid := nodePID(dir); pid != 0 {
					p.adopt(pid, dir)
				}
			}
			p.unlock(dir)
			if err != nil {
				return nil, fmt.Errorf("local: %w", err)
			}
			if !runs {
				in := instance(m, 0, 0)
				in.ProviderID = ""
				in.Reason, in.Message = "NodeExited", "no node runs for this machine; see "+filepath.Join(dir, logFile)
				out = append(out, in)
				continue
			}
		}
		pid := nodePID(dir)
		port, _ := readInt(filepath.Join(dir, portFile))
		out = append(out, instance(m, pid, port))
	}
	// A node whose folder was removed while it ran is still the machine:
	// listed from its command line, watched, and stopped by Delete through
	// its process. Unlisted, it was taken as gone and replaced, and ran on
	// beside its replacement, which nothing stopped.
	for _, n := range lostNodes(p.o.StateDir, "") {
		p.mu.Lock()
		told := p.lost[n.dir] == n.pid
		p.lost[n.dir] = n.pid
		p.mu.Unlock()
		if !told {
			p.o.Log.Warn().Str("cluster", n.machine.Cluster).Str("machine", n.machine.Name).Int("pid", n.pid).Str("dir", n.dir).
				Msg("node runs without its state folder: kept as the machine, stopped through its process when it is deleted")
		}
		p.adopt(n.pid, n.dir)
		out = append(out, instance(n.machine, n.pid, 0))
	}
	return out, nil
}

// tryLock takes dir's mutex if no Create or Delete holds it.
func (p *Provider) tryLock(dir string) bool { return p.mutex(dir).TryLock() }

func (p *Provider) unlock(dir string) { p.mutex(dir).Unlock() }
