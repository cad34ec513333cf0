package reconciler

import (
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/planner"
)

// A cluster the planner blocks says in its status where to look: the
// field's own line and column, as `gitfleet validate` prints it, not the
// first line of the document that holds it.
func TestBlockedSaysWhereToLook(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	l.repo.write("clusters/md.yaml", `apiVersion: gitfleet.io/v1alpha1
kind: MachineDeployment
metadata:
  name: gpu
spec:
  clusterName: c1
  replicas: 1
  version: v1.32.0
  template:
    provider: inmemory
`)
	l.repo.commit("a pool newer than its control plane")
	l.start()
	const want = "clusters/md.yaml:8:3: spec.version: v1.32.0 is newer than the cluster's control plane (v1.31.2)"
	l.waitFor("c1 blocked at the pool's version line", func() (bool, string) {
		c := l.statusSnapshot().Cluster("c1")
		if c == nil {
			return false, "no status for c1 yet"
		}
		for _, cond := range c.Conditions {
			if cond.Type == planner.CondBlocked {
				return strings.Contains(cond.Message, want), cond.Message
			}
		}
		return false, "c1 is " + string(c.Phase) + ", not Blocked"
	})
}
