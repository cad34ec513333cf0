package status

import (
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
