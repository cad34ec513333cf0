package status

import (
	"bytes"
	"fmt"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitfleet/gitfleet/internal/loose"
	"github.com/gitfleet/gitfleet/planner"
)

// MachineEvent is one change of a machine as the status branch shows it:
// it appeared, changed phase, cause or reason, or left the branch.
type MachineEvent struct {
	Commit  string    // the status commit
	Time    time.Time // its committer date
	Cluster string
	// Machine is the machine's entry after the change; nil once it left
	// the status branch (its delete finished).
	Machine *MachineStatus
	// Deleted is the cluster's note of the delete, with its cause, when
	// the machine left the branch; for a machine that went with its
	// cluster's file, one that says so (ClusterRemovedCause).
	Deleted *DeletedMachine
	// Triggers are the spec commits the status commit names
	// (Gitfleet-Source-Commit trailers).
	Triggers []string
}

// MachineHistory answers "who or what caused this machine to exist or go,
// and when", from Git alone: every change of the machine's phase, cause or
// reason, oldest first. Only cluster files a commit changed, and that name
// the machine, are read.
func MachineHistory(repo *git.Repository, branch, machine string) ([]MachineEvent, error) {
	log, err := Log(repo, branch)
	if err != nil {
		return nil, err
	}
	s := repo.Storer
	cache := map[plumbing.Hash]*ClusterStatus{}
	var out []MachineEvent
	var cur *MachineStatus
	curCluster := ""
	for i := len(log) - 1; i >= 0; i-- {
		c := log[i]
		before, err := fileHashes(s, c.parentTree)
		if err != nil {
			return nil, err
		}
		after, err := fileHashes(s, c.tree)
		if err != nil {
			return nil, err
		}
		var found *MachineStatus
		foundCluster := ""
		touched := false // the file that held the machine changed
		for p, h := range after {
			if p == FleetFile || before[p] == h {
				continue
			}
			name := clusterName(p)
			touched = touched || name == curCluster
			data, err := loose.ReadBlob(s, h)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			if !bytes.Contains(data, []byte(machine)) {
				continue
			}
			cs, err := clusterAt(s, c.tree, name, cache)
			if err != nil {
				return nil, err
			}
			for j := range cs.Machines {
				if cs.Machines[j].Name == machine {
					found, foundCluster = &cs.Machines[j], name
				}
			}
		}
		if cur != nil {
			if _, still := after[ClusterPath(curCluster)]; !still {
				touched = true
			}
		}
		var deleted *DeletedMachine
		if found == nil && cur != nil && touched {
			cs, err := clusterAt(s, c.tree, curCluster, cache)
			switch {
			case err == nil && cs != nil:
				for j := range cs.Deleted {
					if cs.Deleted[j].Name == machine {
						deleted = &cs.Deleted[j]
					}
				}
			case err == nil && wentWithItsCluster(cur):
				// The cluster's file went with the machine: its cluster
				// was removed from the fleet, as its trail says too
				// (Transitions). One shown Deleting for a cause of its
				// own went for that cause, which its Deleting event said.
				deleted = &DeletedMachine{Name: machine, Role: cur.Role, Deployment: cur.Deployment,
					Cause: ClusterRemovedCause, Reason: planner.DeletedClusterRemoved, Deleted: c.Time.UTC().Truncate(time.Second)}
			}
		}
		switch {
		case found != nil && (cur == nil || changedForAudit(cur, found)):
			out = append(out, MachineEvent{Commit: c.Hash, Time: c.Time, Cluster: foundCluster, Machine: found, Triggers: c.SourceCommits})
			cur, curCluster = found, foundCluster
		case found == nil && cur != nil && touched:
			out = append(out, MachineEvent{Commit: c.Hash, Time: c.Time, Cluster: curCluster, Deleted: deleted, Triggers: c.SourceCommits})
			cur, curCluster = nil, ""
		}
	}
	return out, nil
}

// changedForAudit: what an auditor follows changed.
func changedForAudit(a, b *MachineStatus) bool {
	return a.Phase != b.Phase || a.Cause != b.Cause || a.Reason != b.Reason || a.Unhealthy != b.Unhealthy
}

// HealthProblem is why m is unhealthy: its Healthy condition's reason and
// message, or only its message for a status written before the condition;
// both empty for a healthy machine.
func (m *MachineStatus) HealthProblem() (reason, message string) {
	if !m.Unhealthy {
		return "", ""
	}
	for _, c := range m.Conditions {
		if c.Type == ConditionHealthy && c.Status != ConditionTrue {
			return c.Reason, c.Message
		}
	}
	return "", m.Message
}

// HealthText is reason and message as history prints them after
// "unhealthy: ".
func HealthText(reason, message string) string {
	switch {
	case reason != "" && message != "":
		return reason + ": " + message
	case reason != "":
		return reason
	}
	return message
}
