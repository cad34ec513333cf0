package local_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// syncBuffer collects a process's output safely.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startWorkerProcess runs `gitfleet worker --provider local` as a real process.
func startWorkerProcess(t *testing.T, url, state string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	out := &syncBuffer{}
	cmd := exec.Command(binary, append([]string{"worker", "--provider", "local", "--nats", url, "--state-dir", state,
		"--ack-wait", "1s", "--concurrency", "2"}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, out
}

// A worker process SIGKILLed in the middle of a create: the node it started
// survives, the task is redelivered, a new worker adopts the node, and the
// end state is exactly one machine.
func TestWorkerProcessKilledMidCreate(t *testing.T) {
	url := startNATS(t)
	state := t.TempDir()
	t.Cleanup(func() { killNodes(t, state) })
	_, js := natstest.Connect(t, url)

	w1, out1 := startWorkerProcess(t, url, state)
	task := wire.Task{ID: "create-c1-m-1", Operation: wire.OpCreate, Machine: wire.Machine{
		Name: "m-1", Cluster: "c1", Role: wire.RoleWorker, Version: "v1.31.0", Provider: "local",
		Spec: json.RawMessage(`{"startupDelay": "1500ms", "heartbeatInterval": "200ms"}`)}}
	natstest.Intend(t, js, task)
	pub := natsbus.NewPublisher(js)
	if _, err := pub.Publish(ctx(t), &task); err != nil {
		t.Fatal(err)
	}
	if err := pub.Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}

	pidPath := filepath.Join(state, "c1", "m-1", "pid")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(pidPath); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker started no node in 30s; its output:\n%s", out1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := w1.Process.Kill(); err != nil { // SIGKILL, mid-create: the node is still booting
		t.Fatal(err)
	}
	_ = w1.Wait()
	first := nodePIDs(t, state)
	if len(first) != 1 {
		t.Fatalf("node processes after the worker was killed: %v; want the one node, still running", first)
	}

	w2, out2 := startWorkerProcess(t, url, state)
	ev := waitEvent(t, js, wire.PhaseRunning)
	if want := "local://" + strconv.Itoa(first[0]); ev.ProviderID != want {
		t.Errorf("Running event provider ID %s; want the adopted node %s", ev.ProviderID, want)
	}
	if got := nodePIDs(t, state); len(got) != 1 || got[0] != first[0] {
		t.Errorf("node processes at the end: %v; want exactly the first node %v", got, first)
	}

	// SIGTERM drains the worker and it exits cleanly.
	if err := w2.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := w2.Wait(); err != nil {
		t.Errorf("worker after SIGTERM: %v; output:\n%s", err, out2)
	}
	if got := nodePIDs(t, state); len(got) != 1 {
		t.Errorf("nodes after the worker stopped: %v; want the node to outlive its worker", got)
	}
}

func waitEvent(t *testing.T, js jetstream.JetStream, phase wire.Phase) wire.Event {
	t.Helper()
	cons, err := js.OrderedConsumer(ctx(t), wire.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			continue
		}
		ev, err := wire.DecodeEvent(msg.Data())
		if err == nil && ev.Phase == phase {
			return ev
		}
	}
	t.Fatalf("no %s event in 30s", phase)
	return wire.Event{}
}

// createByTask publishes the create of machine name in cluster c1, as the
// daemon does: its record first, then its task.
func createByTask(t *testing.T, js jetstream.JetStream, name string) {
	t.Helper()
	task := wire.Task{ID: "create-c1-" + name, Operation: wire.OpCreate, Machine: wire.Machine{
		Name: name, Cluster: "c1", Role: wire.RoleWorker, Version: "v1.31.0", Provider: "local",
		Spec: json.RawMessage(`{"heartbeatInterval": "200ms"}`)}}
	natstest.Intend(t, js, task)
	pub := natsbus.NewPublisher(js)
	if _, err := pub.Publish(ctx(t), &task); err != nil {
		t.Fatal(err)
	}
	if err := pub.Wait(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// drain takes the inventories reported until none has come for half a
// second.
func drain(reports <-chan wire.Inventory) {
	for {
		select {
		case <-reports:
		case <-time.After(500 * time.Millisecond):
			return
		}
	}
}

// nodeRig is a worker process with an hour's inventory interval that ran
// the create of machine m-1: its node, and the inventories reported.
type nodeRig struct {
	url, state string
	reports    <-chan wire.Inventory
	worker     *exec.Cmd
	out        *syncBuffer // the worker's output
	node       int         // m-1's pid
}

func startNodeRig(t *testing.T) *nodeRig {
	t.Helper()
	r := &nodeRig{url: startNATS(t), state: t.TempDir()}
	t.Cleanup(func() { killNodes(t, r.state) })
	nc, js := natstest.Connect(t, r.url)
	r.reports = natstest.Inventories(t, nc)
	r.worker, r.out = startWorkerProcess(t, r.url, r.state, "--inventory-interval", "1h")
	createByTask(t, js, "m-1")
	waitEvent(t, js, wire.PhaseRunning)
	pids := nodePIDs(t, r.state)
	if len(pids) != 1 {
		t.Fatalf("node processes %v; want one", pids)
	}
	r.node = pids[0]
	return r
}

// killNode SIGKILLs m-1's node and waits up to d for an inventory that
// lists the machine as NodeExited.
func (r *nodeRig) killNode(t *testing.T, d time.Duration) {
	t.Helper()
	if err := syscall.Kill(r.node, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !natstest.NextInventory(r.reports, d, func(got map[string]wire.Instance) bool {
		return got["m-1"].Reason == "NodeExited"
	}) {
		t.Fatalf("no inventory listed the killed node as NodeExited within %s (interval 1h); worker output:\n%s", d, r.out)
	}
}

// A node the worker started dies outside a task (SIGKILL): the worker
// reports its inventory at once, listing the machine as NodeExited, so the
// daemon replaces it within moments — not at the next inventory interval
// (an hour here) nor after the heartbeat timeout.
func TestAKilledNodeIsReportedAtOnce(t *testing.T) {
	r := startNodeRig(t)
	drain(r.reports) // the report the worker makes at its start, before or after the create
	r.killNode(t, 30*time.Second)
}

// A worker restarts (SIGKILL, then a new process) and adopts the node the
// first one started, which is not its child; when that node is killed, the
// new worker reports its inventory at once, listing the machine as
// NodeExited — not at the next inventory interval (an hour here) nor after
// the heartbeat timeout.
func TestAnAdoptedNodeKilledIsReportedAtOnce(t *testing.T) {
	r := startNodeRig(t)
	if err := r.worker.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = r.worker.Wait()
	drain(r.reports) // the first worker's
	r.worker, r.out = startWorkerProcess(t, r.url, r.state, "--inventory-interval", "1h")
	// Its report at its start lists the node, which it watches from then on.
	if !natstest.NextInventory(r.reports, 30*time.Second, func(got map[string]wire.Instance) bool {
		return got["m-1"].ProviderID == "local://"+strconv.Itoa(r.node)
	}) {
		t.Fatalf("the restarted worker reported no inventory with the node running within 30s; its output:\n%s", r.out)
	}
	r.killNode(t, 10*time.Second)
}
