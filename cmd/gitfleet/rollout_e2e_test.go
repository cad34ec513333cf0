package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/reconciler/status"
)

// haltFleet is a fleet of inmemory clusters in three waves, and a cluster of
// another class whose workers always fail to be created.
var haltFleet = map[string]string{
	"classes/standard.yaml": `apiVersion: gitfleet.io/v1alpha1
kind: ClusterClass
metadata:
  name: standard
spec:
  version: v1.31.2
  controlPlane:
    machineTemplate:
      provider: inmemory
      spec:
        provisioningDelay: 20ms
  workers:
    machineDeployments:
      - class: worker
        template:
          provider: inmemory
          spec:
            provisioningDelay: 20ms
  rollout:
    waves:
      - name: canary
        selector:
          matchLabels: {tier: canary}
      - name: stage
        selector:
          matchLabels: {tier: stage}
        maxConcurrent: 1
      - name: prod
        selector:
          matchLabels: {tier: prod}
        maxConcurrent: 1
`,
	"classes/flaky.yaml": `apiVersion: gitfleet.io/v1alpha1
kind: ClusterClass
metadata:
  name: flaky
spec:
  version: v1.31.2
  controlPlane:
    machineTemplate:
      provider: inmemory
  workers:
    machineDeployments:
      - class: worker
        template:
          provider: inmemory
          spec:
            failureRate: 1
`,
	"clusters/flaky-1.yaml":  haltCluster("flaky-1", "flaky", "other", 1),
	"clusters/canary-1.yaml": haltCluster("canary-1", "standard", "canary", 2),
	"clusters/stage-1.yaml":  haltCluster("stage-1", "standard", "stage", 1),
	"clusters/prod-1.yaml":   haltCluster("prod-1", "standard", "prod", 1),
	"clusters/prod-2.yaml":   haltCluster("prod-2", "standard", "prod", 1),
}

func haltCluster(name, class, tier string, workers int) string {
	return fmt.Sprintf(`apiVersion: gitfleet.io/v1alpha1
kind: Cluster
metadata:
  name: %s
  labels: {tier: %s}
spec:
  topology:
    classRef: {name: %s}
    workers:
      machineDeployments:
        - class: worker
          name: md
          replicas: %d
`, name, tier, class, workers)
}

// TestRolloutHaltAndRevert drives the real daemon (gitfleet up, embedded
// NATS, inmemory provider): a class change that touches only the worker
// template, whose machines always fail, halts in the first wave and gives
// the later waves no task; git revert of the change brings every cluster
// back to healthy machines on the old template, without touching
// maxFailures. Meanwhile a pool whose template always fails is created
// again only a few times a minute (backoff), not in a loop.
func TestRolloutHaltAndRevert(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test builds the binary and runs the daemon")
	}
	e := newE2E(t)
	e.git("rm", "-rq", "classes", "clusters", "policies")
	for path, content := range haltFleet {
		p := filepath.Join(e.repo, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.git("add", "-A")
	e.commit("Ada Lovelace", "a fleet in three waves, and a flaky one")
	standard := fleetWant{"canary-1": {3, "v1.31.2"}, "stage-1": {2, "v1.31.2"}, "prod-1": {2, "v1.31.2"}, "prod-2": {2, "v1.31.2"}}

	e.start()
	e.waitConverged("initial fleet", standard)
	e.waitFor("every cluster done on the first revision", 90*time.Second, func() (bool, string) {
		return e.rolloutStates(standard, "Done")
	})
	before := e.templates(standard)

	// The change touches only the worker template: its machines fail.
	e.edit("classes/standard.yaml", func(s string) string {
		return strings.Replace(s, "            provisioningDelay: 20ms\n", "            provisioningDelay: 20ms\n            failureRate: 1\n", 1)
	})
	e.commit("Bob", "standard: a worker template that fails")
	e.waitFor("rollout halted in the canary wave", 90*time.Second, func() (bool, string) {
		c := e.status().Cluster("canary-1")
		if c == nil || c.Rollout == nil || c.Rollout.State != "Failed" || !hasCondition(c, "RolloutHalted") {
			return false, fmt.Sprintf("canary-1: %+v", c)
		}
		for _, name := range []string{"stage-1", "prod-1", "prod-2"} {
			c := e.status().Cluster(name)
			if c == nil || c.Rollout == nil || c.Rollout.State != "Waiting" {
				return false, fmt.Sprintf("%s: %+v", name, c)
			}
		}
		return true, ""
	})
	if r := e.status().Cluster("canary-1").Rollout; !strings.Contains(r.Reason, "simulated provisioning failure") {
		t.Errorf("canary-1 rollout reason %q does not say why", r.Reason)
	}
	// fleet.yaml says the class's rollout halted before wave stage, why,
	// and which commit started it.
	e.waitFor("fleet.yaml's rollout of standard halted", 30*time.Second, func() (bool, string) {
		for _, r := range e.status().Fleet.Rollouts {
			if r.Class == "standard" {
				return r.Halted && r.CurrentWave == "stage" && slices.Equal(r.Failed, []string{"canary-1"}) && r.MaxFailures == 1 &&
					strings.Contains(r.Reason, "canary-1") && r.Change != nil && r.Change.Subject == "standard: a worker template that fails" &&
					strings.HasPrefix(r.Change.Author, "Bob"), fmt.Sprintf("%+v %+v", r, r.Change)
			}
		}
		return false, "no rollout of standard"
	})

	// Release through Git: revert the change.
	e.git("-c", "user.name=Carol", "-c", "user.email=carol@example.com", "revert", "--no-edit", "HEAD")
	e.waitConverged("after the revert", standard)
	e.waitFor("every cluster done again", 90*time.Second, func() (bool, string) {
		return e.rolloutStates(standard, "Done")
	})
	if after := e.templates(standard); !equalStrings(before, after) {
		t.Errorf("templates after the revert differ from before the change:\nbefore %v\nafter  %v", before, after)
	}
	if b, err := os.ReadFile(filepath.Join(e.repo, "classes/standard.yaml")); err != nil || strings.Contains(string(b), "maxFailures") {
		t.Errorf("maxFailures was touched: %v %s", err, b)
	}
	// Later waves got no task at all since the initial fleet was up: the
	// change never reached them, and the revert had nothing to do there.
	for _, name := range []string{"stage-1", "prod-1", "prod-2"} {
		if n := len(e.tasks(name)); n != standard[name].machines {
			t.Errorf("%s got %d tasks in all, want %d (its first machines only)", name, n, standard[name].machines)
		}
	}

	// The flaky pool's creates over one minute from its first.
	first := e.flakyCreates()
	if len(first) == 0 {
		t.Fatal("no create task for flaky-1/md")
	}
	window := first[0].Add(60 * time.Second)
	e.waitFor("a minute of the flaky pool", 2*time.Minute, func() (bool, string) {
		return time.Now().After(window.Add(2 * time.Second)), ""
	})
	n := 0
	for _, at := range e.flakyCreates() {
		if !at.After(window) {
			n++
		}
	}
	if n == 0 || n >= 20 {
		t.Errorf("flaky-1/md: %d create tasks in 60s, want fewer than 20 (backoff)", n)
	}
	c := e.status().Cluster("flaky-1")
	var md *status.DeploymentStatus
	for i := range c.Deployments {
		if c.Deployments[i].Name == "md" {
			md = &c.Deployments[i]
		}
	}
	if md == nil || md.Backoff == nil || md.Backoff.Failures < 2 || !strings.Contains(md.Backoff.LastFailure, "simulated provisioning failure") || md.Backoff.NextRetry.IsZero() {
		t.Errorf("flaky-1/md status does not show its backoff: %+v", md)
	}
	t.Logf("flaky-1/md: %d create tasks in the first minute", n)
}

// rolloutStates: every cluster of want shows rollout state.
func (e *e2e) rolloutStates(want fleetWant, state string) (bool, string) {
	s := e.status()
	for name := range want {
		c := s.Cluster(name)
		if c == nil || c.Rollout == nil || c.Rollout.State != state {
			return false, fmt.Sprintf("%s: %+v", name, c)
		}
	}
	return true, ""
}

// templates lists cluster/deployment=hash of every machine of want.
func (e *e2e) templates(want fleetWant) []string {
	var out []string
	s := e.status()
	for name := range want {
		for _, m := range s.Cluster(name).Machines {
			out = append(out, fmt.Sprintf("%s/%s=%s", name, m.Deployment, m.TemplateHash))
		}
	}
	return sortStrings(out)
}

// flakyCreates are the times of the create tasks of flaky-1's workers.
func (e *e2e) flakyCreates() []time.Time {
	var out []time.Time
	for _, task := range e.tasks("flaky-1") {
		name, _ := task["machine"].(string)
		if task["op"] != "create" || !strings.HasPrefix(name, "flaky-1-md-") {
			continue
		}
		at, err := time.Parse(time.RFC3339, fmt.Sprint(task["time"]))
		if err != nil {
			e.t.Fatalf("task time %v: %v", task["time"], err)
		}
		out = append(out, at)
	}
	return out
}

func hasCondition(c *status.ClusterStatus, t string) bool {
	for _, cond := range c.Conditions {
		if cond.Type == t && cond.Status == status.ConditionTrue {
			return true
		}
	}
	return false
}
