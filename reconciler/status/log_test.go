package status

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestTransitionsRemovedSaysWhy: a machine that leaves the status file is
// said removed with the cause the cluster's deleted list gives it, so the
// cluster trail answers "why did it go" as history --machine does; a
// cause the machine already showed while Deleting is not said twice.
func TestTransitionsRemovedSaysWhy(t *testing.T) {
	const why = "remediate: the provider no longer runs it (NodeExited)"
	for _, tc := range []struct {
		name         string
		phase, cause string // the machine before it went
		deletedCause string // the cluster's note of the delete
		want         string
	}{
		{"gone between commits", "Running", "md-0 has 1 of 2 machines", why,
			"machine c1-md-0-wa removed (was Running), because: " + why},
		{"cause shown while Deleting", "Deleting", why, why,
			"machine c1-md-0-wa removed (was Deleting)"},
		{"another cause than while Deleting", "Deleting", "scale down md-0 to 0 machines", why,
			"machine c1-md-0-wa removed (was Deleting), because: " + why},
		{"no note of the delete", "Running", "", "",
			"machine c1-md-0-wa removed (was Running)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := cluster("c1", 1, "Running")
			before.Machines[1].Phase, before.Machines[1].Cause = tc.phase, tc.cause
			after := cluster("c1", 0, "Running")
			if tc.deletedCause != "" {
				after.Deleted = []DeletedMachine{{Name: "c1-md-0-wa", Cause: tc.deletedCause, Reason: "NodeExited", Deleted: created}}
			}
			got := Transitions(&before, &after)
			var removed []string
			for _, l := range got {
				if strings.Contains(l, " removed") {
					removed = append(removed, l)
				}
			}
			if len(removed) != 1 || removed[0] != tc.want {
				t.Errorf("transitions %q\nwant the line %q", got, tc.want)
			}
		})
	}
}

// TestTransitionsHealthSaysWhy: a health change in the cluster trail says
// what the Healthy condition says, as history --machine does; a machine
// that leaves Running is not called healthy again (only a Running machine
// is marked unhealthy).
func TestTransitionsHealthSaysWhy(t *testing.T) {
	sick := func(c *ClusterStatus) {
		c.Machines[1].Unhealthy, c.Machines[1].Message = true, "kubelet stopped"
		c.Machines[1].Conditions = []Condition{{Type: ConditionHealthy, Status: ConditionFalse, Reason: "NodeUnhealthy", Message: "kubelet stopped"}}
	}
	healthy, unhealthy, deleting := cluster("c1", 1, "Running"), cluster("c1", 1, "Running"), cluster("c1", 1, "Running")
	sick(&unhealthy)
	sick(&deleting)
	deleting.Machines[1].Phase, deleting.Machines[1].Unhealthy, deleting.Machines[1].Conditions = "Deleting", false, nil
	machineLines := func(ts []string) []string {
		var out []string
		for _, l := range ts {
			if strings.HasPrefix(l, "machine ") {
				out = append(out, l)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		before, after *ClusterStatus
		want          string
	}{
		{"unhealthy", &healthy, &unhealthy, "[machine c1-md-0-wa unhealthy: NodeUnhealthy: kubelet stopped]"},
		{"healthy again", &unhealthy, &healthy, "[machine c1-md-0-wa healthy again]"},
		{"deleted while unhealthy", &unhealthy, &deleting, "[machine c1-md-0-wa Running → Deleting: kubelet stopped]"},
	} {
		if got := fmt.Sprint(machineLines(Transitions(tc.before, tc.after))); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A cluster's file removed with the cluster: each machine it still listed
// is written as removed with why, not left to be inferred.
func TestTransitionsClusterRemovedSaysItsMachinesWent(t *testing.T) {
	before := &ClusterStatus{Name: "prod-1", Machines: []MachineStatus{
		{Name: "prod-1-md-0-b", Phase: "Running"}, {Name: "prod-1-control-plane-a", Phase: "Deleting"}}}
	got := Transitions(before, nil)
	want := []string{"status removed (cluster deleted)",
		"machine prod-1-control-plane-a removed (was Deleting), because: its cluster was removed from the fleet",
		"machine prod-1-md-0-b removed (was Running), because: its cluster was removed from the fleet"}
	if !slices.Equal(got, want) {
		t.Errorf("transitions %q, want %q", got, want)
	}
}

// A machine the removed file shows Deleting for a cause of its own (a
// scale-down, a remediation) went for that cause, which its Deleting line
// said: its removal does not blame the cluster's.
func TestTransitionsClusterRemovedKeepsADeletingMachinesCause(t *testing.T) {
	before := &ClusterStatus{Name: "prod-1", Machines: []MachineStatus{
		{Name: "prod-1-md-0-a", Phase: "Deleting", Cause: "scale down md-0 to 2 machines"},
		{Name: "prod-1-md-0-b", Phase: "Running"}}}
	got := Transitions(before, nil)
	want := []string{"status removed (cluster deleted)",
		"machine prod-1-md-0-a removed (was Deleting)",
		"machine prod-1-md-0-b removed (was Running), because: its cluster was removed from the fleet"}
	if !slices.Equal(got, want) {
		t.Errorf("transitions %q, want %q", got, want)
	}
}
