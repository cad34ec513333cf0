package history_test

import (
	"bytes"
	"strings"
	"testing"

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

	life, err := history.Machine(g, "", "dev-1-md-0-5nqsx")
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := life.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(text.String()), "\n")[1:] {
		got = append(got, strings.TrimRight(l[len("2006-01-02 15:04:05  "):], " "))
	}
	want := []string{
		"Provisioning because: " + rollout,
		"Running",
		"Running      unhealthy: NodeUnhealthy: kubelet stopped",
		"Running      healthy again",
		"Running      unhealthy: NodeUnhealthy: kubelet stopped",
		"Deleting     unhealthy",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("life of the machine (-want +got):\n%s\n%s", diff, text.String())
	}
	if e := life.Events[2]; e.HealthReason != "NodeUnhealthy" || e.HealthMessage != "kubelet stopped" {
		t.Errorf("event %+v: want the Healthy condition's reason and message", e)
	}

	life, err = history.Machine(g, "", "dev-1-md-0-7xkq2")
	if err != nil {
		t.Fatal(err)
	}
	text.Reset()
	if err := life.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	// Why it exists, then, apart, why it is unhealthy.
	if want := "Running      because: " + rollout + "; unhealthy: NodeUnhealthy: kubelet stopped\n"; !strings.HasSuffix(text.String(), want) {
		t.Errorf("life of a machine unhealthy when first seen:\n%s\nwant it to end %q", text.String(), want)
	}
}
