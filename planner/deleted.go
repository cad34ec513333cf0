package planner

import "strings"

// Why a machine was deleted, in a word: the reason of its entry in its
// cluster's list of deleted machines (docs/status.md), which the daemon
// reads from its delete's cause with DeleteReason. A machine that was
// gone has its provider's reason there instead (NodeExited,
// MachineMissing).
const (
	// DeletedRemediated: a health check found it unhealthy, or its
	// provider reported it Failed.
	DeletedRemediated = "Remediated"
	// DeletedScaledDown: its pool was made smaller.
	DeletedScaledDown = "ScaledDown"
	// DeletedRollingUpdate: a machine of the new version or template
	// took its place.
	DeletedRollingUpdate = "RollingUpdate"
	// DeletedDeploymentRemoved: its MachineDeployment left the cluster.
	DeletedDeploymentRemoved = "DeploymentRemoved"
	// DeletedClusterRemoved: its cluster left the fleet.
	DeletedClusterRemoved = "ClusterRemoved"
)

// deleteCauses are how the reasons of the planner's delete steps begin
// (pools.go, cluster.go), and the word each stands for. A test of every
// delete the simulator carries out holds the two together.
var deleteCauses = []struct{ prefix, word string }{
	{remediatePrefix, DeletedRemediated},
	{remediateControlPlanePrefix, DeletedRemediated},
	{"scale down ", DeletedScaledDown},
	{"rolling update of ", DeletedRollingUpdate},
	{"MachineDeployment ", DeletedDeploymentRemoved},
	{"cluster removed from the fleet", DeletedClusterRemoved},
}

// The beginnings of a remediation delete's reason, before what the
// health check saw.
const (
	remediatePrefix             = "remediate: "
	remediateControlPlanePrefix = "remediate control plane: "
)

// DeleteReason is the word for why a delete step was planned (one of the
// Deleted constants), read from the step's Reason, which a machine's
// record keeps as its cause while it is deleted; "" for a reason the
// planner does not give a delete.
func DeleteReason(cause string) string {
	for _, c := range deleteCauses {
		if strings.HasPrefix(cause, c.prefix) {
			return c.word
		}
	}
	return ""
}

// RemovalOf is the Removal of a delete step whose Reason was cause, of a
// machine whose reason was reason — its provider's when it was gone
// (NodeExited), as its entry in its cluster's deleted list keeps it, or
// DeleteReason's word: "gone: NodeExited" or "remediated: <what the health
// check saw>"; "" for a delete that removed no machine for its health or
// absence. A new leader rebuilds from it the removed machines its
// ClusterInput.Removed names, which the last leader kept in memory.
func RemovalOf(cause, reason string) string {
	seen, ok := strings.CutPrefix(cause, remediatePrefix)
	if !ok {
		if seen, ok = strings.CutPrefix(cause, remediateControlPlanePrefix); !ok {
			return ""
		}
	}
	if reason != "" && reason != DeletedRemediated {
		return "gone: " + reason
	}
	return "remediated: " + seen
}
