package natstest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/freeport"
)

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// ServerBinary builds the nats-server of the module's own nats-server
// dependency (once per test binary) and returns its path.
func ServerBinary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gitfleet-nats-server")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "nats-server")
		cmd := exec.Command("go", "build", "-o", built, "github.com/nats-io/nats-server/v2")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build nats-server: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return built
}

// Process is a nats-server running as its own process, with JetStream
// storing in a folder of its own, that a test can kill, stop, resume and
// start again on the same store and port.
type Process struct {
	tb    testing.TB
	bin   string
	Store string // the JetStream store folder
	Port  int
	cmd   *exec.Cmd
	done  chan struct{}
	// args are added to every start (--user and --pass, a config file).
	args []string
}

// StartProcess starts a nats-server process on a free port with its store
// in tb.TempDir(), and args added to its command line; it is killed on
// cleanup.
func StartProcess(tb testing.TB, args ...string) *Process {
	tb.Helper()
	p := &Process{tb: tb, bin: ServerBinary(tb), Store: filepath.Join(tb.TempDir(), "jetstream"), Port: freeport.Port(tb), args: args}
	p.Start()
	tb.Cleanup(func() { p.Kill() })
	return p
}

// URL is the server's client URL.
func (p *Process) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(p.Port) }

// Start starts the server (again) on its store and port, and waits until
// it accepts connections.
func (p *Process) Start() {
	p.tb.Helper()
	cmd := exec.Command(p.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-js", "-sd", p.Store,
		"-n", "gitfleet-test-"+strconv.Itoa(p.Port))
	cmd.Args = append(cmd.Args, p.args...)
	if err := cmd.Start(); err != nil {
		p.tb.Fatal(err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	done := p.done
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p.Port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			p.tb.Fatalf("nats-server on port %d not up in 30s", p.Port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pid is the running server's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

func (p *Process) signal(sig syscall.Signal) {
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Kill SIGKILLs the server and waits until it is gone.
func (p *Process) Kill() {
	if p.cmd == nil {
		return
	}
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGKILL)
	<-p.done
	p.cmd = nil
}

// Pause stops the server (SIGSTOP): connections stay open, nothing answers.
func (p *Process) Pause() { p.signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (p *Process) Resume() { p.signal(syscall.SIGCONT) }
