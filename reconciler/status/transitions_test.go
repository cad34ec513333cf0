package status

import (
	"slices"
	"testing"
)

// TestReplacementReadsAsTheDaemons: the creation of a machine that
// replaces one removed for its health is shown as the daemon's doing, not
// with "because:", which under the spec commit in force reads as its
// author's; any other create keeps its cause.
func TestReplacementReadsAsTheDaemons(t *testing.T) {
	before := &ClusterStatus{Name: "dev-1", Phase: "Provisioned"}
	after := &ClusterStatus{Name: "dev-1", Phase: "Provisioned", Machines: []MachineStatus{
		{Name: "dev-1-md-0-a", Phase: "Pending", Version: "v1.31.2", Cause: "replaces dev-1-md-0-5nvwl (gone: NodeExited)"},
		{Name: "dev-1-md-0-b", Phase: "Pending", Version: "v1.31.2", Cause: "md-0 has 2 of 3 machines"},
	}}
	got := Transitions(before, after)
	for _, want := range []string{
		"machine dev-1-md-0-a created: Pending v1.31.2 (daemon: replaces dev-1-md-0-5nvwl (gone: NodeExited))",
		"machine dev-1-md-0-b created: Pending v1.31.2, because: md-0 has 2 of 3 machines",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("transitions %q lack %q", got, want)
		}
	}
}
