package local_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/local"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
)

// binary is gitfleet, built once for every test.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gitfleet-local-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "gitfleet")
	build := exec.Command("go", "build", "-o", binary, "github.com/gitfleet/gitfleet/cmd/gitfleet")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gitfleet:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newProvider returns a local provider on a fresh state dir whose nodes are
// all killed on cleanup.
func newProvider(t *testing.T, url, stateDir string) *local.Provider {
	t.Helper()
	p, err := local.New(local.Options{StateDir: stateDir, Binary: binary, NATSURL: url, StopGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killNodes(t, stateDir) })
	return p
}

// killNodes SIGKILLs every node process whose state folder is under root.
func killNodes(t *testing.T, root string) {
	for _, pid := range nodePIDs(t, root) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// nodePIDs scans /proc for `gitfleet node` processes with a state folder
// under root: the truth, whatever pid files say.
func nodePIDs(t *testing.T, root string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i, a := range args {
			if a == "--state-dir" && i+1 < len(args) && strings.HasPrefix(args[i+1], root+string(filepath.Separator)) && len(args) > 1 && args[1] == "node" {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func startNATS(t *testing.T) string { return natstest.Start(t).ClientURL() }

var _ providers.Provider = (*local.Provider)(nil)
