package planner

import (
	"time"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Input is everything Plan needs. NewName names a new machine of a pool
// (PoolName); the daemon gives random suffixes like Cluster API, tests a
// counter, so the planner stays deterministic. A nil NewName numbers
// machines from 1 per cluster, which only suits a preview.
type Input struct {
	Desired  *Desired
	Observed []ObservedMachine
	Now      time.Time
	NewName  func(cluster, pool string) string
}

// Result is what is allowed to happen right now, and why the rest is not.
type Result struct {
	Steps    []Step          `json:"steps"`
	Clusters []ClusterStatus `json:"clusters"`
	Classes  []ClassRollout  `json:"classes"`
}

// Step is one task for a provider.
type Step struct {
	Op      wire.Operation `json:"op"`
	Machine wire.Machine   `json:"machine"`
	Reason  string         `json:"reason"`
}

// Cluster phases.
const (
	PhaseProvisioning = "Provisioning"
	PhaseProvisioned  = "Provisioned"
	PhaseRollingOut   = "RollingOut"
	PhasePaused       = "Paused"
	PhaseBlocked      = "Blocked"
	PhaseDeleting     = "Deleting"
	PhaseDeleted      = "Deleted"
)

// Condition types.
const (
	CondReady              = "Ready"
	CondRollingOut         = "RollingOut"
	CondPaused             = "Paused"
	CondBlocked            = "Blocked"
	CondWaitingForWave     = "WaitingForWave"
	CondRolloutHalted      = "RolloutHalted"
	CondRemediating        = "Remediating"
	CondRemediationBlocked = "RemediationBlocked"
	CondDeleting           = "Deleting"
)

// ClusterStatus is one cluster's phase and conditions, for the status branch.
type ClusterStatus struct {
	Name         string       `json:"name"`
	Class        string       `json:"class,omitempty"`
	Phase        string       `json:"phase"`
	Version      string       `json:"version,omitempty"` // desired
	Wave         string       `json:"wave,omitempty"`
	Conditions   []Condition  `json:"conditions,omitempty"`
	ControlPlane PoolStatus   `json:"controlPlane"`
	Deployments  []PoolStatus `json:"deployments,omitempty"`
}

// Condition is true when present; Message says why.
type Condition struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Has reports whether the status carries a condition of type t.
func (s *ClusterStatus) Has(t string) bool {
	for _, c := range s.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

// PoolStatus counts one pool's machines.
type PoolStatus struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
	Machines int    `json:"machines"`
	Ready    int    `json:"ready"`
	UpToDate int    `json:"upToDate"`
	Version  string `json:"version,omitempty"` // what new machines get now
}

// ClassRollout is the state of one class's fleet rollout.
type ClassRollout struct {
	Class       string       `json:"class"`
	CurrentWave string       `json:"currentWave,omitempty"` // "" when nothing is rolling out
	Waves       []WaveStatus `json:"waves"`
	Failed      []string     `json:"failed,omitempty"`
	Halted      bool         `json:"halted,omitempty"`
	Reason      string       `json:"reason,omitempty"`
}

// WaveStatus counts one wave's clusters.
type WaveStatus struct {
	Name     string   `json:"name"`
	Clusters []string `json:"clusters"`
	Done     int      `json:"done"`
	Updating []string `json:"updating,omitempty"`
	Waiting  []string `json:"waiting,omitempty"`
}
