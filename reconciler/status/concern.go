package status

import (
	"slices"
	"strings"
)

// FleetConditionsOf are the conditions of fleet.yaml that concern cluster
// name, in fleet.yaml's order. A condition that records what it concerns
// (FleetCondition.Clusters, Providers) concerns the clusters it lists and
// those with a machine of a provider it lists, whatever its message says.
// One that records neither (fleet.yaml of a daemon before they were
// recorded, or a problem of the whole fleet's) is matched by its message,
// as before: it concerns the cluster when the message names the cluster
// or one of its machines (a Reconciling bootstrap error for a cluster
// whose CA was lost), or, False, a provider its machines use ("provider
// local", as TasksAnswered and RecordsRebuilt say). A name counts only as
// a whole word: dev-1 is not named by dev-10's message.
func (s *Snapshot) FleetConditionsOf(name string) []FleetCondition {
	c := s.Cluster(name)
	if c == nil {
		return nil
	}
	var out []FleetCondition
	for _, cd := range s.Fleet.Conditions {
		if concerns(cd, c) {
			out = append(out, cd)
		}
	}
	return out
}

// ClusterDescription is a cluster's status file as it is, so that a
// script reading its fields reads them where they always were, and the
// conditions of fleet.yaml that concern the cluster (FleetConditionsOf)
// under a key of their own, absent when none does: what describe CLUSTER
// -o yaml|json prints and the dashboard's /api/v1/clusters/{name} answers.
type ClusterDescription struct {
	ClusterStatus   `yaml:",inline"`
	FleetConditions []FleetCondition `yaml:"fleetConditions,omitempty" json:"fleetConditions,omitempty"`
}

// DescribeCluster is cluster name's status with the fleet conditions that
// concern it, or nil when the snapshot has no such cluster.
func (s *Snapshot) DescribeCluster(name string) *ClusterDescription {
	c := s.Cluster(name)
	if c == nil {
		return nil
	}
	return &ClusterDescription{ClusterStatus: *c, FleetConditions: s.FleetConditionsOf(name)}
}

func concerns(cd FleetCondition, c *ClusterStatus) bool {
	if cd.recorded() {
		return slices.Contains(cd.Clusters, c.Name) ||
			slices.ContainsFunc(c.Machines, func(m MachineStatus) bool { return slices.Contains(cd.Providers, m.Provider) })
	}
	return mentions(cd.Condition, c)
}

// mentions is how a condition without a record of what it concerns is
// matched: by the words of its message.
func mentions(cd Condition, c *ClusterStatus) bool {
	if namesWord(cd.Message, c.Name) {
		return true
	}
	for _, m := range c.Machines {
		if namesWord(cd.Message, m.Name) {
			return true
		}
	}
	if cd.Status != ConditionFalse {
		return false
	}
	for _, m := range c.Machines {
		if m.Provider != "" && namesWord(cd.Message, "provider "+m.Provider) {
			return true
		}
	}
	return false
}

// namesWord says whether msg holds word with no name character (a letter,
// digit, '-' or '_') right before or after it.
func namesWord(msg, word string) bool {
	for i := 0; word != ""; {
		j := strings.Index(msg[i:], word)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(word)
		if (start == 0 || !nameByte(msg[start-1])) && (end == len(msg) || !nameByte(msg[end])) {
			return true
		}
		i = start + 1
	}
	return false
}

func nameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_'
}
