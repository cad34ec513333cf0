package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/reconciler/status"
)

// golden compares got with testdata/<name>, rewritten by -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updatePlan {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, d)
	}
}

var (
	statusEpoch = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	describeNow = "2026-11-20T12:30:00Z"
)

// statusWriter opens dir's repository as the daemon would and returns a
// Writer whose commits are dated from statusEpoch, one minute apart.
func statusWriter(t *testing.T, dir string) *status.Writer {
	t.Helper()
	repo, err := openGit(dir)
	if err != nil {
		t.Fatal(err)
	}
	tick := statusEpoch
	w, err := status.NewWriter(t.Context(), status.Options{Repo: repo, Interval: time.Hour, Logger: zerolog.Nop(),
		Now: func() time.Time { tick = tick.Add(time.Minute); return tick }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func flushStatus(t *testing.T, w *status.Writer) {
	t.Helper()
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// machine returns a machine of cluster c; pool "" is the control plane.
func machine(c, pool, suffix, phase, version string, created time.Time) status.MachineStatus {
	m := status.MachineStatus{Role: "worker", Deployment: pool, Phase: phase, Version: version, Provider: "local",
		TemplateHash: "9e1d", Created: created}
	if pool == "" {
		m.Role, pool = "control-plane", "control-plane"
	}
	m.Name = c + "-" + pool + "-" + suffix
	m.ProviderID = "local://" + m.Name
	if phase == "Running" {
		m.Addresses = []string{"127.0.0.1"}
	}
	return m
}

// dev1 is dev-1 with n workers, the first ready ones Running and the
// rest Provisioning.
func dev1(n, ready int, created time.Time) status.ClusterStatus {
	c := status.ClusterStatus{Name: "dev-1", Class: "standard", Version: "v1.31.2", Phase: status.ClusterProvisioned,
		ControlPlane: status.Replicas{Version: "v1.31.2", Desired: 1, Replicas: 1, Ready: 1, Updated: 1},
		Deployments: []status.DeploymentStatus{{Name: "md-0",
			Replicas: status.Replicas{Version: "v1.31.2", Desired: n, Replicas: n, Ready: ready, Updated: n, Unavailable: n - ready}}},
		Conditions: []status.Condition{{Type: status.ConditionReady, Status: status.ConditionTrue}},
		Machines:   []status.MachineStatus{machine("dev-1", "", "x7k2p", "Running", "v1.31.2", statusEpoch)},
	}
	for i := range n {
		phase, at := "Running", statusEpoch
		if i >= 2 {
			at = created
		}
		if i >= ready {
			phase = "Provisioning"
		}
		c.Machines = append(c.Machines, machine("dev-1", "md-0", []string{"q4m8w", "r2d9z", "b7c3v", "n5t1k"}[i], phase, "v1.31.2", at))
	}
	if ready < n {
		c.Phase = status.ClusterProvisioning
		c.Conditions = []status.Condition{{Type: status.ConditionReady, Status: status.ConditionFalse, Reason: "WaitingForWorkers", Message: "md-0: " + itoa(ready) + " of " + itoa(n) + " ready"}}
	}
	return c
}

func itoa(n int) string { return strconv.Itoa(n) }

func prod1() status.ClusterStatus {
	c := status.ClusterStatus{Name: "prod-1", Class: "standard", Version: "v1.31.2", Phase: status.ClusterProvisioned,
		ControlPlane: status.Replicas{Version: "v1.31.2", Desired: 3, Replicas: 3, Ready: 3, Updated: 3},
		Deployments: []status.DeploymentStatus{{Name: "md-0",
			Replicas: status.Replicas{Version: "v1.31.2", Desired: 3, Replicas: 3, Ready: 2, Updated: 3, Unavailable: 1}}},
		Conditions: []status.Condition{{Type: status.ConditionReady, Status: status.ConditionTrue},
			{Type: status.ConditionMachinesHealthy, Status: status.ConditionFalse, Reason: "UnhealthyMachines", Message: "1 of 3 workers missed heartbeats"}},
	}
	for _, s := range []string{"a1", "b2", "c3"} {
		c.Machines = append(c.Machines, machine("prod-1", "", s, "Running", "v1.31.2", statusEpoch))
	}
	for _, s := range []string{"d4", "e5", "f6"} {
		c.Machines = append(c.Machines, machine("prod-1", "md-0", s, "Running", "v1.31.2", statusEpoch.Add(-72*time.Hour)))
	}
	c.Machines[5].Unhealthy, c.Machines[5].Message = true, "no heartbeat for 45s"
	return c
}

func TestDescribeWithoutStatusBranch(t *testing.T) {
	dir := fleetRepo(t)
	code, _, stderr := runCmd(t, "describe", "--repo", dir)
	if code != 1 || !strings.Contains(stderr, "no status yet: is the daemon running against this repo?") {
		t.Errorf("exit %d, stderr %q; want 1 and the hint that the daemon has not written status", code, stderr)
	}
}

func TestDescribeTreeFromStatusBranch(t *testing.T) {
	t.Setenv("GITFLEET_DESCRIBE_NOW", describeNow)
	dir := fleetRepo(t)
	head := strings.TrimSpace(gitCLI(t, dir, "rev-parse", "HEAD"))
	w := statusWriter(t, dir)
	o := status.Origin{SourceCommit: head, PlanID: "p1"}
	w.SetCluster(dev1(4, 2, statusEpoch.Add(2*time.Hour+25*time.Minute)), o)
	w.SetCluster(prod1(), o)
	w.SetFleet(status.FleetStatus{
		LastApplied:  &status.SourceCommit{Commit: head, Subject: "Initial fleet"},
		LastRejected: &status.Rejection{SourceCommit: status.SourceCommit{Commit: strings.Repeat("b", 40), Subject: "Try 1.30"}, Errors: []string{"clusters/dev-1.yaml:14:5: spec.topology.version: cannot go down from v1.31.2 to v1.30.6"}},
	}, o)
	flushStatus(t, w)

	code, stdout, stderr := runCmd(t, "describe", "dev-1", "--repo", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	golden(t, "describe/dev-1.txt", regexp.MustCompile(`Status: [0-9a-f]{7} `).ReplaceAllString(stdout, "Status: STATUS "))
	if !regexp.MustCompile(`(?m)^    ├─Machine/dev-1-md-0-b7c3v +Provisioning +v1.31.2 +5m$`).MatchString(stdout) {
		t.Errorf("describe dev-1 does not show the new worker as Provisioning, 5 minutes old:\n%s", stdout)
	}

	for _, want := range []string{"written 2026-11-20 10:07:00 UTC (2h ago)\nWarning: the status is older than 1h0m0s",
		"WaitingForWorkers: md-0: 2 of 4 ready (2h)", "└─Workers\n", "2 Machines...", "See dev-1-md-0-q4m8w, dev-1-md-0-r2d9z"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("describe dev-1 lacks %q", want)
		}
	}
	t.Setenv("GITFLEET_DESCRIBE_NOW", "2026-11-20T10:20:00Z")
	if _, fresh, _ := runCmd(t, "describe", "dev-1", "--repo", dir); strings.Contains(fresh, "Warning") || !strings.Contains(fresh, "(13m ago)") {
		t.Errorf("a status 13 minutes old is not stale:\n%s", fresh)
	}
	t.Setenv("GITFLEET_DESCRIBE_NOW", describeNow)

	_, stdout, _ = runCmd(t, "describe", "--repo", dir, "--show-conditions", "prod-1", "--grouping=false")
	stdout = regexp.MustCompile(`Status: [0-9a-f]{7} `).ReplaceAllString(stdout, "Status: STATUS ")
	golden(t, "describe/fleet.txt", strings.ReplaceAll(stdout, head[:7], "HEAD"))
	if !strings.Contains(stdout, "Conditions of prod-1:\nTYPE") || strings.Contains(stdout, "Conditions of dev-1") || !strings.Contains(stdout, "Running (unhealthy)") {
		t.Errorf("--show-conditions prod-1 --grouping=false:\n%s", stdout)
	}

	_, js, _ := runCmd(t, "describe", "prod-1", "--repo", dir, "-o", "json")
	var got status.ClusterStatus
	if err := json.Unmarshal([]byte(js), &got); err != nil || got.Name != "prod-1" || len(got.Machines) != 6 || !got.Machines[5].Unhealthy {
		t.Errorf("json (%v):\n%s", err, js)
	}
	_, y, _ := runCmd(t, "describe", "--repo", dir, "-o", "yaml")
	if !strings.Contains(y, "  clustersByPhase:\n    Provisioned: 1\n    Provisioning: 1\n") {
		t.Errorf("yaml lacks the fleet counts:\n%s", y)
	}

	code, _, stderr = runCmd(t, "describe", "nope", "--repo", dir)
	if code != 1 || !strings.Contains(stderr, `cluster "nope" has no status on gitfleet/status (clusters there: dev-1, prod-1); if it was removed from the fleet, its history says when, why and by whom: gitfleet history --cluster nope`) {
		t.Errorf("unknown cluster: exit %d, %q", code, stderr)
	}
}

// describe shows a cluster's place in its class's rollout and a pool's
// create backoff (why, and when it tries again).
func TestDescribeRolloutAndBackoff(t *testing.T) {
	t.Setenv("GITFLEET_DESCRIBE_NOW", describeNow)
	dir := fleetRepo(t)
	w := statusWriter(t, dir)
	c := dev1(2, 2, statusEpoch)
	c.Rollout = &status.Rollout{ClassRevision: "9ce7da3c89", Wave: "prod", State: "Waiting", PendingRevision: "e898e5a725"}
	c.Deployments[0].Backoff = &status.Backoff{Failures: 3, LastFailure: "machine dev-1-md-0-zz9zz failed: out of capacity",
		NextRetry: statusEpoch.Add(2*time.Hour + 30*time.Minute + 40*time.Second)}
	w.SetCluster(c, status.Origin{SourceCommit: strings.Repeat("a", 40)})
	flushStatus(t, w)
	_, stdout, stderr := runCmd(t, "describe", "dev-1", "--repo", dir)
	for _, want := range []string{
		"rollout: class revision e898e5a725 waits for wave prod (runs 9ce7da3c89)",
		"backoff: 3 creates failed, next try in 40s; last: machine dev-1-md-0-zz9zz failed: out of capacity",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("describe lacks %q:\n%s%s", want, stdout, stderr)
		}
	}
}

// A cluster its class's halted rollout holds is not waiting for a wave:
// describe says the halt holds it, on which revision, and what releases
// it, in the RolloutHalted condition's words, once. A cluster added
// during the halt (no machine, admitted to no revision) reads the same.
// Before, it read "class revision e898e5a725 waits for wave prod", as if
// the rollout would come to it by itself.
func TestDescribeHeldByHaltedRollout(t *testing.T) {
	t.Setenv("GITFLEET_DESCRIBE_NOW", describeNow)
	dir := fleetRepo(t)
	w := statusWriter(t, dir)
	halt := "rollout of class standard halted at revision e898e5a725: 1 of maxFailures 1 clusters failed (canary-1); change the class again to release it (a fix or a revert), or raise spec.rollout.maxFailures in classes/standard.yaml:1"
	since := statusEpoch.Add(2*time.Hour + 13*time.Minute)
	c := prod1()
	c.Phase = "Waiting"
	c.Conditions = append(c.Conditions, status.Condition{Type: status.ConditionRolloutHalted, Status: status.ConditionTrue,
		Reason: status.ConditionRolloutHalted, Message: halt, LastTransitionTime: since})
	c.Rollout = &status.Rollout{ClassRevision: "9ce7da3c89", Wave: "prod", State: "Waiting", PendingRevision: "e898e5a725", Reason: halt}
	w.SetCluster(c, status.Origin{SourceCommit: strings.Repeat("a", 40)})
	added := status.ClusterStatus{Name: "prod-2", Class: "standard", Version: "v1.32.0", Phase: "Waiting",
		ControlPlane: status.Replicas{Version: "v1.32.0", Desired: 1, Unavailable: 1},
		Conditions: []status.Condition{
			{Type: status.ConditionReady, Status: status.ConditionFalse, Reason: status.ConditionRolloutHalted, Message: "new cluster, no machine made: " + halt, LastTransitionTime: since},
			{Type: status.ConditionRolloutHalted, Status: status.ConditionTrue, Reason: status.ConditionRolloutHalted, Message: "new cluster, no machine made: " + halt, LastTransitionTime: since},
		},
		Rollout: &status.Rollout{State: "Waiting", PendingRevision: "e898e5a725", Reason: halt}}
	w.SetCluster(added, status.Origin{SourceCommit: strings.Repeat("a", 40)})
	flushStatus(t, w)
	for name, want := range map[string]string{
		"prod-1": "rollout: held by its class's halted rollout (runs class revision 9ce7da3c89): " + halt + " (17m)",
		"prod-2": "rollout: held by its class's halted rollout (admitted to no revision): new cluster, no machine made: " + halt + " (17m)",
	} {
		_, stdout, stderr := runCmd(t, "describe", name, "--repo", dir)
		line := ""
		for _, l := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(l, "Cluster/"+name) {
				line = l
			}
		}
		if !strings.Contains(line, want) {
			t.Errorf("%s: describe lacks %q:\n%s%s", name, want, stdout, stderr)
		}
		if strings.Contains(line, "waits for wave") || strings.Count(line, "change the class again to release it") != 1 {
			t.Errorf("%s: describe says the cluster waits for a wave, or says the halt twice:\n%s", name, line)
		}
	}
}

// A halted rollout reads as such: Ready False with the halt as its reason
// and since when, the failed machine flagged, remediation blocked, in text
// (golden, with --show-conditions) and JSON (golden).
func TestDescribeHaltedRollout(t *testing.T) {
	t.Setenv("GITFLEET_DESCRIBE_NOW", describeNow)
	dir := fleetRepo(t)
	w := statusWriter(t, dir)
	c := dev1(2, 1, statusEpoch)
	c.Version = "v1.32.0"
	halted := statusEpoch.Add(2*time.Hour + 13*time.Minute)
	c.Conditions = []status.Condition{
		{Type: status.ConditionReady, Status: status.ConditionFalse, Reason: "RolloutHalted", Message: "rollout of class standard 9ce7da3c89 halted: 1 of 1 clusters failed in wave dev (maxFailures 0)", LastTransitionTime: halted},
		{Type: "RemediationBlocked", Status: status.ConditionTrue, Reason: "RemediationBlocked", Message: "1 of 2 workers unhealthy, more than triggerIf.unhealthyLessThanOrEqualTo 40%", LastTransitionTime: halted},
		{Type: "RolloutHalted", Status: status.ConditionTrue, Reason: "RolloutHalted", Message: "rollout of class standard 9ce7da3c89 halted: 1 of 1 clusters failed in wave dev (maxFailures 0)", LastTransitionTime: halted},
	}
	c.Rollout = &status.Rollout{ClassRevision: "9ce7da3c89", Wave: "dev", State: "Failed", Reason: "machine dev-1-md-0-r2d9z failed: image not found"}
	c.Machines[2].Phase, c.Machines[2].Reason, c.Machines[2].Message = "Failed", "CreateFailed", "image not found"
	w.SetCluster(c, status.Origin{SourceCommit: strings.Repeat("a", 40)})
	flushStatus(t, w)
	_, stdout, stderr := runCmd(t, "describe", "dev-1", "--repo", dir, "--show-conditions", "all")
	golden(t, "describe/halted.txt", regexp.MustCompile(`Status: [0-9a-f]{7} `).ReplaceAllString(stdout, "Status: STATUS "))
	for _, want := range []string{
		"RolloutHalted: rollout of class standard 9ce7da3c89 halted: 1 of 1 clusters failed in wave dev (maxFailures 0) (17m)",
		"RemediationBlocked: 1 of 2 workers unhealthy, more than triggerIf.unhealthyLessThanOrEqualTo 40% (17m)",
		"Failed (!)", "CreateFailed: image not found",
		"rollout: Failed on class revision 9ce7da3c89 (machine dev-1-md-0-r2d9z failed: image not found)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("describe lacks %q:\n%s%s", want, stdout, stderr)
		}
	}
	_, js, _ := runCmd(t, "describe", "dev-1", "--repo", dir, "-o", "json")
	golden(t, "describe/halted.json", js)
}

// TestDescribeShowsFleetConditions: describe CLUSTER shows, under their own
// heading, the conditions of fleet.yaml that concern the cluster — a
// bootstrap error that names it (its CA lost), a provider its machines use
// that no worker answers for — and not those about another cluster (dev-10
// is not dev-1) or another provider. These conditions record nothing of
// what they concern, as a daemon before they did wrote them: they are
// matched by their messages.
func TestDescribeShowsFleetConditions(t *testing.T) {
	t.Setenv("GITFLEET_DESCRIBE_NOW", describeNow)
	dir := fleetRepo(t)
	head := strings.TrimSpace(gitCLI(t, dir, "rev-parse", "HEAD"))
	w := statusWriter(t, dir)
	o := status.Origin{SourceCommit: head, PlanID: "p1"}
	w.SetCluster(dev1(2, 2, statusEpoch), o)
	w.SetCluster(prod1(), o)
	since := statusEpoch.Add(2 * time.Hour)
	w.SetFleet(status.FleetStatus{
		LastApplied: &status.SourceCommit{Commit: head, Subject: "Initial fleet"},
		Conditions: []status.FleetCondition{
			{Condition: status.Condition{Type: status.ConditionReconciling, Status: status.ConditionFalse, Reason: "BootstrapFailing", LastTransitionTime: since,
				Message: "bootstrap: no CA: cluster prod-1 has no CA in bucket gitfleet-pki, and machine prod-1-md-0-g7 joins its running control plane, which trusts only the CA it was made with"}},
			{Condition: status.Condition{Type: status.ConditionTasksAnswered, Status: status.ConditionFalse, Reason: "NoWorkerAnswers", LastTransitionTime: since.Add(10 * time.Minute),
				Message: "provider local: no worker answered 2 tasks in 5m0s (dev-10-md-0-k2, published 2026-11-20T12:10:00Z); start a worker for it (gitfleet worker --provider local) or check that its workers reach NATS"}},
			{Condition: status.Condition{Type: status.ConditionRecordsRebuilt, Status: status.ConditionFalse, Reason: "WaitingForInventory", LastTransitionTime: since,
				Message: "the machines store was empty: no plan until the inventory of provider docker is in"}},
		},
	}, o)
	flushStatus(t, w)

	code, stdout, stderr := runCmd(t, "describe", "prod-1", "--repo", dir, "--grouping=false")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	golden(t, "describe/prod-1-fleet-conditions.txt", regexp.MustCompile(`Status: [0-9a-f]{7} `).ReplaceAllString(stdout, "Status: STATUS "))
	heading := "\nFleet conditions concerning prod-1 (fleet.yaml):\nTYPE"
	if !strings.Contains(stdout, heading) || !strings.Contains(stdout, "BootstrapFailing") || !strings.Contains(stdout, "no CA: cluster prod-1") ||
		!strings.Contains(stdout, "NoWorkerAnswers") || strings.Contains(stdout, "WaitingForInventory") {
		t.Errorf("describe prod-1 does not show the bootstrap error naming it and its provider's unanswered tasks (and only those) under %q:\n%s", heading, stdout)
	}

	_, stdout, _ = runCmd(t, "describe", "dev-1", "--repo", dir)
	if !strings.Contains(stdout, "Fleet conditions concerning dev-1 (fleet.yaml):") || !strings.Contains(stdout, "NoWorkerAnswers") ||
		strings.Contains(stdout, "BootstrapFailing") || strings.Contains(stdout, "WaitingForInventory") {
		t.Errorf("describe dev-1 shows another cluster's or provider's condition, or not its provider's:\n%s", stdout)
	}
	_, stdout, _ = runCmd(t, "describe", "--repo", dir)
	if strings.Contains(stdout, "Fleet conditions concerning") {
		t.Errorf("describe of the whole fleet lists the conditions per cluster:\n%s", stdout)
	}
	// The whole fleet's describe shows every condition of the daemon's,
	// after the tree, as describe CLUSTER shows those of the cluster.
	golden(t, "describe/fleet-conditions.txt", strings.ReplaceAll(regexp.MustCompile(`Status: [0-9a-f]{7} `).ReplaceAllString(stdout, "Status: STATUS "), head[:7], "HEAD"))
	if !strings.Contains(stdout, "\nFleet conditions (fleet.yaml):\nTYPE") || !strings.Contains(stdout, "BootstrapFailing") ||
		!strings.Contains(stdout, "NoWorkerAnswers") || !strings.Contains(stdout, "WaitingForInventory") {
		t.Errorf("describe of the whole fleet does not show the daemon's conditions under \"Fleet conditions (fleet.yaml):\":\n%s", stdout)
	}

	// -o json and -o yaml hold what the text shows: the cluster's status
	// file as it is, and the fleet conditions concerning it under
	// fleetConditions.
	_, js, _ := runCmd(t, "describe", "prod-1", "--repo", dir, "-o", "json")
	golden(t, "describe/prod-1-fleet-conditions.json", js)
	var doc struct {
		Name            string            `json:"name"`
		Machines        []json.RawMessage `json:"machines"`
		FleetConditions []struct {
			Type, Reason string
		} `json:"fleetConditions"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil || doc.Name != "prod-1" || len(doc.Machines) != 6 ||
		len(doc.FleetConditions) != 2 || doc.FleetConditions[0].Reason != "BootstrapFailing" || doc.FleetConditions[1].Reason != "NoWorkerAnswers" {
		t.Errorf("describe prod-1 -o json is not prod-1's status with its two fleet conditions under fleetConditions (%v):\n%s", err, js)
	}
	_, y, _ := runCmd(t, "describe", "dev-1", "--repo", dir, "-o", "yaml")
	if !strings.HasPrefix(y, "name: dev-1\n") || !strings.Contains(y, "\nfleetConditions:\n  - type: TasksAnswered\n") || strings.Contains(y, "BootstrapFailing") {
		t.Errorf("describe dev-1 -o yaml is not dev-1's status with its provider's condition under fleetConditions:\n%s", y)
	}
}

// commitStatusFile commits content as path on the status branch, dated
// 2026-11-20 10:08 UTC, as another writer of the branch (a daemon of
// another build) would.
func commitStatusFile(t *testing.T, dir, path, content string) {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "status")
	gitCLI(t, dir, "worktree", "add", "-q", wt, "gitfleet/status")
	if err := os.WriteFile(filepath.Join(wt, path), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_COMMITTER_DATE", "2026-11-20T10:08:00Z")
	gitCLI(t, wt, "add", path)
	gitCLI(t, wt, "commit", "-qm", path)
	gitCLI(t, dir, "worktree", "remove", "--force", wt)
}

// recordedFleetYAML is fleet.yaml with conditions that record what they
// concern, as the daemon writes them: a bootstrap error about prod-1 whose
// message names no cluster, and a provider whose tasks no worker answers.
const recordedFleetYAML = `lastApplied:
  commit: 4e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b
  subject: Initial fleet
conditions:
  - type: Reconciling
    status: "False"
    reason: BootstrapFailing
    message: "bootstrap: bootstrap: the cluster's trust material, endpoint and the machine's token are required"
    lastTransitionTime: 2026-11-20T12:00:00Z
    clusters:
      - prod-1
  - type: TasksAnswered
    status: "False"
    reason: NoWorkerAnswers
    message: 'provider docker: no worker answered 1 task in 2m0s (create dev-1-md-0-zz9zz, published 2026-11-20T12:10:00Z); start a worker for it (gitfleet worker --provider docker) or check that its workers reach NATS'
    lastTransitionTime: 2026-11-20T12:10:00Z
    providers:
      - docker
clusters: 2
machines: 9
`

// TestDescribeFleetConditionsByWhatTheyRecord: a fleet condition that
// records the clusters or providers it concerns shows under those
// clusters, and those whose machines use those providers, whatever its
// message names: a bootstrap error about prod-1 whose message names no
// cluster shows under prod-1 (before, under none), not under dev-1.
func TestDescribeFleetConditionsByWhatTheyRecord(t *testing.T) {
	t.Setenv("GITFLEET_DESCRIBE_NOW", describeNow)
	dir := fleetRepo(t)
	w := statusWriter(t, dir)
	o := status.Origin{SourceCommit: strings.Repeat("a", 40)}
	dev := dev1(2, 2, statusEpoch)
	dev.Machines[2].Provider = "docker"
	w.SetCluster(dev, o)
	w.SetCluster(prod1(), o)
	flushStatus(t, w)
	commitStatusFile(t, dir, "fleet.yaml", recordedFleetYAML)

	code, stdout, stderr := runCmd(t, "describe", "prod-1", "--repo", dir, "--grouping=false")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	golden(t, "describe/prod-1-recorded-conditions.txt", regexp.MustCompile(`Status: [0-9a-f]{7} `).ReplaceAllString(stdout, "Status: STATUS "))
	if !strings.Contains(stdout, "\nFleet conditions concerning prod-1 (fleet.yaml):\nTYPE") || !strings.Contains(stdout, "BootstrapFailing") ||
		strings.Contains(stdout, "NoWorkerAnswers") {
		t.Errorf("describe prod-1 does not show the bootstrap error recorded for it, or shows the docker provider's, which none of its machines use:\n%s", stdout)
	}
	_, stdout, _ = runCmd(t, "describe", "dev-1", "--repo", dir)
	if !strings.Contains(stdout, "Fleet conditions concerning dev-1 (fleet.yaml):") || !strings.Contains(stdout, "NoWorkerAnswers") ||
		strings.Contains(stdout, "BootstrapFailing") {
		t.Errorf("describe dev-1 shows prod-1's bootstrap error, or not the docker provider's unanswered tasks:\n%s", stdout)
	}
	// -o yaml carries the condition as fleet.yaml has it, with what it
	// records.
	_, y, _ := runCmd(t, "describe", "prod-1", "--repo", dir, "-o", "yaml")
	if !strings.Contains(y, "\nfleetConditions:\n  - type: Reconciling\n") || !strings.Contains(y, "    clusters:\n      - prod-1\n") ||
		strings.Contains(y, "NoWorkerAnswers") {
		t.Errorf("describe prod-1 -o yaml lacks the bootstrap error recorded for it, with its clusters, under fleetConditions:\n%s", y)
	}
}
