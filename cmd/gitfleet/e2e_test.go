package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/reconciler/status"
)

// TestEndToEnd drives the real binary the way a user does: gitfleet init,
// gitfleet up (embedded NATS, local provider, real node processes), commits
// with the git CLI, a killed node, a broken commit, a daemon killed in the
// middle of a rollout, a deleted cluster, and gitfleet history.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds the binary and runs real processes")
	}
	e := newE2E(t)

	// Faster heartbeats and health checks than the example's, so the test
	// does not wait 30s for a dead machine.
	e.edit("classes/standard.yaml", func(s string) string {
		s = strings.ReplaceAll(s, "        memory: 2Gi\n", "        memory: 2Gi\n        heartbeatInterval: 300ms\n")
		// The workers' too: a check of 3s must see two heartbeats.
		return strings.ReplaceAll(s, "            memory: 4Gi\n", "            memory: 4Gi\n            heartbeatInterval: 300ms\n")
	})
	e.edit("clusters/prod-1.yaml", func(s string) string {
		return strings.Replace(s, "timeoutSeconds: 30", "timeoutSeconds: 3", 1)
	})
	e.commit("Ada Lovelace", "test settings: fast heartbeats")

	e.start()
	// Where no secret may go: NATS messages and command lines, from now on.
	leak := &leaks{secrets: map[string]string{}, args: map[string]bool{}}
	e.tapNATS(leak)
	e.waitConverged("initial fleet", fleetWant{"dev-1": {3, "v1.31.2"}, "prod-1": {6, "v1.31.2"}})
	e.collect(leak)
	e.checkBootstrap()
	e.checkIntruders()
	e.checkKubeconfig("dev-1")
	// The start kept what it decoded of the fleet's files for the next
	// start (sources.Options.ObjectsOnce), written in the background once
	// its first revision was read, for the daemon's user alone.
	e.waitFor("validation.objects written", 30*time.Second, func() (bool, string) {
		st, err := os.Stat(filepath.Join(e.data, "validation.objects"))
		if err != nil {
			return false, err.Error()
		}
		return st.Mode().Perm() == 0o600 && st.Size() > 0, fmt.Sprintf("mode %o, %d bytes", st.Mode().Perm(), st.Size())
	})

	// The web dashboard of gitfleet up lists both clusters, and its API too.
	_, page := httpGet("http://" + e.listen + "/")
	_, api := httpGet("http://" + e.listen + "/api/v1/clusters")
	for _, c := range []string{"dev-1", "prod-1"} {
		if !strings.Contains(page, `<a href="/clusters/`+c+`">`+c+`</a>`) || !strings.Contains(api, `"name": "`+c+`"`) {
			t.Errorf("the dashboard does not list %s:\n%s\n%s", c, page, api)
		}
	}

	// Scale up: two more workers for dev-1.
	e.edit("clusters/dev-1.yaml", func(s string) string { return strings.Replace(s, "replicas: 2", "replicas: 4", 1) })
	scaleUp := e.commit("Grace Hopper", "dev-1: four workers")
	e.waitConverged("scale up", fleetWant{"dev-1": {5, "v1.31.2"}, "prod-1": {6, "v1.31.2"}})
	e.collect(leak)

	// What an operator's dashboard reads: status commits made, and the
	// local worker's 11 creates succeeded.
	_, metrics := httpGet("http://" + e.listen + "/metrics")
	if n := metricSample(metrics, "gitfleet_status_commits_total"); n < 1 {
		t.Errorf("gitfleet_status_commits_total = %v after the fleet converged twice", n)
	}
	if n := metricSample(metrics, `gitfleet_worker_tasks_total{outcome="succeeded",provider="local"}`); n < 11 {
		t.Errorf(`gitfleet_worker_tasks_total{outcome="succeeded",provider="local"} = %v, want at least 11 (the machines made)`, n)
	}
	for sample, least := range map[string]float64{
		`gitfleet_machines{class="standard",phase="Running",provider="local"}`:                 11,
		`gitfleet_clusters{class="standard",phase="Provisioned"}`:                              2,
		`gitfleet_task_seconds_count{operation="create",provider="local",stage="done"}`:        11,
		`gitfleet_task_seconds_count{operation="create",provider="local",stage="first_event"}`: 1,
		`gitfleet_events_total{phase="Running"}`:                                               11,
		`gitfleet_heartbeats_total`:                                                            1,
		`gitfleet_leader_changes_total`:                                                        1,
		`gitfleet_stream_messages{stream="GITFLEET_EVENTS"}`:                                   1,
		`gitfleet_rollout_clusters{class="standard",state="done"}`:                             0,
	} {
		if n := metricSample(metrics, sample); n < least {
			t.Errorf("%s = %v, want at least %v", sample, n, least)
		}
	}
	if !strings.Contains(metrics, `gitfleet_consumer_pending{consumer=`) {
		t.Error("/metrics has no gitfleet_consumer_pending (queue depth)")
	}

	// A killed node is a real machine failure: the health check replaces it.
	victim := e.nodeOf("prod-1", "md-0")
	if err := syscall.Kill(victim.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.waitFor("killed machine replaced", 60*time.Second, func() (bool, string) {
		s := e.status()
		c := s.Cluster("prod-1")
		if c == nil {
			return false, "no prod-1"
		}
		for _, m := range c.Machines {
			if m.Name == victim.name {
				return false, victim.name + " still listed as " + m.Phase
			}
		}
		return e.converged(fleetWant{"dev-1": {5, "v1.31.2"}, "prod-1": {6, "v1.31.2"}})
	})
	// Git alone tells the victim's life and why it went.
	life, err := exec.Command(e.bin, "history", "--repo", e.repo, "--machine", victim.name).CombinedOutput()
	if err != nil {
		t.Fatalf("history --machine: %v\n%s", err, life)
	}
	for _, want := range []string{"machine " + victim.name + " of cluster prod-1", "Running",
		"because: remediate", "gone", "by Ada Lovelace: test settings: fast heartbeats"} {
		if !strings.Contains(string(life), want) {
			t.Errorf("history --machine %s lacks %q:\n%s", victim.name, want, life)
		}
	}

	// A broken commit is rejected; machines keep running on the last good
	// revision and fleet.yaml names the commit and the error.
	before := e.machineNames()
	e.edit("clusters/dev-1.yaml", func(s string) string { return strings.Replace(s, "replicas: 4", "replicas: four", 1) })
	bad := e.commit("Bob", "broken replicas")
	e.waitFor("rejection in fleet.yaml", 30*time.Second, func() (bool, string) {
		f := e.status().Fleet
		if f.LastRejected == nil || f.LastRejected.Commit != bad {
			return false, fmt.Sprintf("lastRejected %+v", f.LastRejected)
		}
		msg := strings.Join(f.LastRejected.Errors, "\n")
		return strings.Contains(msg, "clusters/dev-1.yaml:") && strings.Contains(msg, "replicas"), msg
	})
	if f := e.status().Fleet; f.LastApplied == nil || f.LastApplied.Commit == bad {
		t.Fatalf("lastApplied = %+v, want the last good commit", f.LastApplied)
	}
	if after := e.machineNames(); !equalStrings(before, after) {
		t.Fatalf("machines changed after a rejected commit:\nbefore %v\nafter  %v", before, after)
	}
	e.edit("clusters/dev-1.yaml", func(s string) string { return strings.Replace(s, "replicas: four", "replicas: 4", 1) })
	e.commit("Bob", "fix replicas")

	// A version bump replaces every dev-1 machine, control plane first.
	// The daemon is killed in the middle and started again.
	// Nodes of the new template take a second to start, so the rollout is
	// still going when the daemon dies.
	e.edit("classes/standard.yaml", func(s string) string {
		s = strings.Replace(s, "  version: v1.31.2", "  version: v1.32.0", 1)
		s = strings.Replace(s, "        heartbeatInterval: 300ms\n", "        heartbeatInterval: 300ms\n        startupDelay: 1s\n", 1)
		return strings.Replace(s, "            memory: 4Gi\n", "            memory: 4Gi\n            startupDelay: 1s\n", 1)
	})
	e.commit("Carol", "standard: Kubernetes v1.32.0")
	e.waitFor("rollout under way", 30*time.Second, func() (bool, string) {
		return strings.Contains(e.logText(), `to v1.32.0`), "no v1.32.0 task yet"
	})
	e.kill()
	e.start()
	// prod-1 pins v1.31.2 but takes the new template, in the second wave.
	e.waitConverged("version bump after a daemon restart", fleetWant{"dev-1": {5, "v1.32.0"}, "prod-1": {6, "v1.31.2"}})
	e.checkControlPlaneFirst("dev-1", "v1.32.0")
	e.collect(leak)

	// Deleting a cluster's file removes its machine processes, workers first.
	devNodes := e.nodes("dev-1")
	if len(devNodes) != 5 {
		t.Fatalf("dev-1 has %d node processes, want 5", len(devNodes))
	}
	e.git("rm", "-q", "clusters/dev-1.yaml")
	e.commit("Dan", "retire dev-1")
	e.waitFor("dev-1 deleted", 60*time.Second, func() (bool, string) {
		if n := len(e.nodes("dev-1")); n > 0 {
			return false, fmt.Sprintf("%d dev-1 nodes still running", n)
		}
		if e.status().Cluster("dev-1") != nil {
			return false, "dev-1 still on the status branch"
		}
		return true, ""
	})
	e.checkWorkersDeletedFirst("dev-1")

	// No duplicate and no orphan: the processes running are exactly the
	// machines the status branch lists.
	e.waitFor("processes match status", 20*time.Second, func() (bool, string) {
		want := e.machineNames()
		got := e.nodeNames()
		return equalStrings(want, got), fmt.Sprintf("status %v, processes %v", want, got)
	})

	// The audit trail: the scale-up commit, its author and its transitions.
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"history", "dev-1", "--repo", e.repo}, &cmdEnv{stdout: &out, stderr: &errOut}); code != 0 {
		t.Fatalf("history exit %d: %s", code, errOut.String())
	}
	h := out.String()
	for _, want := range []string{"commit " + scaleUp[:7], "Grace Hopper", "replicas: 2 → 4", "status "} {
		if !strings.Contains(h, want) {
			t.Errorf("history dev-1 lacks %q:\n%s", want, h)
		}
	}
	// A machine that ran before the next status commit reads "created:
	// Running"; one a status commit caught starting, "created: Pending"
	// then "Pending → Running": which depends on how commits fell.
	if !regexp.MustCompile(`created: (Pending|Provisioning|Running)`).MatchString(h) || !strings.Contains(h, "Running") {
		t.Errorf("history dev-1 shows no machine created:\n%s", h)
	}
	// The dashboard's history page says the same.
	_, hpage := httpGet("http://" + e.listen + "/history?cluster=dev-1")
	for _, want := range []string{`<li id="commit-` + scaleUp + `"><h2><a href="#commit-` + scaleUp, "<code>" + scaleUp[:7] + "</code></a> dev-1: four workers", "Grace Hopper", "replicas: 2 → 4"} {
		if !strings.Contains(hpage, want) {
			t.Errorf("the dashboard's history of dev-1 lacks %q:\n%s", want, hpage)
		}
	}
	prodMachine := e.status().Cluster("prod-1").Machines[0].Name
	if _, life := httpGet("http://" + e.listen + "/api/v1/history?machine=" + prodMachine); !strings.Contains(life, `"phase": "Running"`) {
		t.Errorf("/api/v1/history?machine=%s: %s", prodMachine, life)
	}

	// Every log line of the run, the daemon's and the machines', is JSON
	// a log store can index: no repeated key, RFC 3339 milliseconds.
	if n := checkLogFile(t, e.logFile); n < 100 {
		t.Errorf("%s: only %d JSON lines", e.logFile, n)
	}
	nodeLogs, _ := filepath.Glob(filepath.Join(e.data, "local", "*", "*", "node.log"))
	if len(nodeLogs) == 0 {
		t.Error("no node.log of any machine")
	}
	for _, f := range nodeLogs {
		checkLogFile(t, f)
	}

	// The offline dashboard reads the same from the clone alone.
	offline := "127.0.0.1:" + freeTCPPort(t)
	dctx, stopDashboard := context.WithCancel(t.Context())
	dashDone := make(chan int, 1)
	go func() {
		dashDone <- run(dctx, []string{"dashboard", "--repo", e.repo, "--listen", offline}, &cmdEnv{stdout: io.Discard, stderr: io.Discard})
	}()
	e.waitFor("the offline dashboard", 10*time.Second, func() (bool, string) {
		code, body := httpGet("http://" + offline + "/clusters/prod-1")
		return code == 200 && strings.Contains(body, "<h1>Cluster prod-1</h1>"), fmt.Sprint(code)
	})
	stopDashboard()
	<-dashDone

	// No bootstrap token, CA key or certificate key of the run anywhere it
	// must not be: Git (every object), logs, NATS messages, command lines.
	e.collect(leak)
	e.checkLeaks(leak)
}

type e2e struct {
	t       *testing.T
	bin     string
	dir     string
	repo    string
	data    string
	logFile string
	listen  string   // the daemon's HTTP address
	upArgs  []string // more flags for gitfleet up
	cmd     *exec.Cmd
}

type node struct {
	cluster, name string
	pid           int
}

func newE2E(t *testing.T) *e2e {
	t.Helper()
	dir := t.TempDir()
	e := &e2e{t: t, dir: dir, bin: filepath.Join(dir, "gitfleet"), repo: filepath.Join(dir, "fleet"),
		data: filepath.Join(dir, "data"), logFile: filepath.Join(dir, "up.log"), listen: "127.0.0.1:" + freeTCPPort(t)}
	build := exec.Command("go", "build", "-o", e.bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if out, err := exec.Command(e.bin, "init", e.repo).CombinedOutput(); err != nil {
		t.Fatalf("gitfleet init: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		e.kill()
		for _, n := range e.nodes("") {
			_ = syscall.Kill(n.pid, syscall.SIGKILL)
		}
		if t.Failed() {
			b, _ := os.ReadFile(e.logFile)
			lines := strings.Split(string(b), "\n")
			t.Logf("last lines of gitfleet up:\n%s", strings.Join(lines[max(0, len(lines)-60):], "\n"))
			for _, c := range e.status().Clusters {
				b, _ := status.EncodeCluster(c)
				t.Logf("status of %s:\n%s", c.Name, b)
			}
		}
	})
	return e
}

func (e *e2e) start() {
	e.t.Helper()
	f, err := os.OpenFile(e.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	e.cmd = exec.Command(e.bin, append([]string{"up", "--repo", e.repo, "--data-dir", e.data, "--listen", e.listen,
		"--status-interval", "200ms", "--interval", "5s", "--json", "--log-level", "debug"}, e.upArgs...)...)
	e.cmd.Stdout, e.cmd.Stderr = f, f
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	_ = f.Close()
}

// kill stops the daemon the hard way (SIGKILL): a crash, not a shutdown.
func (e *e2e) kill() {
	if e.cmd == nil || e.cmd.Process == nil {
		return
	}
	_ = e.cmd.Process.Kill()
	_ = e.cmd.Wait()
	e.cmd = nil
}

func (e *e2e) logText() string {
	b, _ := os.ReadFile(e.logFile)
	return string(b)
}

func (e *e2e) git(args ...string) string {
	e.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = e.repo
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (e *e2e) edit(path string, f func(string) string) {
	e.t.Helper()
	p := filepath.Join(e.repo, path)
	b, err := os.ReadFile(p)
	if err != nil {
		e.t.Fatal(err)
	}
	next := f(string(b))
	if next == string(b) {
		e.t.Fatalf("edit of %s changed nothing", path)
	}
	if err := os.WriteFile(p, []byte(next), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// commit commits everything as author and returns the commit hash.
func (e *e2e) commit(author, msg string) string {
	e.t.Helper()
	email := strings.ToLower(strings.Fields(author)[0]) + "@example.com"
	e.git("-c", "user.name="+author, "-c", "user.email="+email, "commit", "-qam", msg)
	return e.git("rev-parse", "HEAD")
}

func (e *e2e) status() *status.Snapshot {
	e.t.Helper()
	repo, err := git.PlainOpen(e.repo)
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := status.Read(repo, "gitfleet/status")
	if err != nil {
		return &status.Snapshot{}
	}
	return s
}

func (e *e2e) waitFor(what string, timeout time.Duration, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		time.Sleep(200 * time.Millisecond)
	}
	e.t.Fatalf("%s: not reached within %s: %s", what, timeout, last)
}

// fleetWant is, per cluster, how many machines it must have at which version.
type fleetWant map[string]struct {
	machines int
	version  string
}

// converged: the status branch reflects the repository's HEAD, and each
// cluster has exactly its machines, all Running at its version, every pool
// ready and up to date, and a node process per local machine.
func (e *e2e) converged(want fleetWant) (bool, string) {
	s := e.status()
	head := e.git("rev-parse", "HEAD")
	if s.Fleet.LastApplied == nil || s.Fleet.LastApplied.Commit != head {
		return false, fmt.Sprintf("status has not applied HEAD %s yet", head[:7])
	}
	for name, w := range want {
		n, version := w.machines, w.version
		c := s.Cluster(name)
		switch {
		case c == nil:
			return false, name + " not on the status branch"
		case len(c.Machines) != n:
			return false, fmt.Sprintf("%s has %d machines, want %d", name, len(c.Machines), n)
		case c.ControlPlane.Ready != c.ControlPlane.Desired:
			return false, fmt.Sprintf("%s control plane %d/%d ready", name, c.ControlPlane.Ready, c.ControlPlane.Desired)
		}
		local := 0
		for _, m := range c.Machines {
			if m.Phase != "Running" || m.Version != version {
				return false, fmt.Sprintf("%s/%s is %s %s", name, m.Name, m.Phase, m.Version)
			}
			if m.Provider == "local" {
				local++
			}
		}
		for _, d := range c.Deployments {
			if d.Ready != d.Desired || d.Updated != d.Desired {
				return false, fmt.Sprintf("%s/%s %d/%d ready, %d updated", name, d.Name, d.Ready, d.Desired, d.Updated)
			}
		}
		if got := len(e.nodes(name)); got != local {
			return false, fmt.Sprintf("%s has %d node processes, want %d", name, got, local)
		}
	}
	return true, ""
}

func (e *e2e) waitConverged(what string, want fleetWant) {
	e.t.Helper()
	e.waitFor(what, 90*time.Second, func() (bool, string) { return e.converged(want) })
}

// nodes lists the live node processes of cluster ("" for all), from the
// local provider's state folders and /proc.
func (e *e2e) nodes(cluster string) []node {
	var out []node
	pattern := filepath.Join(e.data, "local", "*", "*", "pid")
	files, _ := filepath.Glob(pattern)
	for _, f := range files {
		dir := filepath.Dir(f)
		c, name := filepath.Base(filepath.Dir(dir)), filepath.Base(dir)
		if cluster != "" && c != cluster {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		out = append(out, node{cluster: c, name: name, pid: pid})
	}
	return out
}

// checkBootstrap reads every running machine's bootstrap data where the
// local provider seeds it: a file only its user reads, kubeadm
// configuration for the machine it is given to, one init machine per
// cluster, and every joiner pinned to its own cluster's CA.
func (e *e2e) checkBootstrap() {
	e.t.Helper()
	inits := map[string]int{}
	hashes := map[string]map[string]bool{}
	for _, n := range e.nodes("") {
		path := filepath.Join(e.data, "local", n.cluster, n.name, "user-data")
		st, err := os.Stat(path)
		if err != nil {
			e.t.Errorf("machine %s/%s has no bootstrap data: %v", n.cluster, n.name, err)
			continue
		}
		if st.Mode().Perm() != 0o600 {
			e.t.Errorf("%s: mode %o, want 600", path, st.Mode().Perm())
		}
		b, _ := os.ReadFile(path)
		d, err := bootstrap.Parse(b)
		if err != nil {
			e.t.Errorf("%s: %v", path, err)
			continue
		}
		if d.Node != n.name || d.ControlPlane != strings.HasPrefix(n.name, n.cluster+"-control-plane-") {
			e.t.Errorf("%s is for node %s (control plane %v)", path, d.Node, d.ControlPlane)
		}
		if d.Init {
			inits[n.cluster]++
			if d.Cluster != n.cluster || d.Files[bootstrap.PKIDir+"/ca.key"] == "" {
				e.t.Errorf("%s: init data for cluster %q without the CA key", path, d.Cluster)
			}
			continue
		}
		if hashes[n.cluster] == nil {
			hashes[n.cluster] = map[string]bool{}
		}
		for _, h := range d.CACertHashes {
			hashes[n.cluster][h] = true
		}
	}
	// Every machine joined, and its cluster's control plane lists it.
	listed := map[string]map[string]bool{}
	for _, n := range e.nodes("") {
		port, _ := os.ReadFile(filepath.Join(e.data, "local", n.cluster, n.name, "port"))
		_, body := httpGet("http://127.0.0.1:" + strings.TrimSpace(string(port)) + "/healthz")
		var h struct {
			Joined bool     `json:"joined"`
			Nodes  []string `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(body), &h); err != nil || !h.Joined {
			e.t.Errorf("machine %s/%s has not joined its cluster: %s", n.cluster, n.name, body)
		}
		if listed[n.cluster] == nil {
			listed[n.cluster] = map[string]bool{}
		}
		for _, m := range h.Nodes {
			listed[n.cluster][m] = true
		}
	}
	for _, n := range e.nodes("") {
		if !listed[n.cluster][n.name] {
			e.t.Errorf("no control plane of %s lists machine %s as joined (they list %v)", n.cluster, n.name, listed[n.cluster])
		}
	}
	// Git says so too: every machine's status has when it joined.
	e.waitFor("every machine's status shows when it joined", 20*time.Second, func() (bool, string) {
		for _, c := range e.status().Clusters {
			for _, m := range c.Machines {
				if m.Joined.IsZero() || m.Joined.Before(m.Created) {
					return false, fmt.Sprintf("%s: joined %v, created %v", m.Name, m.Joined, m.Created)
				}
			}
		}
		return true, ""
	})
	for _, c := range []string{"dev-1", "prod-1"} {
		if inits[c] != 1 || len(hashes[c]) != 1 {
			e.t.Errorf("cluster %s: %d init machines and %d CA hashes among its joiners, want 1 and 1", c, inits[c], len(hashes[c]))
		}
	}
	for h := range hashes["dev-1"] {
		if hashes["prod-1"][h] {
			e.t.Error("dev-1 and prod-1 pin the same CA")
		}
	}
}

// checkIntruders starts machines by hand with join data that is not
// theirs: each is refused, says why, and exits; no control plane lists it.
func (e *e2e) checkIntruders() {
	e.t.Helper()
	userData := func(cluster string) (string, *bootstrap.Data) {
		n := e.nodeOf(cluster, "md-0")
		b, err := os.ReadFile(filepath.Join(e.data, "local", n.cluster, n.name, "user-data"))
		if err != nil {
			e.t.Fatal(err)
		}
		d, err := bootstrap.Parse(b)
		if err != nil {
			e.t.Fatal(err)
		}
		return string(b), d
	}
	devData, dev := userData("dev-1")
	prodData, prod := userData("prod-1")
	_, secret, _ := pki.ParseToken(dev.Token)
	for _, c := range []struct {
		what, data, want string
	}{
		// prod-1's join data, sent to dev-1's control plane: the machine
		// finds a CA that is not the one it pins.
		{"prod-1's data at dev-1's endpoint", strings.ReplaceAll(prodData, prod.Endpoint, dev.Endpoint), "it is another cluster's"},
		// dev-1's join data for a machine dev-1 never made, with a token
		// that is not the one issued: dev-1's control plane refuses it.
		{"a machine dev-1 did not make", strings.ReplaceAll(strings.ReplaceAll(devData, dev.Node, "intruder"), secret, strings.Repeat("x", 16)), "no machine intruder in cluster dev-1"},
	} {
		dir := e.t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "user-data"), []byte(c.data), 0o600); err != nil {
			e.t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, e.bin, "node", "--cluster", "dev-1", "--machine", "intruder", "--state-dir", dir,
			"--nats", "nats://127.0.0.1:1", "--log-format", "json").CombinedOutput()
		cancel()
		why, _ := os.ReadFile(filepath.Join(dir, "join-failed"))
		if err == nil || !strings.Contains(string(why), c.want) {
			e.t.Errorf("%s: exit %v, join-failed %q, want it refused: %s\n%s", c.what, err, why, c.want, out)
		}
	}
}

// checkKubeconfig writes the cluster's admin kubeconfig over a longer
// file others could read, and uses it: the file is left for its owner
// alone and holds the kubeconfig only; the control-plane endpoint's TLS
// certificate verifies against the CA it holds, for the endpoint's name,
// and its client certificate is the CA's.
func (e *e2e) checkKubeconfig(cluster string) {
	e.t.Helper()
	path := filepath.Join(e.t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, bytes.Repeat([]byte("# an older config\n"), 2000), 0o644); err != nil {
		e.t.Fatal(err)
	}
	var errOut bytes.Buffer
	if code := run(e.t.Context(), []string{"kubeconfig", cluster, "--data-dir", e.data, "-o", path}, &cmdEnv{stdout: io.Discard, stderr: &errOut}); code != 0 {
		e.t.Fatalf("kubeconfig exit %d: %s", code, errOut.String())
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		e.t.Fatalf("kubeconfig file: %v (want mode 600)", err)
	}
	b, _ := os.ReadFile(path)
	if bytes.Contains(b, []byte("an older config")) {
		e.t.Fatal("kubeconfig -o left the older file's content after its own")
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string `yaml:"server"`
				CA     string `yaml:"certificate-authority-data"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			User struct {
				Cert string `yaml:"client-certificate-data"`
				Key  string `yaml:"client-key-data"`
			} `yaml:"user"`
		} `yaml:"users"`
	}
	if err := yaml.Unmarshal(b, &kc); err != nil || len(kc.Clusters) != 1 || len(kc.Users) != 1 {
		e.t.Fatalf("kubeconfig: %v\n%s", err, b)
	}
	ca, _ := base64.StdEncoding.DecodeString(kc.Clusters[0].Cluster.CA)
	cert, _ := base64.StdEncoding.DecodeString(kc.Users[0].User.Cert)
	key, _ := base64.StdEncoding.DecodeString(kc.Users[0].User.Key)
	endpoint := strings.TrimPrefix(kc.Clusters[0].Cluster.Server, "https://")
	host, _, _ := net.SplitHostPort(endpoint)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		e.t.Fatal("the kubeconfig's CA is not PEM")
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		e.t.Fatalf("the kubeconfig's client certificate: %v", err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		e.t.Errorf("the client certificate is not the cluster CA's: %v", err)
	}
	conn, err := tls.Dial("tcp", endpoint, &tls.Config{RootCAs: pool, ServerName: host, Certificates: []tls.Certificate{pair}})
	if err != nil {
		e.t.Fatalf("the control-plane endpoint %s with the kubeconfig's CA: %v", endpoint, err)
	}
	conn.Close()
}

func (e *e2e) nodeOf(cluster, deployment string) node {
	e.t.Helper()
	for _, n := range e.nodes(cluster) {
		if strings.HasPrefix(n.name, cluster+"-"+deployment+"-") {
			return n
		}
	}
	e.t.Fatalf("no node process of %s/%s", cluster, deployment)
	return node{}
}

func (e *e2e) nodeNames() []string {
	var out []string
	for _, n := range e.nodes("") {
		out = append(out, n.cluster+"/"+n.name)
	}
	return sortStrings(out)
}

func (e *e2e) machineNames() []string {
	var out []string
	for _, c := range e.status().Clusters {
		for _, m := range c.Machines {
			out = append(out, c.Name+"/"+m.Name)
		}
	}
	return sortStrings(out)
}

// tasks returns the tasks the daemon published for cluster, in order, from
// its JSON log.
func (e *e2e) tasks(cluster string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(e.logText()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line["message"] != "publishing task" || line["cluster"] != cluster {
			continue
		}
		out = append(out, line)
	}
	return out
}

// checkControlPlaneFirst: during the upgrade to version, no worker was
// created at that version before the control plane had been.
func (e *e2e) checkControlPlaneFirst(cluster, version string) {
	e.t.Helper()
	cpDone := false
	for _, task := range e.tasks(cluster) {
		name, _ := task["machine"].(string)
		if task["op"] != "create" || !strings.Contains(fmt.Sprint(task["reason"]), version) {
			continue
		}
		if strings.HasPrefix(name, cluster+"-control-plane-") {
			cpDone = true
		} else if !cpDone {
			e.t.Errorf("worker %s created at %s before any control plane machine", name, version)
		}
	}
	if !cpDone {
		e.t.Errorf("no control plane machine was created at %s", version)
	}
}

// checkWorkersDeletedFirst: when the cluster was removed, every worker delete
// was published before the control plane's.
func (e *e2e) checkWorkersDeletedFirst(cluster string) {
	e.t.Helper()
	sawCP := false
	n := 0
	for _, task := range e.tasks(cluster) {
		if task["op"] != "delete" || !strings.Contains(fmt.Sprint(task["reason"]), "removed") {
			continue
		}
		n++
		name, _ := task["machine"].(string)
		if strings.HasPrefix(name, cluster+"-control-plane-") {
			sawCP = true
		} else if sawCP {
			e.t.Errorf("worker %s deleted after the control plane", name)
		}
	}
	if n == 0 || !sawCP {
		e.t.Errorf("deleting %s published %d deletes, control plane among them: %v", cluster, n, sawCP)
	}
}

func sortStrings(s []string) []string {
	slices.Sort(s)
	return s
}

func equalStrings(a, b []string) bool { return slices.Equal(a, b) }

// metricSample is the value of a sample (name with its labels, as the
// exposition format writes it) in a /metrics page; -1 when absent.
func metricSample(page, sample string) float64 {
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
