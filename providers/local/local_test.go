package local_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/local"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/providers/providertest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// The leader takes a report of local machines as covering its worker's
// only, whatever the report says (wire.HostBound), as the provider is.
func TestLeaderKnowsLocalIsHostBound(t *testing.T) {
	var p providers.Provider = &local.Provider{}
	hb, ok := p.(providers.HostBound)
	if !ok || !hb.HostBound() || !wire.HostBound(local.Name, false) {
		t.Errorf("local: HostBound %v (implemented %v); the leader takes its reports as host-bound: %v", ok && hb.HostBound(), ok, wire.HostBound(local.Name, false))
	}
}

func TestConformance(t *testing.T) {
	url := startNATS(t)
	providertest.Run(t, func(t *testing.T) providers.Provider { return newProvider(t, url, t.TempDir()) })
}

func TestNodeIsAMachine(t *testing.T) {
	url := startNATS(t)
	nc, _ := natstest.Connect(t, url)
	beats := make(chan wire.Heartbeat, 100)
	sub, err := nc.Subscribe(wire.HeartbeatSubject("c1", "cp-0"), func(m *nats.Msg) {
		if hb, err := wire.DecodeHeartbeat(m.Data); err == nil {
			beats <- hb
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	state := t.TempDir()
	p := newProvider(t, url, state)
	m := providertest.Machine(p, "c1", "cp-0")
	m.Role = wire.RoleControlPlane
	m.Spec = json.RawMessage(`{"cpus": 2, "memory": "512Mi", "heartbeatInterval": "100ms", "startupDelay": "200ms"}`)
	start := time.Now()
	inst, err := p.Create(ctx(t), m)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("Create returned after %s; want it to wait out the 200ms startup delay", d)
	}
	if !strings.HasPrefix(inst.ProviderID, "local://") || len(inst.Addresses) != 1 {
		t.Fatalf("instance %+v; want a local:// provider ID and one address", inst)
	}

	dir := filepath.Join(state, "c1", "cp-0")
	var onDisk wire.Machine
	if b, err := os.ReadFile(filepath.Join(dir, "machine.json")); err != nil || json.Unmarshal(b, &onDisk) != nil {
		t.Fatalf("machine.json: %v %s", err, b)
	}
	if onDisk.Role != wire.RoleControlPlane || !strings.Contains(string(onDisk.Spec), "512Mi") {
		t.Errorf("machine.json = %+v; want the machine with its spec", onDisk)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "bootstrap.yaml")); err != nil || !strings.Contains(string(b), `kubernetesVersion: "v1.30.2"`) {
		t.Errorf("bootstrap.yaml: %v\n%s", err, b)
	}
	resp, err := http.Get("http://" + inst.Addresses[0] + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"healthy":true`) {
		t.Errorf("healthz: %d %s", resp.StatusCode, body)
	}

	hb := waitBeat(t, beats, true)
	if hb.Version != "v1.30.2" || hb.Cluster != "c1" || hb.Machine != "cp-0" {
		t.Errorf("heartbeat %+v; want the machine's cluster, name and version", hb)
	}

	// Killing the node is a machine failure: heartbeats stop, List drops it.
	pids := nodePIDs(t, state)
	if len(pids) != 1 {
		t.Fatalf("node processes: %v; want 1", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // let heartbeats already on the wire arrive
	for len(beats) > 0 {
		<-beats
	}
	select {
	case hb := <-beats:
		t.Fatalf("heartbeat after the node was killed: %+v", hb)
	case <-time.After(500 * time.Millisecond):
	}
	// The provider still has the machine's folder, but no node: List says
	// it died, so the daemon replaces it.
	if list, _ := p.List(ctx(t)); len(list) != 1 || list[0].Reason != "NodeExited" || list[0].Name != "cp-0" ||
		list[0].Role != wire.RoleControlPlane || list[0].Deployment != m.Deployment {
		t.Errorf("List after the node was killed: %+v; want cp-0 with reason NodeExited", list)
	}
	// Creating it again starts a new node.
	again, err := p.Create(ctx(t), m)
	if err != nil {
		t.Fatal(err)
	}
	if again.ProviderID == inst.ProviderID {
		t.Errorf("re-created machine kept provider ID %s of the dead node", inst.ProviderID)
	}
	waitBeat(t, beats, true)
}

func waitBeat(t *testing.T, beats <-chan wire.Heartbeat, healthy bool) wire.Heartbeat {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case hb := <-beats:
			if hb.Healthy == healthy {
				return hb
			}
		case <-timeout:
			t.Fatalf("no heartbeat with healthy=%v in 10s", healthy)
		}
	}
}

func TestRestartedProviderAdoptsNodes(t *testing.T) {
	url := startNATS(t)
	state := t.TempDir()
	first := newProvider(t, url, state)
	var made []providers.Instance
	for _, name := range []string{"a", "b"} {
		inst, err := first.Create(ctx(t), providertest.Machine(first, "c1", name))
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, inst)
	}
	before := nodePIDs(t, state)

	second := newProvider(t, url, state) // a restarted worker
	list, err := second.List(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ProviderID != made[0].ProviderID || list[1].ProviderID != made[1].ProviderID {
		t.Fatalf("restarted provider lists %+v; want the running nodes %+v", list, made)
	}
	inst, err := second.Create(ctx(t), providertest.Machine(second, "c1", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if inst.ProviderID != made[0].ProviderID {
		t.Errorf("Create after restart returned %s; want the adopted node %s", inst.ProviderID, made[0].ProviderID)
	}
	after := nodePIDs(t, state)
	slices.Sort(before)
	slices.Sort(after)
	if !slices.Equal(before, after) {
		t.Errorf("node processes %v after adoption; want the same %v (no duplicates)", after, before)
	}
	if err := second.Delete(ctx(t), providertest.Machine(second, "c1", "a")); err != nil {
		t.Fatal(err)
	}
	// Delete returns once the node let go of its machine's lock; the
	// process itself may take a moment more to exit (and, being the first
	// provider's child in this test, to be reaped).
	got := nodePIDs(t, state)
	for deadline := time.Now().Add(5 * time.Second); len(got) != 1 && time.Now().Before(deadline); got = nodePIDs(t, state) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != 1 {
		t.Errorf("after deleting an adopted node, processes %v; want 1 left", got)
	}
	if _, err := os.Stat(filepath.Join(state, "c1", "a")); !os.IsNotExist(err) {
		t.Errorf("state folder of the deleted machine: %v; want it removed", err)
	}
}

// A restarted worker's provider watches the nodes it adopts, found by a
// Create or by List, and tells of their end at once (Changed), with a
// pidfd and, where there is none, by looking every second; a node its
// Delete stops is no news.
func TestAdoptedNodesAreWatched(t *testing.T) {
	url := startNATS(t)
	for _, tc := range []struct {
		name string
		new  func(local.Options) (*local.Provider, error)
	}{{"pidfd", local.New}, {"polled", local.NewWithoutPidfd}} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			first := newProvider(t, url, state)
			for _, name := range []string{"a", "b", "c"} {
				if _, err := first.Create(ctx(t), providertest.Machine(first, "c1", name)); err != nil {
					t.Fatal(err)
				}
			}
			second, err := tc.new(local.Options{StateDir: state, Binary: binary, NATSURL: url, StopGrace: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			changed := second.Changed()
			kill := func(name string) {
				t.Helper()
				pid, err := os.ReadFile(filepath.Join(state, "c1", name, "pid"))
				if err != nil {
					t.Fatal(err)
				}
				n, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
				if err := syscall.Kill(n, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				select {
				case <-changed:
				case <-time.After(5 * time.Second):
					t.Fatalf("Changed did not receive within 5s of killing the adopted node %s", name)
				}
			}

			if _, err := second.Create(ctx(t), providertest.Machine(second, "c1", "a")); err != nil {
				t.Fatal(err)
			}
			kill("a")
			if _, err := second.List(ctx(t)); err != nil {
				t.Fatal(err)
			}
			if err := second.Delete(ctx(t), providertest.Machine(second, "c1", "c")); err != nil {
				t.Fatal(err)
			}
			select {
			case <-changed:
				t.Errorf("Changed received after the provider's own Delete")
			case <-time.After(2 * time.Second):
			}
			kill("b")
		})
	}
}

func TestDeleteKillsANodeThatIgnoresSIGTERM(t *testing.T) {
	url := startNATS(t)
	state := t.TempDir()
	p, err := local.New(local.Options{StateDir: state, Binary: binary, NATSURL: url, StopGrace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killNodes(t, state) })
	m := providertest.Machine(p, "c1", "stubborn")
	if _, err := p.Create(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	pids := nodePIDs(t, state)
	// SIGSTOP: the node cannot act on SIGTERM, as if it hung.
	if err := syscall.Kill(pids[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := p.Delete(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("Delete took %s; want SIGKILL only after the 300ms grace", d)
	}
	if got := nodePIDs(t, state); len(got) != 0 {
		t.Errorf("node processes after Delete: %v", got)
	}
}

// A node reaches a NATS that wants a token even when the worker got the
// token as a value, not from the environment: it never appears in ps.
func TestNodeGetsTheTokenThroughItsEnvironment(t *testing.T) {
	url := natstest.StartWithToken(t, "s3cret")
	nc, err := nats.Connect(url, nats.Token("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	beats, err := nc.SubscribeSync(wire.HeartbeatSubject("c1", "m"))
	if err != nil {
		t.Fatal(err)
	}

	state := t.TempDir()
	p, err := local.New(local.Options{StateDir: state, Binary: binary, NATSURL: url, NATS: natsbus.Options{Token: "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killNodes(t, state) })
	m := providertest.Machine(p, "c1", "m")
	m.Spec = json.RawMessage(`{"heartbeatInterval": "100ms"}`)
	if _, err := p.Create(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	if _, err := beats.NextMsg(10 * time.Second); err != nil {
		t.Fatalf("no heartbeat from a node that needs a token: %v", err)
	}
	for _, pid := range nodePIDs(t, state) {
		if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline")); strings.Contains(string(b), "s3cret") {
			t.Errorf("the token is on the node's command line: %q", b)
		}
	}
}

// A machine has one node: a node started for a machine that has one exits
// and says why, and the provider adopts a node it did not start (a worker
// killed right after starting it) instead of starting a second; Delete
// stops it even though it does not lead a process group of its own.
func TestOneNodePerMachine(t *testing.T) {
	url := startNATS(t)
	state := t.TempDir()
	p := newProvider(t, url, state)
	dir := filepath.Join(state, "c1", "m-1")
	node := func() *exec.Cmd {
		cmd := exec.Command(binary, "node", "--cluster", "c1", "--machine", "m-1", "--state-dir", dir,
			"--kubernetes-version", "v1.30.2", "--nats", url)
		return cmd
	}
	first := node()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Process.Kill(); _ = first.Wait() })
	// Wait until it holds the machine (its pid file).
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(first.Process.Pid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first node wrote no pid file")
		}
		time.Sleep(10 * time.Millisecond)
	}
	out, err := node().CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another node runs this machine") {
		t.Fatalf("a second node for the machine: %v\n%s; want it to exit saying another node runs it", err, out)
	}
	inst, err := p.Create(ctx(t), providertest.Machine(p, "c1", "m-1"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "local://" + strconv.Itoa(first.Process.Pid); inst.ProviderID != want {
		t.Errorf("Create returned %s; want the running node %s adopted", inst.ProviderID, want)
	}
	if got := nodePIDs(t, state); len(got) != 1 {
		t.Errorf("node processes: %v; want one", got)
	}
	if err := p.Delete(ctx(t), providertest.Machine(p, "c1", "m-1")); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if got := nodePIDs(t, state); len(got) != 0 {
		t.Errorf("node processes after Delete: %v", got)
	}
}

// TestNodesMayHeartbeat: a worker whose nodes would connect with its own
// credentials is refused at its start when those visibly may not send
// heartbeats (a worker's credentials of gitfleet nats-creds), naming the
// flag to give; with a node signer, or with credentials that may, it starts.
func TestNodesMayHeartbeat(t *testing.T) {
	auth, err := natsbus.LoadAuth(filepath.Join(t.TempDir(), "nats-auth"))
	if err != nil {
		t.Fatal(err)
	}
	workerCreds, err := auth.WorkerCreds("w1", "local")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(auth.Dir, "w1.creds"), workerCreds, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := func(creds string, signer *natsbus.NodeSigner) local.Options {
		return local.Options{StateDir: t.TempDir(), Binary: "/bin/true", NATSURL: "nats://127.0.0.1:4222",
			NATS: natsbus.Options{CredsFile: filepath.Join(auth.Dir, creds)}, NodeSigner: signer}
	}
	if _, err := local.New(opts("w1.creds", nil)); err == nil || !strings.Contains(err.Error(), "--nats-node-signer") {
		t.Errorf("a worker's credentials without a node signer: %v; want a refusal naming --nats-node-signer", err)
	}
	if _, err := local.New(opts("w1.creds", auth.NodeSigner())); err != nil {
		t.Errorf("a worker's credentials with a node signer: %v", err)
	}
	if _, err := local.New(opts(natsbus.DaemonCredsFile, nil)); err != nil {
		t.Errorf("daemon.creds without a node signer: %v", err)
	}
	if _, err := local.New(opts("missing.creds", nil)); err == nil {
		t.Error("a credentials file that is not there gave no error")
	}
}
