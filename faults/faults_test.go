// Package faults is the fault suite: each scenario runs the real gitfleet
// binary (gitfleet serve and separate gitfleet worker processes, local
// machines as gitfleet node processes) on an external nats-server process,
// breaks something, lets the fleet converge, and counts what a user would
// count: machines lost, machines duplicated, status commits lost, daemon
// crashes. It prints one table and fails on any loss or duplicate.
//
// go test ./faults runs the short suite; FAULTS=all (make faults) runs every
// scenario.
package faults

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/reconciler/status"

	git "github.com/go-git/go-git/v5"
)

var (
	binOnce sync.Once
	bin     string
	binErr  error
)

// binary builds the gitfleet binary once per test run.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gitfleet-faults")
		if err != nil {
			binErr = err
			return
		}
		bin = filepath.Join(dir, "gitfleet")
		if out, err := exec.Command("go", "build", "-o", bin, "../cmd/gitfleet").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return bin
}

// want is the demo fleet of gitfleet init: machines per cluster.
var want = map[string]int{"dev-1": 3, "prod-1": 6}

// fleet is one run: a nats-server process, a fleet repository, the daemon
// and a local worker, each a process the scenario may kill.
type fleet struct {
	t       *testing.T
	nats    *natstest.Process
	repo    string
	data    string // the daemon's data dir
	state   string // the local worker's machines
	daemon  *proc
	worker  *proc
	logs    bytes.Buffer
	logMu   sync.Mutex
	crashes int // daemon exits nobody asked for
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{t: t, nats: natstest.StartProcess(t), repo: filepath.Join(t.TempDir(), "fleet"),
		data: t.TempDir(), state: t.TempDir()}
	if out, err := exec.Command(binary(t), "init", f.repo).CombinedOutput(); err != nil {
		t.Fatalf("gitfleet init: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		f.stopDaemon()
		f.stopWorker()
		for _, n := range f.nodes() {
			_ = syscall.Kill(n.pid, syscall.SIGKILL)
		}
		if t.Failed() {
			f.logMu.Lock()
			lines := strings.Split(f.logs.String(), "\n")
			f.logMu.Unlock()
			t.Logf("last log lines:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	return f
}

// logWriter collects a process's output for the failure report.
type logWriter struct{ f *fleet }

func (w logWriter) Write(p []byte) (int, error) {
	w.f.logMu.Lock()
	defer w.f.logMu.Unlock()
	return w.f.logs.Write(p)
}

// proc is a process the suite started; done closes once it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// start runs the binary; a daemon that exits without being killed counts
// as a crash.
func (f *fleet) start(daemon bool, args ...string) *proc {
	f.t.Helper()
	cmd := exec.Command(binary(f.t), args...)
	cmd.Stdout, cmd.Stderr = logWriter{f}, logWriter{f}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); daemon && ok && err != nil && !ws.Signaled() {
			f.logMu.Lock()
			f.crashes++
			f.logMu.Unlock()
		}
	}()
	return p
}

func (f *fleet) startDaemon() {
	f.daemon = f.start(true, "serve", "--repo", f.repo, "--nats", f.nats.URL(), "--data-dir", f.data, "--listen", "",
		"--status-interval", "200ms", "--interval", "1s", "--log-format", "json", "--replica", "d1", "--orphan-grace", "3s")
}

func (f *fleet) startWorker() {
	f.worker = f.start(false, "worker", "--provider", "local", "--nats", f.nats.URL(), "--data-dir", f.data,
		"--state-dir", f.state, "--worker-id", "w1", "--inventory-interval", "2s", "--log-format", "json")
}

func kill(p *proc) {
	if p != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (f *fleet) daemonCrashes() int {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	return f.crashes
}

func (f *fleet) stopDaemon() { kill(f.daemon); f.daemon = nil }
func (f *fleet) stopWorker() { kill(f.worker); f.worker = nil }

type node struct {
	cluster, name string
	pid           int
}

// nodes are the live gitfleet node processes of the worker's state dir:
// the truth of what exists.
func (f *fleet) nodes() []node {
	var out []node
	files, _ := filepath.Glob(filepath.Join(f.state, "*", "*", "pid"))
	for _, p := range files {
		dir := filepath.Dir(p)
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		out = append(out, node{cluster: filepath.Base(filepath.Dir(dir)), name: filepath.Base(dir), pid: pid})
	}
	// Any other node process that claims a machine of this fleet.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("node\x00")) || !bytes.Contains(b, []byte(f.state)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if !slices.ContainsFunc(out, func(n node) bool { return n.pid == pid }) {
			args := strings.Split(string(b), "\x00")
			n := node{pid: pid}
			for i, a := range args {
				if a == "--cluster" && i+1 < len(args) {
					n.cluster = args[i+1]
				}
				if a == "--machine" && i+1 < len(args) {
					n.name = args[i+1]
				}
			}
			out = append(out, n)
		}
	}
	return out
}

// count compares what runs with what the fleet wants: lost machines
// (wanted, not running) and duplicated ones (two processes for one
// machine, or more machines than wanted).
func (f *fleet) count() (lost, dup int, detail string) {
	per := map[string]int{}
	names := map[string]int{}
	for _, n := range f.nodes() {
		per[n.cluster]++
		names[n.cluster+"/"+n.name]++
	}
	for c, w := range want {
		if per[c] < w {
			lost += w - per[c]
		} else {
			dup += per[c] - w
		}
	}
	for n, k := range names {
		if k > 1 {
			dup += k - 1
			detail += " " + n + " runs twice"
		}
	}
	return lost, dup, fmt.Sprintf("running %v%s", per, detail)
}

// converged: the status branch shows every cluster Provisioned with the
// wanted machines Running, and exactly those run.
func (f *fleet) converged() (bool, string) {
	g, err := git.PlainOpen(f.repo)
	if err != nil {
		return false, err.Error()
	}
	snap, err := status.Read(g, "gitfleet/status")
	if err != nil {
		return false, err.Error()
	}
	head, err := exec.Command("git", "-C", f.repo, "rev-parse", "HEAD").Output()
	if err != nil {
		return false, err.Error()
	}
	if la := snap.Fleet.LastApplied; la == nil || la.Commit != strings.TrimSpace(string(head)) {
		return false, "the daemon has not applied HEAD"
	}
	for c, w := range want {
		cs := snap.Cluster(c)
		if cs == nil {
			return false, c + " has no status"
		}
		if cs.Phase != status.ClusterProvisioned {
			return false, c + " is " + cs.Phase
		}
		running := 0
		for _, m := range cs.Machines {
			if m.Phase == "Running" && !m.Unhealthy && m.Version == cs.Version {
				running++
			}
		}
		if running != w || len(cs.Machines) != w {
			return false, fmt.Sprintf("%s: %d machines, %d Running, want %d", c, len(cs.Machines), running, w)
		}
	}
	lost, dup, detail := f.count()
	return lost == 0 && dup == 0, detail
}

// settle is how long a converged fleet must stay converged: a daemon
// that restarts, rebuilds or replaces machines does so within it, so a
// picture that only looks right for a moment does not count.
const settle = 5 * time.Second

// converge waits for the fleet to converge and stay so for settle, and
// returns how long it took to converge.
func (f *fleet) converge(what string) time.Duration {
	f.t.Helper()
	start := time.Now()
	last := ""
	var since time.Time // converged without a break since
	for time.Since(start) < 3*time.Minute {
		ok, why := f.converged()
		switch {
		case !ok:
			since, last = time.Time{}, why
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= settle:
			return since.Sub(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.t.Errorf("%s: not converged in 3 minutes: %s", what, last)
	return time.Since(start)
}

// statusCommits is the number of commits on the status branch.
func (f *fleet) statusCommits() int {
	out, err := exec.Command("git", "-C", f.repo, "rev-list", "--count", "gitfleet/status").Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

// result is one row of the table.
type result struct {
	scenario            string
	converged           time.Duration
	lost, dup, crashes  int
	statusHistoryBroken bool
}

var (
	tableMu sync.Mutex
	table   []result
)

func record(r result) {
	tableMu.Lock()
	table = append(table, r)
	tableMu.Unlock()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if len(table) > 0 {
		fmt.Printf("\n%-52s %10s %5s %5s %8s %14s\n", "scenario", "converged", "lost", "dup", "crashes", "status history")
		for _, r := range table {
			h := "kept"
			if r.statusHistoryBroken {
				h = "BROKEN"
			}
			fmt.Printf("%-52s %9.1fs %5d %5d %8d %14s\n", r.scenario, r.converged.Seconds(), r.lost, r.dup, r.crashes, h)
		}
	}
	os.Exit(code)
}

// scenario is one fault: break runs on a converged fleet and leaves it to
// recover.
type scenario struct {
	name  string
	short bool // part of make test's short suite
	fault func(f *fleet)
}

var scenarios = []scenario{
	{"worker SIGKILL mid-create, restarted", true, func(f *fleet) {
		f.stopWorker()
		// Scale up, so creates are in flight when the worker dies.
		f.edit("clusters/dev-1.yaml", "replicas: 2", "replicas: 4")
		want["dev-1"] = 5
		f.startWorker()
		for start := time.Now(); len(f.nodes()) < 10 && time.Since(start) < time.Minute; {
			time.Sleep(20 * time.Millisecond)
		}
		f.stopWorker()
		f.startWorker()
	}},
	{"reboot: every node killed while the daemon is down", true, func(f *fleet) {
		f.stopDaemon()
		f.stopWorker()
		for _, n := range f.nodes() {
			_ = syscall.Kill(n.pid, syscall.SIGKILL)
		}
		f.startWorker()
		f.startDaemon()
	}},
	{"NATS store deleted with machines running", false, func(f *fleet) {
		f.stopDaemon()
		f.stopWorker()
		f.nats.Kill()
		if err := os.RemoveAll(f.nats.Store); err != nil {
			f.t.Fatal(err)
		}
		f.nats.Start()
		f.startWorker()
		f.startDaemon()
	}},
	{"nats-server SIGKILL and restart on its store", false, func(f *fleet) {
		f.nats.Kill()
		time.Sleep(time.Second)
		f.nats.Start()
	}},
	{"daemon SIGKILL mid-rollout", false, func(f *fleet) {
		before := map[string]bool{}
		for _, n := range f.nodes() {
			before[n.name] = true
		}
		f.edit("classes/standard.yaml", "version: v1.31.2", "version: v1.32.0")
		// Kill it as the first machine of the new version starts.
		for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(10 * time.Millisecond) {
			if slices.ContainsFunc(f.nodes(), func(n node) bool { return !before[n.name] }) {
				break
			}
		}
		f.stopDaemon()
		f.startDaemon()
	}},
	{"stray machine (orphan)", false, func(f *fleet) {
		// A node started by hand for a machine no record wants.
		dir := filepath.Join(f.state, "dev-1", "dev-1-md-0-stray")
		stray := exec.Command(binary(f.t), "node", "--cluster", "dev-1", "--machine", "dev-1-md-0-stray", "--state-dir", dir,
			"--nats", f.nats.URL())
		if err := stray.Start(); err != nil {
			f.t.Fatal(err)
		}
		go func() { _ = stray.Wait() }()
	}},
}

func (f *fleet) edit(file, old, new string) {
	f.t.Helper()
	p := filepath.Join(f.repo, file)
	b, err := os.ReadFile(p)
	if err != nil {
		f.t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		f.t.Fatalf("%s has no %q", file, old)
	}
	if err := os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		f.t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=Fault", "-c", "user.email=fault@example.com", "commit", "-qm", "fault: " + file}} {
		if out, err := exec.Command("git", append([]string{"-C", f.repo}, args...)...).CombinedOutput(); err != nil {
			f.t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// TestFaults runs the scenarios: each on a fleet of its own, one at a
// time (they count processes), and fails on any loss or duplicate.
func TestFaults(t *testing.T) {
	all := os.Getenv("FAULTS") == "all"
	if testing.Short() && !all {
		t.Skip("the fault suite runs real processes; make faults runs it all")
	}
	for _, sc := range scenarios {
		if !sc.short && !all {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			want = map[string]int{"dev-1": 3, "prod-1": 6}
			f := newFleet(t)
			f.startWorker()
			f.startDaemon()
			f.converge("initial fleet")
			before := f.statusCommits()
			sc.fault(f)
			took := f.converge("after the fault")
			lost, dup, detail := f.count()
			crashes := f.daemonCrashes()
			r := result{scenario: sc.name, converged: took, lost: lost, dup: dup, crashes: crashes,
				statusHistoryBroken: f.statusCommits() < before}
			record(r)
			if lost != 0 || dup != 0 || crashes != 0 || r.statusHistoryBroken {
				t.Errorf("%s: lost %d, duplicated %d, daemon crashes %d, status history broken %v (%s)",
					sc.name, lost, dup, crashes, r.statusHistoryBroken, detail)
			}
		})
	}
}
