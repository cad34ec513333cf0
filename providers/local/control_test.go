package local_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/providers/providertest"
)

// gitfleet node list, kill and stop act on the nodes of one state folder
// and nothing else: a pid file that names another process (here this test)
// is never signalled.
func TestNodeListKillStop(t *testing.T) {
	url := startNATS(t)
	state := t.TempDir()
	p := newProvider(t, url, state)
	for _, name := range []string{"a", "b"} {
		if _, err := p.Create(ctx(t), providertest.Machine(p, "c1", name)); err != nil {
			t.Fatal(err)
		}
	}
	decoy := filepath.Join(state, "c1", "decoy")
	if err := os.MkdirAll(decoy, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(decoy, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(binary, append([]string{"node"}, append(args, "--state-dir", state)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("gitfleet node %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := run("list"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "c1\ta\tpid ") || !strings.Contains(out, "c1\tb\tpid ") || strings.Contains(out, "decoy") {
		t.Fatalf("node list:\n%s", out)
	}
	before := len(nodePIDs(t, state))
	run("kill", "a")
	deadline := time.Now().Add(10 * time.Second)
	for len(nodePIDs(t, state)) != before-1 {
		if time.Now().After(deadline) {
			t.Fatalf("node kill a: %d node processes left, want %d", len(nodePIDs(t, state)), before-1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := exec.Command(binary, "node", "kill", "a", "--state-dir", state).CombinedOutput(); err == nil || !strings.Contains(string(out), `no node of a machine named "a"`) {
		t.Errorf("killing a dead machine: err %v, %s", err, out)
	}
	if out := run("stop"); !strings.Contains(out, "stopped 1 nodes") {
		t.Errorf("node stop: %s", out)
	}
	if left := nodePIDs(t, state); len(left) != 0 {
		t.Errorf("after node stop, node processes %v", left)
	}
}
