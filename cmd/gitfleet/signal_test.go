package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStopOnSignal: the first signal cancels the command's context. A
// one-shot command that has not returned a moment later ends with the
// shell's code for the signal; a command that runs until stopped is left
// to shut down, and only a second signal ends it at once.
func TestStopOnSignal(t *testing.T) {
	type outcome struct {
		code   int
		stderr string
	}
	start := func(untilStopped bool) (chan<- os.Signal, <-chan struct{}, <-chan outcome) {
		sigs, cancelled, exited := make(chan os.Signal, 2), make(chan struct{}), make(chan outcome, 1)
		var stderr bytes.Buffer
		go stopOnSignal(sigs, func() { close(cancelled) }, untilStopped, &stderr,
			func(code int) { exited <- outcome{code, stderr.String()} })
		return sigs, cancelled, exited
	}

	sigs, cancelled, exited := start(false)
	sigs <- syscall.SIGINT
	<-cancelled
	if o := <-exited; o.code != 130 || !strings.Contains(o.stderr, "interrupt") {
		t.Errorf("one-shot after SIGINT: exit %d, %q; want 130, saying so", o.code, o.stderr)
	}

	sigs, cancelled, exited = start(true)
	sigs <- syscall.SIGTERM
	<-cancelled
	select {
	case o := <-exited:
		t.Fatalf("a daemon was ended by its first signal (exit %d): it gets to shut down", o.code)
	case <-time.After(2 * oneShotGrace):
	}
	sigs <- syscall.SIGTERM
	if o := <-exited; o.code != 143 || !strings.Contains(o.stderr, "again") {
		t.Errorf("daemon after a second SIGTERM: exit %d, %q; want 143", o.code, o.stderr)
	}
}

// TestCtrlCEndsABlockedCommand: gitfleet, run as a process, stuck in a
// read that does not watch its context (import capi of a FIFO nobody
// writes), ends on SIGINT with exit code 130 instead of running on.
func TestCtrlCEndsABlockedCommand(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	stderr, err := interrupted(t, nil, nil, "import", "capi", "-o", t.TempDir(), fifo)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("after SIGINT: %v, want exit code 130\n%s", err, stderr)
	}
}

// interrupted runs gitfleet (this test binary as its main) with args and
// env, sends it SIGINT once it has had 2 s to set its signal handling up
// and reach its work (else SIGINT's default would end it, and the test
// would say nothing), after before, and returns how it ended.
func interrupted(t *testing.T, before func(), env []string, args ...string) (stderr string, err error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(asMain(t), "gitfleet"), args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	time.Sleep(2 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("gitfleet %s returned before the signal: %v\n%s", strings.Join(args, " "), err, out.String())
	default:
	}
	if before != nil {
		before()
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
		return out.String(), err
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("still running 30 s after SIGINT\n%s", out.String())
	}
	return "", nil
}

// TestInterruptCleanups: a signal that ends a one-shot command's process
// runs what the command asked for (plan's temporary clone, removed by a
// defer that os.Exit skips) before exiting; a daemon's second signal
// does not (its own shutdown was cut short on purpose).
func TestInterruptCleanups(t *testing.T) {
	// Only this test's cleanup: earlier tests' (plan's) are set aside.
	interruptCleanups.Lock()
	saved := interruptCleanups.fns
	interruptCleanups.fns = nil
	interruptCleanups.Unlock()
	defer func() {
		interruptCleanups.Lock()
		interruptCleanups.fns = saved
		interruptCleanups.Unlock()
	}()
	ran := 0
	onInterrupt(func() { ran++ })
	var code int
	exitOnSignal(true, func(c int) { code = c })(143)
	if ran != 0 || code != 143 {
		t.Errorf("a daemon's exit ran %d cleanups, code %d", ran, code)
	}
	exitOnSignal(false, func(c int) { code = c })(130)
	if ran != 1 || code != 130 {
		t.Errorf("a one-shot command's exit ran %d cleanups, code %d; want 1, 130", ran, code)
	}
}

// TestCtrlCRemovesPlansClone: plan of a remote that never answers, ended
// by SIGINT, leaves no temporary clone behind.
func TestCtrlCRemovesPlansClone(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // read nothing, answer nothing
		}
	}()
	tmp := t.TempDir()
	stderr, _ := interrupted(t, func() {
		if left, _ := filepath.Glob(filepath.Join(tmp, "gitfleet-plan-*")); len(left) == 0 {
			t.Fatal("plan made no temporary clone: the test tests nothing")
		}
	}, []string{"TMPDIR=" + tmp, "GITFLEET_CACHE=off"}, "plan", "--repo", "http://"+l.Addr().String()+"/fleet.git", "--base", "main", "--head", "pr")
	left, _ := filepath.Glob(filepath.Join(tmp, "gitfleet-plan-*"))
	if len(left) > 0 {
		t.Errorf("left behind: %v\n%s", left, stderr)
	}
}

// TestNodeVerbsAreOneShot: node runs a machine until stopped, but its
// control verbs end on the first signal like any one-shot command.
func TestNodeVerbsAreOneShot(t *testing.T) {
	for args, want := range map[string]bool{"": true, "--cluster c --machine m": true, "list": false, "kill m": false, "stop": false} {
		if got := commands["node"].untilStopped(strings.Fields(args)); got != want {
			t.Errorf("node %s: runs until stopped %t, want %t", args, got, want)
		}
	}
	for _, c := range []string{"validate", "plan", "import", "kubeconfig", "scale"} {
		if commands[c].untilStopped != nil {
			t.Errorf("%s runs until stopped; it is one-shot", c)
		}
	}
}

// cancelOn is a log that cancels a context when a line holding word is
// written to it: the stop comes at that step of a daemon's start.
type cancelOn struct {
	syncBuffer
	word   string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(c.word)) {
		c.cancel()
	}
	return c.syncBuffer.Write(p)
}

// TestUpStoppedWhileStarting: gitfleet up stopped (Ctrl-C, SIGTERM) at
// each step of its start — NATS up, the first revision read, a worker
// started — ends as a stop after the start does: exit 0, and no error
// about a context being canceled.
func TestUpStoppedWhileStarting(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon")
	}
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "an empty fleet"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	for _, step := range []string{"embedded nats-server started", `"commit":`, `"provider":"local"`, `"provider":"inmemory"`} {
		t.Run(step, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			log := &cancelOn{word: step, cancel: cancel}
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, []string{"up", "--repo", repo, "--data-dir", t.TempDir(), "--listen", "", "--log-format", "json"},
					&cmdEnv{stdout: io.Discard, stderr: log})
			}()
			select {
			case code := <-done:
				if code != 0 || strings.Contains(log.String(), "context canceled") || !strings.Contains(log.String(), step) {
					t.Errorf("up stopped at %q: exit %d, want 0 and no error about a canceled context; log:\n%s", step, code, log.String())
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("up stopped at %q still runs after 60s; log:\n%s", step, log.String())
			}
		})
	}
}
