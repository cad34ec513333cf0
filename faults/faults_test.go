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

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/pki"
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

// fleet is one run: a nats-server process, a fleet repository, daemons
// and local workers, each a process the scenario may kill, stop or resume.
type fleet struct {
	t         *testing.T
	nats      *natstest.Process
	repo      string // the working repository commits are made in
	stateRoot string // every worker's machines, one folder per worker
	keyFile   string // the secrets key of every replica and worker
	daemons   map[string]*proc
	workers   map[string]*proc
	logs      bytes.Buffer
	logMu     sync.Mutex
	crashes   int      // daemon exits nobody asked for
	before    []string // a scenario's note of the machines before its fault
	js        jetstream.JetStream

	// Set by a scenario's setup, before the first process starts:
	remote     string   // bare repository the daemons read (a remote scenario)
	repoArg    string   // the daemons' --repo (default: repo)
	listen     string   // the daemons' --listen (default: none); one daemon only
	daemonArgs []string // added to every daemon's command line
	workerArgs []string // added to every worker's command line
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{t: t, nats: natstest.StartProcess(t), repo: filepath.Join(t.TempDir(), "fleet"),
		stateRoot: t.TempDir(), daemons: map[string]*proc{}, workers: map[string]*proc{}}
	if out, err := exec.Command(binary(t), "init", f.repo).CombinedOutput(); err != nil {
		t.Fatalf("gitfleet init: %v\n%s", err, out)
	}
	// Every replica and worker shares one secrets key, as in production.
	f.keyFile = filepath.Join(f.stateRoot, "secrets.key")
	if err := pki.NewKeyFile(f.keyFile); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for id := range f.daemons {
			f.stopDaemon(id)
		}
		for id := range f.workers {
			f.stopWorker(id)
		}
		for _, n := range f.nodes() {
			_ = syscall.Kill(n.pid, syscall.SIGKILL)
		}
		if dir := os.Getenv("FAULTS_LOGS"); dir != "" {
			f.logMu.Lock()
			name := strings.NewReplacer("/", "_", " ", "_", ":", "").Replace(t.Name()) + ".log"
			if err := os.WriteFile(filepath.Join(dir, name), f.logs.Bytes(), 0o600); err != nil {
				t.Log(err)
			}
			f.logMu.Unlock()
		}
		if t.Failed() {
			f.logMu.Lock()
			lines := strings.Split(f.logs.String(), "\n")
			f.logMu.Unlock()
			t.Logf("last log lines:\n%s", strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
	})
	return f
}

// gitDir is where the status branch and the applied spec are read: the
// remote when the daemons read one.
func (f *fleet) gitDir() string {
	if f.remote != "" {
		return f.remote
	}
	return f.repo
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

// startDaemon starts daemon replica id (d1 unless a scenario runs more),
// with a data dir of its own that survives its restarts.
func (f *fleet) startDaemon(id ...string) {
	name := one(id, "d1")
	repo := f.repoArg
	if repo == "" {
		repo = f.repo
	}
	args := []string{"serve", "--repo", repo, "--nats", f.nats.URL(), "--data-dir", filepath.Join(f.stateRoot, "data-"+name),
		"--listen", f.listen, "--status-interval", "200ms", "--interval", "1s", "--log-format", "json", "--replica", name,
		"--orphan-grace", "3s", "--secrets-key-file", f.keyFile}
	f.daemons[name] = f.start(true, append(args, f.daemonArgs...)...)
}

// startWorker starts local worker id (w1 unless a scenario runs more),
// whose machines live in a state folder of its own.
func (f *fleet) startWorker(id ...string) {
	name := one(id, "w1")
	args := []string{"worker", "--provider", "local", "--nats", f.nats.URL(), "--data-dir", filepath.Join(f.stateRoot, "data-"+name),
		"--state-dir", filepath.Join(f.stateRoot, name), "--worker-id", name, "--inventory-interval", "2s", "--log-format", "json",
		"--secrets-key-file", f.keyFile}
	f.workers[name] = f.start(false, append(args, f.workerArgs...)...)
}

func one(ids []string, def string) string {
	if len(ids) > 0 {
		return ids[0]
	}
	return def
}

func kill(p *proc) {
	if p != nil {
		_ = p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies only once resumed
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// signal sends sig (SIGSTOP, SIGCONT) to a running process.
func signal(p *proc, sig syscall.Signal) {
	if p != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

func (f *fleet) daemonCrashes() int {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	return f.crashes
}

func (f *fleet) stopDaemon(id ...string) {
	name := one(id, "d1")
	kill(f.daemons[name])
	delete(f.daemons, name)
}

func (f *fleet) stopWorker(id ...string) {
	name := one(id, "w1")
	kill(f.workers[name])
	delete(f.workers, name)
}

type node struct {
	worker, cluster, name string
	pid                   int
}

// nodes are the live gitfleet node processes of the worker's state dir:
// the truth of what exists.
func (f *fleet) nodes() []node {
	var out []node
	files, _ := filepath.Glob(filepath.Join(f.stateRoot, "*", "*", "*", "pid"))
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
		out = append(out, node{worker: filepath.Base(filepath.Dir(filepath.Dir(dir))), cluster: filepath.Base(filepath.Dir(dir)),
			name: filepath.Base(dir), pid: pid})
	}
	// Any other node process that claims a machine of this fleet.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("\x00node\x00")) || !bytes.Contains(b, []byte(f.stateRoot)) {
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
				if a == "--state-dir" && i+1 < len(args) {
					if rel, err := filepath.Rel(f.stateRoot, args[i+1]); err == nil {
						n.worker, _, _ = strings.Cut(rel, string(filepath.Separator))
					}
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
	g, err := git.PlainOpen(f.gitDir())
	if err != nil {
		return false, err.Error()
	}
	snap, err := status.Read(g, "gitfleet/status")
	if err != nil {
		return false, err.Error()
	}
	head, err := exec.Command("git", "-C", f.repo, "rev-parse", "main").Output()
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
// returns how long it took to converge, counted from start.
func (f *fleet) converge(what string, start time.Time) time.Duration {
	f.t.Helper()
	last := ""
	var since time.Time // converged without a break since
	for began := time.Now(); time.Since(began) < 3*time.Minute; {
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

// statusTip is the commit the status branch points at ("" before the
// first status commit).
func (f *fleet) statusTip() string {
	out, err := exec.Command("git", "-C", f.gitDir(), "rev-parse", "--verify", "-q", "refs/heads/gitfleet/status").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// descends says whether the status branch's tip is old or a descendant of
// it: no status commit was lost or rewritten in between.
func (f *fleet) descends(old, tip string) bool {
	if old == "" || old == tip {
		return true
	}
	return exec.Command("git", "-C", f.gitDir(), "merge-base", "--is-ancestor", old, tip).Run() == nil
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

// edit commits a one-line change to the fleet repository as a user
// would, and pushes it when the daemons read a remote.
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
	f.commit("fault: " + file)
}

// commit commits everything in the working repository (and pushes it to
// the remote, when there is one).
func (f *fleet) commit(msg string) {
	f.t.Helper()
	if err := f.tryCommit(msg); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) tryCommit(msg string) error {
	steps := [][]string{{"add", "-A"}, {"-c", "user.name=Fault", "-c", "user.email=fault@example.com", "commit", "-qm", msg}}
	if f.remote != "" {
		steps = append(steps, []string{"push", "-q", f.remote, "main"})
	}
	for _, args := range steps {
		if out, err := exec.Command("git", append([]string{"-C", f.repo}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v\n%s", args, err, out)
		}
	}
	return nil
}

// watchStatus samples the status branch until stop is called, and reports
// whether it ever moved to a commit that does not descend from the one
// before: a status commit lost or rewritten.
func (f *fleet) watchStatus() (stop func() (broken bool, detail string)) {
	done := make(chan struct{})
	var broken bool
	var detail string
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		last := f.statusTip()
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			tip := f.statusTip()
			if tip == "" {
				continue
			}
			if !f.descends(last, tip) && !broken {
				broken, detail = true, fmt.Sprintf("the status branch moved from %.12s to %.12s, which does not descend from it", last, tip)
			}
			last = tip
		}
	}()
	return func() (bool, string) {
		close(done)
		<-finished
		return broken, detail
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
			if sc.setup != nil {
				sc.setup(f)
			}
			f.startWorker()
			f.startDaemon()
			f.converge("initial fleet", time.Now())
			before := f.statusTip()
			stopWatch := f.watchStatus()
			start := time.Now()
			sc.fault(f)
			took := f.converge("after the fault", start)
			broken, why := stopWatch()
			if !f.descends(before, f.statusTip()) {
				broken, why = true, "the status commit of the converged fleet is gone"
			}
			lost, dup, detail := f.count()
			crashes := f.daemonCrashes()
			r := result{scenario: sc.name, converged: took, lost: lost, dup: dup, crashes: crashes, statusHistoryBroken: broken}
			record(r)
			if lost != 0 || dup != 0 || crashes != 0 || broken {
				t.Errorf("%s: lost %d, duplicated %d, daemon crashes %d, status history broken %v %s (%s)",
					sc.name, lost, dup, crashes, broken, why, detail)
			}
			if sc.verify != nil {
				sc.verify(f)
			}
		})
	}
}
