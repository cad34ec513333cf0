package main

import (
	"strings"
	"testing"
)

// Edits of the example fleet that move no machine.
var (
	// The worker class's pools get minReadySeconds: a rule, no template.
	classMinReady = map[string][2]string{"classes/standard.yaml": {
		"        rollout:\n          strategy:", "        minReadySeconds: 30\n        rollout:\n          strategy:"}}
	// prod-1's MachineHealthCheck waits longer for a Ready False node.
	prodHealthCheck = map[string][2]string{"clusters/prod-1.yaml": {"timeoutSeconds: 120", "timeoutSeconds: 300"}}
	// The class's rollout declares no waves.
	noWaves = map[string][2]string{"classes/standard.yaml": {
		"    waves:\n      - name: dev\n        selector:\n          matchLabels: {env: dev}\n        maxConcurrent: 100%\n" +
			"      - name: prod\n        selector:\n          matchLabels: {env: prod}\n        maxConcurrent: 1\n", ""}}
)

// plan --detailed-exitcode exits 2 for every plan whose change reaches a
// cluster, machines or not: new rules of a class (in its waves, or at once
// when it declares none) or of the cluster's own files, a new
// clusterNetwork, a paused cluster, a running rollout that merging halts or
// releases. It exits 0 only when the plan reads "No changes":
// nothing the daemon does to a cluster differs. Before, a change of rules
// alone, or of a rollout's maxFailures that halts it, exited 0 — "no
// changes" to a CI job that gates on the code — although the daemon then
// applied it to the clusters.
func TestPlanDetailedExitCode(t *testing.T) {
	for _, c := range []struct {
		name string
		// main is committed on main before head branches off it; status
		// (when set) writes the status branch after.
		main   map[string][2]string
		status func(t *testing.T, dir string)
		head   map[string][2]string
		code   int
		want   []string
	}{
		{name: "class rules in waves", head: classMinReady, code: 2, want: []string{
			"No machine changes: 2 clusters unchanged, 2 of them getting new rules of their class in their wave.",
			"class standard's new rules (md-0 minReadySeconds) reach it in wave 2/2 prod",
			"Class standard rolls out wave dev (new rules only: dev-1; "}},
		{name: "class health check", head: map[string][2]string{"classes/standard.yaml": {
			"  controlPlane:\n    machineTemplate:", "  controlPlane:\n    healthCheck:\n      checks:\n        nodeStartupTimeoutSeconds: 300\n    machineTemplate:"}},
			code: 2, want: []string{"class standard's new rules (health checks) reach it in wave 1/2 dev"}},
		{name: "class rules without waves", main: noWaves, head: classMinReady, code: 2, want: []string{
			"New rules at once, in no wave, no machine changed: dev-1, prod-1."}},
		// A cluster's own files: the daemon admits it again with its new
		// rules at once, unless its class's rollout under way holds it.
		{name: "own minReadySeconds", head: map[string][2]string{"clusters/dev-1.yaml": {"          replicas: 2", "          replicas: 2\n          minReadySeconds: 30"}},
			code: 2, want: []string{
				"No machine changes: 2 clusters unchanged, 1 of them getting new rules of their own files.",
				"why: no machine of it changes, but its own new rules (md-0 minReadySeconds) apply at once, in no wave",
				"New rules at once, in no wave, no machine changed: dev-1."}},
		{name: "own MachineHealthCheck", head: prodHealthCheck, code: 2, want: []string{
			"its own new rules (health checks) apply at once, in no wave", "New rules at once, in no wave, no machine changed: prod-1."}},
		{name: "own rules held by the rollout under way", main: map[string][2]string{"classes/standard.yaml": {"maxFailures: 1", "maxFailures: 2"}},
			status: func(t *testing.T, dir string) { rolloutStatus(t, dir, 2) }, head: prodHealthCheck, code: 2, want: []string{
				"its own new rules (health checks) reach it in wave 2/2 prod, when class standard's rollout under way admits it",
				"wave prod (new rules only: prod-1"}},
		// kubeadm takes a cluster's network only when its first
		// control-plane machine initialises it: the daemon replaces no
		// machine, but a control plane made again from none takes it.
		{name: "clusterNetwork", head: map[string][2]string{"clusters/dev-1.yaml": {"cidrBlocks: [10.244.0.0/16]", "cidrBlocks: [10.245.0.0/16]"}},
			code: 2, want: []string{
				"No machine changes: 2 clusters unchanged, 1 of them getting a new clusterNetwork that no running machine takes.",
				"= dev-1 (unchanged)\n    why: no machine of it changes and none is replaced: kubeadm takes spec.clusterNetwork only when a cluster's first control-plane machine initialises it (kubeadm init), and dev-1's control plane is made: it keeps the pod and service ranges and the DNS domain it has, and the new ones reach only a control plane made again from none (every control-plane machine gone)\n",
				"      - spec.clusterNetwork.pods.cidrBlocks: [\"10.244.0.0/16\"]\n      + spec.clusterNetwork.pods.cidrBlocks: [\"10.245.0.0/16\"]\n",
				"New spec.clusterNetwork, which no running machine takes (only a control plane made again from none): dev-1."}},
		{name: "paused", head: map[string][2]string{"clusters/dev-1.yaml": {"spec:\n", "spec:\n  paused: true\n"}}, code: 2, want: []string{
			"~ dev-1 (changed)", "paused: nothing happens until spec.paused is false"}},
		{name: "lower maxFailures halts the rollout", main: map[string][2]string{"classes/standard.yaml": {"maxFailures: 1", "maxFailures: 2"}},
			status: func(t *testing.T, dir string) { rolloutStatus(t, dir, 2) },
			head:   map[string][2]string{"classes/standard.yaml": {"maxFailures: 2", "maxFailures: 1"}}, code: 2, want: []string{
				"This change lowers maxFailures to 1, so merging halts it",
				"No machine changes: 2 clusters unchanged.",
				"Merging: the daemon applies head at its next poll or webhook. No machine changes. Class standard's rollout of revision "}},
		{name: "raise maxFailures releases the halt", status: func(t *testing.T, dir string) { rolloutStatus(t, dir, 1) },
			head: map[string][2]string{"classes/standard.yaml": {"maxFailures: 1", "maxFailures: 2"}}, code: 2, want: []string{
				"This change raises maxFailures to 2, which releases the halt"}},
		// Nothing reaches a cluster: no rollout is under way for a new
		// maxFailures to halt, and a variable's constraint is no value.
		{name: "maxFailures without a rollout", head: map[string][2]string{"classes/standard.yaml": {"maxFailures: 1", "maxFailures: 2"}}, code: 0, want: []string{
			"No changes: 2 clusters unchanged.", "Merging changes no machine."}},
		{name: "variable constraint", head: map[string][2]string{"classes/standard.yaml": {"<=64", "<=128"}}, code: 0, want: []string{
			"No changes: 2 clusters unchanged.", "Merging changes no machine."}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := fleetRepo(t)
			if c.main != nil {
				branch(t, dir, "main-edit", c.main)
				gitCLI(t, dir, "merge", "-q", "--ff-only", "main-edit")
			}
			if c.status != nil {
				c.status(t, dir)
			}
			branch(t, dir, "head", c.head)
			code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "head", "--detailed-exitcode")
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s%s", code, c.code, stdout, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("plan lacks %q:\n%s", w, stdout)
				}
			}
			if c.code == 2 && strings.Contains(stdout, "No changes") {
				t.Errorf("plan reads no changes, and exits %d:\n%s", code, stdout)
			}
			for _, format := range []string{"markdown", "json"} {
				if fc, out, _ := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "head", "--detailed-exitcode", "-o", format); fc != code {
					t.Errorf("-o %s: exit %d, text's %d\n%s", format, fc, code, out)
				}
			}
		})
	}
}
