package main

import (
	"bytes"
	"errors"
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
	cmd := exec.Command(filepath.Join(asMain(t), "gitfleet"), "import", "capi", "-o", t.TempDir(), fifo)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Give the process time to set its signal handling up (else SIGINT's
	// default would end it, and the test would say nothing).
	time.Sleep(2 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("import of a FIFO nobody writes returned: %v\n%s", err, stderr.String())
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("after SIGINT: %v, want exit code 130\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("still running 30 s after SIGINT\n%s", stderr.String())
	}
}
