package history_test

import (
	"bytes"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/reconciler/history"
	"github.com/gitfleet/gitfleet/reconciler/status"
)

// A health change of a machine says what its Healthy condition says, not
// the cause of its creation: "because: rolling update …" next to
// "unhealthy" read as if the rollout had made it unhealthy.
func TestMachineHealthChangesSayTheHealth(t *testing.T) {
	work := gittest.NewRepo(t)
	work.Commit("initial fleet", map[string]string{"README.md": "fleet\n"})
	g, w := statusWriter(t, work)
	const rollout = "rolling update of md-0 to v1.32.0: 1 of 2 machines up to date, surge one"
	sick := []status.Condition{{Type: status.ConditionHealthy, Status: status.ConditionFalse,
		Reason: "NodeUnhealthy", Message: "kubelet stopped"}}
	machine := func(name, phase string, unhealthy bool) status.MachineStatus {
		m := status.MachineStatus{Name: name, Role: "worker", Deployment: "md-0", Phase: phase,
			Version: "v1.32.0", Cause: rollout}
		if unhealthy {
			m.Unhealthy, m.Message, m.Conditions = true, "kubelet stopped", sick
		}
		return m
	}
	n := 0
	step := func(phase string, unhealthy bool) {
		t.Helper()
		c := status.ClusterStatus{Name: "dev-1", Class: "standard", Version: "v1.32.0", Phase: status.ClusterProvisioned,
			Machines: []status.MachineStatus{machine("dev-1-md-0-5nqsx", phase, unhealthy)}}
		if n++; n >= 3 {
			// Another machine of the rollout, unhealthy when first seen.
			c.Machines = append(c.Machines, machine("dev-1-md-0-7xkq2", "Running", true))
		}
		if err := w.SetCluster(c, status.Origin{}); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	step("Provisioning", false)
	step("Running", false)
	step("Running", true)
	step("Running", false)
	step("Running", true)
	step("Deleting", true)

	life, text, got := machineLife(t, g, "dev-1-md-0-5nqsx")
	want := []string{
		"Provisioning because: " + rollout,
		"Running",
		"Running      unhealthy: NodeUnhealthy: kubelet stopped",
		"Running      healthy again",
		"Running      unhealthy: NodeUnhealthy: kubelet stopped",
		"Deleting     unhealthy",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("life of the machine (-want +got):\n%s\n%s", diff, text)
	}
	if e := life.Events[2]; e.HealthReason != "NodeUnhealthy" || e.HealthMessage != "kubelet stopped" {
		t.Errorf("event %+v: want the Healthy condition's reason and message", e)
	}

	_, text, _ = machineLife(t, g, "dev-1-md-0-7xkq2")
	// Why it exists, then, apart, why it is unhealthy.
	if want := "Running      because: " + rollout + "; unhealthy: NodeUnhealthy: kubelet stopped\n"; !strings.HasSuffix(text, want) {
		t.Errorf("life of a machine unhealthy when first seen:\n%s\nwant it to end %q", text, want)
	}
}

// machineLife reads the life of machine from g's status branch: as
// history.Machine gives it, as WriteText prints it, and its event lines
// without their times.
func machineLife(t *testing.T, g *git.Repository, machine string) (*history.MachineLife, string, []string) {
	t.Helper()
	life, err := history.Machine(g, "", machine)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := life.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(text.String()), "\n")[1:] {
		lines = append(lines, strings.TrimRight(l[len("2006-01-02 15:04:05  "):], " "))
	}
	return life, text.String(), lines
}

// A machine whose cluster was removed from the fleet usually goes within
// the status commit that removes the cluster's file, so no deleted list
// names it: its life ends "gone", saying why as the cluster's trail does,
// not a bare "gone" under the spec commit that removed the cluster. One
// shown Deleting for a cause of its own went for that cause, which its
// Deleting line said: its gone line blames nothing more.
func TestMachineOfARemovedClusterSaysWhyItWent(t *testing.T) {
	work := gittest.NewRepo(t)
	first := work.Commit("initial fleet", map[string]string{"clusters/prod-1.yaml": "prod-1\n"})
	g, w := statusWriter(t, work)
	const scaleDown = "scale down md-0 to 1 machine"
	c := status.ClusterStatus{Name: "prod-1", Class: "standard", Version: "v1.31.2", Phase: status.ClusterProvisioned,
		Machines: []status.MachineStatus{{Name: "prod-1-md-0-dpzjt", Role: "worker", Deployment: "md-0",
			Phase: "Running", Version: "v1.31.2", Cause: "md-0 has 0 of 1 machines"},
			{Name: "prod-1-md-0-k2v9x", Role: "worker", Deployment: "md-0",
				Phase: "Deleting", Version: "v1.31.2", Cause: scaleDown}}}
	if err := w.SetCluster(c, status.Origin{SourceCommit: first}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	work.Git("rm", "-q", "clusters/prod-1.yaml")
	work.Git("commit", "-q", "-m", "prod-1 goes")
	if err := w.DeleteCluster("prod-1", status.Origin{SourceCommit: work.Head()}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	life, text, lines := machineLife(t, g, "prod-1-md-0-dpzjt")
	last := lines[len(lines)-1]
	if want := "gone         because: its cluster was removed from the fleet (fleet at spec " + work.Head()[:7]; !strings.HasPrefix(last, want) {
		t.Errorf("the machine's life ends %q, want %q…\n%s", last, want, text)
	}
	if e := life.Events[len(life.Events)-1]; e.Cause != "its cluster was removed from the fleet" || e.Reason != "ClusterRemoved" {
		t.Errorf("its last event: cause %q, reason %q; want the cluster's removal, ClusterRemoved", e.Cause, e.Reason)
	}

	_, text, lines = machineLife(t, g, "prod-1-md-0-k2v9x")
	if want := []string{"Deleting     because: " + scaleDown, "gone"}; len(lines) != 2 ||
		!strings.HasPrefix(lines[0], want[0]) || !strings.HasPrefix(lines[1], want[1]) || strings.Contains(lines[1], "because") {
		t.Errorf("life of the machine scaled down before its cluster went:\n%s\nwant %q, then %q with no because", text, want[0], want[1])
	}
}
