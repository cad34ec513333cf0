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
	// Records are the decisions of earlier plans, as persisted.
	Records Records
	Now     time.Time
	NewName func(cluster, pool string) string
	Backoff Backoff
	// Scale holds, by cluster, the sizes asked for autoscaled pools
	// (ClusterInput.Scale).
	Scale map[string]map[string]ScaleRequest
	// Removed holds, by cluster, the machines removed for their health
	// and not replaced yet (ClusterInput.Removed).
	Removed map[string][]Removed
	// Locate places the problems of Blocked conditions (ClusterInput.Locate).
	Locate Locator
}

// Result is what is allowed to happen right now, and why the rest is not.
type Result struct {
	Steps    []Step          `json:"steps"`
	Clusters []ClusterStatus `json:"clusters"`
	Classes  []ClassRollout  `json:"classes"`
	// Records are the records this plan changed (an empty ClusterRecord:
	// delete it); persist them before carrying out any step.
	Records Records `json:"records"`
	// Wake is when time alone next changes the plan (a backoff ends).
	Wake time.Time `json:"wake,omitzero"`
}

// Step is one task for a provider.
type Step struct {
	Op      wire.Operation `json:"op"`
	Machine wire.Machine   `json:"machine"`
	Reason  string         `json:"reason"`
	// Removal is set on the delete of a machine removed for its health or
	// its absence: why, as its replacement's Reason will say it
	// ("gone: NodeExited", "remediated: no heartbeat for 2m0s (…)").
	Removal string `json:"removal,omitempty"`
	// Replaces is set on the create of a machine that replaces one
	// removed for its health or absence: that machine's name.
	Replaces string `json:"replaces,omitempty"`
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
	// PhaseWaiting: a newer class revision waits for the cluster and
	// nothing moves it there by itself: its class's rollout halted. A new
	// cluster waits so with no machine.
	PhaseWaiting = "Waiting"
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
	CondBackingOff         = "BackingOff"
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
	// Rollout is the cluster's place in its class's rollout (nil before
	// its first admission).
	Rollout *ClusterRollout `json:"rollout,omitempty"`
}

// ClusterRollout is a cluster's admission, for its status.
type ClusterRollout struct {
	// Revision is the class revision the cluster is admitted to: what its
	// machines run or move to.
	Revision   string    `json:"classRevision"`
	Wave       string    `json:"wave,omitempty"`
	AdmittedAt time.Time `json:"admittedAt"`
	// State is Progressing, Updating, Done or Failed, or Waiting when a
	// newer revision (PendingRevision) waits for the cluster's wave, or
	// Paused when the cluster is paused and the rollout of a newer one
	// passes it over.
	State           string `json:"state"`
	Reason          string `json:"reason,omitempty"`
	PendingRevision string `json:"pendingRevision,omitempty"`
}

// RolloutWaiting is ClusterRollout.State while a newer class revision waits
// for the cluster's wave; RolloutPaused while the cluster is paused and its
// class's rollout of a newer revision (PendingRevision) passes it over.
const (
	RolloutWaiting = "Waiting"
	RolloutPaused  = "Paused"
)

// rolloutStatus is a cluster's place in its class's rollout: its
// admission's, else (a cluster added during a halt, one whose records are
// lost) the wave its class's waves put it in (wave), so that it is listed
// in that wave, not in none.
func rolloutStatus(a *Admission, g *Gate, wave string) *ClusterRollout {
	if a == nil && !g.Waiting && !g.Paused {
		return nil
	}
	r := &ClusterRollout{Wave: wave}
	if a != nil {
		r.Revision, r.Wave, r.AdmittedAt, r.State, r.Reason = a.Revision, a.Wave, a.AdmittedAt, a.State, a.Reason
	}
	switch {
	case g.Waiting:
		r.State, r.PendingRevision, r.Reason = RolloutWaiting, g.PendingRevision, g.Reason
	case g.Paused:
		r.State, r.PendingRevision, r.Reason = RolloutPaused, g.PendingRevision, g.Reason
	}
	return r
}

// pool returns the status of pool name (PoolName), or nil.
func (s *ClusterStatus) pool(name string) *PoolStatus {
	if name == ControlPlanePool {
		return &s.ControlPlane
	}
	for i := range s.Deployments {
		if s.Deployments[i].Name == name {
			return &s.Deployments[i]
		}
	}
	return nil
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
	// Failures counts the creates that failed in a row; LastFailure says
	// the last one and why, NextRetry when the pool creates again.
	Failures    int       `json:"failures,omitempty"`
	LastFailure string    `json:"lastFailure,omitempty"`
	NextRetry   time.Time `json:"nextRetry,omitzero"`
	// Autoscale is set for a pool the daemon sizes within the autoscaler
	// annotations' bounds.
	Autoscale *AutoscaleStatus `json:"autoscale,omitempty"`
}

// AutoscaleStatus is an autoscaled pool's bounds and the last scale
// request (none yet: By is empty, the pool runs its minimum).
type AutoscaleStatus struct {
	Min int       `json:"min"`
	Max int       `json:"max"`
	By  string    `json:"by,omitempty"`
	At  time.Time `json:"at,omitzero"`
}

// ClassRollout is the state of one class's fleet rollout.
type ClassRollout struct {
	Class string `json:"class"`
	// Revision is the class revision rolling out, since Started.
	Revision    string       `json:"revision"`
	Started     time.Time    `json:"started"`
	CurrentWave string       `json:"currentWave,omitempty"` // "" when nothing is rolling out
	Waves       []WaveStatus `json:"waves"`
	Failed      []string     `json:"failed,omitempty"`
	Halted      bool         `json:"halted,omitempty"`
	Reason      string       `json:"reason,omitempty"`
	// Change started the rollout; MaxFailures halts it.
	Change      Change `json:"change,omitzero"`
	MaxFailures int    `json:"maxFailures"`
}

// WaveStatus counts one wave's clusters.
type WaveStatus struct {
	Name     string   `json:"name"`
	Clusters []string `json:"clusters"`
	Done     int      `json:"done"`
	Updating []string `json:"updating,omitempty"`
	Waiting  []string `json:"waiting,omitempty"`
	// Paused are its paused clusters the rollout passes over (not on the
	// revision); a wave whose every cluster is so is passed over.
	Paused []string `json:"paused,omitempty"`
	// MaxConcurrent is the wave's limit as written; "" for none.
	MaxConcurrent string `json:"maxConcurrent,omitempty"`
}
