// Package status writes what the daemon observed back to Git, on a branch of
// the fleet repository (gitfleet/status by default), and reads it again for
// describe, history, plan previews and a restarting daemon.
//
// The branch holds clusters/<name>.yaml (one ClusterStatus each) and
// fleet.yaml (FleetStatus). Files hold no timestamps that change on their own,
// lists are sorted, so a file changes only when something a user would notice
// changed. docs/status.md documents the format.
package status

import "time"

// Paths on the status branch.
const (
	ClustersDir = "clusters"
	FleetFile   = "fleet.yaml"
)

// ClusterPath is the file of cluster name on the status branch.
func ClusterPath(name string) string { return ClustersDir + "/" + name + ".yaml" }

// Cluster phases as the planner writes them; it also writes RollingOut,
// Paused and Blocked (docs/status.md).
const (
	ClusterProvisioning = "Provisioning"
	ClusterProvisioned  = "Provisioned"
	ClusterDeleting     = "Deleting"
)

// Condition statuses.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// Condition types the daemon sets, as in Cluster API.
const (
	ConditionHealthy             = "Healthy"
	ConditionReconciling         = "Reconciling"
	ConditionReady               = "Ready"
	ConditionControlPlaneReady   = "ControlPlaneReady"
	ConditionWorkersReady        = "WorkersReady"
	ConditionRollingOut          = "RollingOut"
	ConditionRemediationAllowed  = "RemediationAllowed"
	ConditionTopologyReconciled  = "TopologyReconciled"
	ConditionMachinesHealthy     = "MachinesHealthy"
	ConditionPaused              = "Paused"
	ConditionRolloutWaveHealthy  = "RolloutWaveHealthy"
	ConditionRolloutHalted       = "RolloutHalted"
	ConditionInfrastructureReady = "InfrastructureReady"
	// ConditionRecordsRebuilt is False on fleet.yaml while a leader that
	// found its machines store empty waits for the providers' inventories.
	ConditionRecordsRebuilt = "RecordsRebuilt"
	// ConditionTasksAnswered is False on fleet.yaml while a provider's
	// tasks go unanswered past the task timeout: no worker of it runs, or
	// none reaches NATS.
	ConditionTasksAnswered = "TasksAnswered"
)

// ClusterStatus is clusters/<name>.yaml.
type ClusterStatus struct {
	Name string `yaml:"name" json:"name"`
	// Class is the ClusterClass the cluster instantiates.
	Class string `yaml:"class,omitempty" json:"class,omitempty"`
	// Version is the Kubernetes version the cluster is converging to.
	Version string `yaml:"version,omitempty" json:"version,omitempty"`
	Phase   string `yaml:"phase" json:"phase"`
	Paused  bool   `yaml:"paused,omitempty" json:"paused,omitempty"`
	// Created is when the cluster's status was first written, to the
	// second; the Writer keeps it, so a cluster's age never goes back
	// when its machines are replaced.
	Created time.Time `yaml:"created,omitempty" json:"created,omitzero"`
	// Conditions are sorted by type. The Writer sets LastTransitionTime
	// of a condition the caller left without one: kept while its status
	// stays the same (or is back to the one the branch has before the
	// next commit), now when it changes.
	Conditions []Condition `yaml:"conditions,omitempty" json:"conditions,omitempty"`
	// ControlPlane counts the control plane machines.
	ControlPlane Replicas `yaml:"controlPlane" json:"controlPlane"`
	// Deployments are the worker pools, sorted by name.
	Deployments []DeploymentStatus `yaml:"deployments,omitempty" json:"deployments,omitempty"`
	// Machines are every machine of the cluster, sorted by name.
	Machines []MachineStatus `yaml:"machines,omitempty" json:"machines,omitempty"`
	// Rollout is the cluster's place in its class's rollout: the class
	// revision it was admitted to and how far it got.
	Rollout *Rollout `yaml:"rollout,omitempty" json:"rollout,omitempty"`
	// Deleted are the machines deleted last (at most MaxDeleted, newest
	// first), with why: a delete often finishes before a status commit
	// shows the machine Deleting, and Git must still say why it went.
	Deleted []DeletedMachine `yaml:"deleted,omitempty" json:"deleted,omitempty"`
}

// MaxDeleted is how many deleted machines a cluster's status keeps.
const MaxDeleted = 5

// DeletedMachine is a machine whose delete finished.
type DeletedMachine struct {
	Name string `yaml:"name" json:"name"`
	// Role and Deployment are the machine's, as in its entry under
	// machines: the pool it left (a new leader names it in the cause of
	// the machine that replaces it). Lists written before they were kept
	// have neither.
	Role       string `yaml:"role,omitempty" json:"role,omitempty"`
	Deployment string `yaml:"deployment,omitempty" json:"deployment,omitempty"`
	// Cause is why it was deleted; Reason the same in a word: the
	// provider's reason for a machine that was gone (NodeExited,
	// MachineMissing), else the planner's (planner.DeleteReason:
	// Remediated, ScaledDown, …). Lists written before it had a word for
	// every entry have none but for machines that were gone.
	Cause   string    `yaml:"cause,omitempty" json:"cause,omitempty"`
	Reason  string    `yaml:"reason,omitempty" json:"reason,omitempty"`
	Deleted time.Time `yaml:"deleted" json:"deleted"`
}

// Rollout is a cluster's admission to a class revision.
type Rollout struct {
	// ClassRevision is the class revision the cluster was admitted to: its
	// machines run it or move to it.
	ClassRevision string `yaml:"classRevision,omitempty" json:"classRevision,omitempty"`
	// Wave is the rollout wave the cluster belongs to.
	Wave string `yaml:"wave,omitempty" json:"wave,omitempty"`
	// AdmittedAt is when the cluster was admitted to ClassRevision.
	AdmittedAt time.Time `yaml:"admittedAt,omitempty" json:"admittedAt,omitzero"`
	// State is Progressing (its wave admitted it), Updating (admitted
	// without a wave: new, or changed in its own files), Done, Failed, or
	// Waiting (PendingRevision waits for the cluster's wave).
	State string `yaml:"state" json:"state"`
	// Reason says which machine failed and why (Failed), or why the
	// cluster waits (Waiting).
	Reason string `yaml:"reason,omitempty" json:"reason,omitempty"`
	// PendingRevision is a newer class revision waiting for the wave.
	PendingRevision string `yaml:"pendingRevision,omitempty" json:"pendingRevision,omitempty"`
}

// Condition is one observation about a cluster, like Cluster API's.
type Condition struct {
	Type    string `yaml:"type" json:"type"`
	Status  string `yaml:"status" json:"status"` // True, False, Unknown
	Reason  string `yaml:"reason,omitempty" json:"reason,omitempty"`
	Message string `yaml:"message,omitempty" json:"message,omitempty"`
	// LastTransitionTime is when the condition last changed status, to the
	// second; set on conditions that say since when something is wrong.
	LastTransitionTime time.Time `yaml:"lastTransitionTime,omitempty" json:"lastTransitionTime,omitzero"`
}

// FleetCondition is one of fleet.yaml's conditions: the daemon's own, with
// what it concerns as the daemon recorded it when it set the condition, so
// that describe finds the conditions of a cluster by these fields rather
// than by the words of the message. A condition with
// neither field (written before they existed, or about the whole fleet:
// NATS, the status branch) is matched by its message
// (Snapshot.FleetConditionsOf).
type FleetCondition struct {
	Condition `yaml:",inline"`
	// Clusters are the clusters the condition is about: those whose own
	// operation failed (Reconciling False: a machine's bootstrap data or
	// join, its record, a task of it, a rollout record or scale request),
	// one for each problem that is a cluster's. Sorted.
	Clusters []string `yaml:"clusters,omitempty" json:"clusters,omitempty"`
	// Providers are the providers the condition is about (TasksAnswered:
	// whose tasks no worker answers; RecordsRebuilt: whose inventory is
	// awaited); it concerns every cluster with a machine of one. Sorted.
	Providers []string `yaml:"providers,omitempty" json:"providers,omitempty"`
}

// recorded says whether the daemon recorded what the condition concerns.
func (c FleetCondition) recorded() bool { return len(c.Clusters) > 0 || len(c.Providers) > 0 }

// condition is the condition itself, for code shared with Condition.
func (c *Condition) condition() *Condition { return c }

// Replicas counts the machines of a control plane or a worker pool.
type Replicas struct {
	// Version is the Kubernetes version the group is converging to.
	Version string `yaml:"version,omitempty" json:"version,omitempty"`
	// Desired is the size the spec asks for.
	Desired int `yaml:"desired" json:"desired"`
	// Replicas is how many machines exist (may exceed Desired during a surge).
	Replicas int `yaml:"replicas" json:"replicas"`
	// Ready machines are Running and healthy.
	Ready int `yaml:"ready" json:"ready"`
	// Updated machines have the desired version and template.
	Updated int `yaml:"updated" json:"updated"`
	// Unavailable is Desired minus the ready machines, never below zero.
	Unavailable int `yaml:"unavailable" json:"unavailable"`
	// Backoff is set while creates of the group fail.
	Backoff *Backoff `yaml:"backoff,omitempty" json:"backoff,omitempty"`
	// Autoscale is set for a pool the daemon sizes within the autoscaler
	// annotations' bounds, not Git.
	Autoscale *Autoscale `yaml:"autoscale,omitempty" json:"autoscale,omitempty"`
}

// Autoscale is an autoscaled pool's bounds and the last scale request:
// who asked (and from where), and when; none yet: the pool runs its
// minimum.
type Autoscale struct {
	Min int       `yaml:"min" json:"min"`
	Max int       `yaml:"max" json:"max"`
	By  string    `yaml:"by,omitempty" json:"by,omitempty"`
	At  time.Time `yaml:"at,omitempty" json:"at,omitzero"`
}

// Backoff says that creates of a group failed and when it tries again.
type Backoff struct {
	// Failures counts the creates that failed in a row.
	Failures int `yaml:"failures" json:"failures"`
	// LastFailure names the last failed machine and what its provider said.
	LastFailure string `yaml:"lastFailure" json:"lastFailure"`
	// NextRetry is when the group creates a machine again.
	NextRetry time.Time `yaml:"nextRetry" json:"nextRetry"`
}

// DeploymentStatus is one worker pool.
type DeploymentStatus struct {
	Name     string `yaml:"name" json:"name"`
	Replicas `yaml:",inline" json:",inline"`
}

// MachineStatus is one machine.
type MachineStatus struct {
	Name string `yaml:"name" json:"name"`
	// Role is control-plane or worker.
	Role string `yaml:"role" json:"role"`
	// Deployment is the worker pool; empty for the control plane.
	Deployment string `yaml:"deployment,omitempty" json:"deployment,omitempty"`
	Phase      string `yaml:"phase" json:"phase"`
	Version    string `yaml:"version,omitempty" json:"version,omitempty"`
	Provider   string `yaml:"provider,omitempty" json:"provider,omitempty"`
	ProviderID string `yaml:"providerID,omitempty" json:"providerID,omitempty"`
	// Worker is the worker that reported the machine last; for a provider
	// whose machines live on one host (local), the host's worker, which a
	// new leader of an empty store waits for before it plans.
	Worker string `yaml:"worker,omitempty" json:"worker,omitempty"`
	// Addresses are sorted.
	Addresses    []string `yaml:"addresses,omitempty" json:"addresses,omitempty"`
	TemplateHash string   `yaml:"templateHash,omitempty" json:"templateHash,omitempty"`
	// Unhealthy is true when the machine's Healthy condition is False.
	Unhealthy bool `yaml:"unhealthy,omitempty" json:"unhealthy,omitempty"`
	// Reason is a CamelCase word for why the machine is in its phase when
	// its own task did not put it there (MachineMissing).
	Reason string `yaml:"reason,omitempty" json:"reason,omitempty"`
	// Cause is why the machine's current task was decided: why it was
	// created or, once Deleting, why it goes.
	Cause string `yaml:"cause,omitempty" json:"cause,omitempty"`
	// Message says why a machine failed or is unhealthy.
	Message string `yaml:"message,omitempty" json:"message,omitempty"`
	// Conditions hold Healthy (False, with reason and since when) for a
	// machine whose heartbeats stopped or say it is unhealthy, whether or
	// not a MachineHealthCheck selects it.
	Conditions []Condition `yaml:"conditions,omitempty" json:"conditions,omitempty"`
	// SourceCommit is the fleet repository commit whose plan created the
	// machine.
	SourceCommit string `yaml:"sourceCommit,omitempty" json:"sourceCommit,omitempty"`
	// Created is when the machine was created; it never changes, so it
	// costs no churn, and describe shows an age from it.
	Created time.Time `yaml:"created,omitempty" json:"created,omitzero"`
	// Joined is when its bootstrap token was accepted and it joined its
	// cluster (the join the leader reviews); absent until then.
	Joined time.Time `yaml:"joined,omitempty" json:"joined,omitzero"`
}

// FleetStatus is fleet.yaml.
type FleetStatus struct {
	// RefreshedAt is when the daemon last rewrote the status although
	// nothing changed (Options.Refresh), so that an old status commit
	// means the daemon is not running, not only that the fleet is quiet.
	RefreshedAt time.Time `yaml:"refreshedAt,omitempty" json:"refreshedAt,omitzero"`
	// LastApplied is the newest fleet repository commit the daemon accepted.
	LastApplied *SourceCommit `yaml:"lastApplied,omitempty" json:"lastApplied,omitempty"`
	// LastRejected is the newest commit that failed validation, with why.
	// It is cleared when a newer commit is applied.
	LastRejected *Rejection `yaml:"lastRejected,omitempty" json:"lastRejected,omitempty"`
	// Conditions say what the daemon cannot do: Reconciling False while its
	// loop fails to record machines, publish tasks or write status.
	Conditions []FleetCondition `yaml:"conditions,omitempty" json:"conditions,omitempty"`
	// Orphans are machines a provider has and no record wants, sorted.
	Orphans []Orphan `yaml:"orphans,omitempty" json:"orphans,omitempty"`
	// Rollouts are the classes' fleet rollouts as the daemon decides them,
	// sorted by class: what each wave has done and why the rollout waits
	// or halted. Each cluster's own part is in its file (Rollout).
	Rollouts []ClassRollout `yaml:"rollouts,omitempty" json:"rollouts,omitempty"`
	// Counts are computed by the Writer from the cluster files; what a
	// caller puts here is replaced.
	Counts `yaml:",inline" json:",inline"`
}

// Orphan is a machine a provider reported that no record wants: a stray,
// or one whose record was lost. It is deleted after a grace period unless
// the daemon runs with --orphans report.
type Orphan struct {
	Cluster  string `yaml:"cluster" json:"cluster"`
	Machine  string `yaml:"machine" json:"machine"`
	Provider string `yaml:"provider" json:"provider"`
	// Worker holds the machine, for providers whose machines live on one
	// host.
	Worker     string    `yaml:"worker,omitempty" json:"worker,omitempty"`
	ProviderID string    `yaml:"providerID,omitempty" json:"providerID,omitempty"`
	Since      time.Time `yaml:"since" json:"since"`
	// Action is "delete" (after the grace period) or "report".
	Action string `yaml:"action" json:"action"`
}

// SourceCommit names a commit of the fleet repository.
type SourceCommit struct {
	Commit string `yaml:"commit" json:"commit"`
	// Subject is the first line of the commit message.
	Subject string `yaml:"subject,omitempty" json:"subject,omitempty"`
	// Author is "Name <email>", where it is shown (a rollout's change).
	Author string `yaml:"author,omitempty" json:"author,omitempty"`
}

// ClassRollout is one class's fleet rollout: its revision moving through
// the waves in order.
type ClassRollout struct {
	Class string `yaml:"class" json:"class"`
	// Revision is the class revision rolling out, since Started.
	Revision string    `yaml:"revision" json:"revision"`
	Started  time.Time `yaml:"started,omitempty" json:"started,omitzero"`
	// Change is the spec commit at which the daemon first saw Revision
	// (the newest one, when several landed together); absent for
	// rollouts started before it was recorded.
	Change      *SourceCommit `yaml:"change,omitempty" json:"change,omitempty"`
	MaxFailures int           `yaml:"maxFailures" json:"maxFailures"`
	// CurrentWave is the first wave not done; "" when nothing moves.
	CurrentWave string `yaml:"currentWave,omitempty" json:"currentWave,omitempty"`
	// Halted: failures reached maxFailures; no other cluster is admitted
	// until the class changes again. Reason says so, or how far the
	// current wave is.
	Halted bool   `yaml:"halted,omitempty" json:"halted,omitempty"`
	Reason string `yaml:"reason,omitempty" json:"reason,omitempty"`
	// Failed are the clusters that failed on Revision.
	Failed []string      `yaml:"failed,omitempty" json:"failed,omitempty"`
	Waves  []WaveRollout `yaml:"waves" json:"waves"`
}

// WaveRollout counts one wave's clusters on the class's revision.
type WaveRollout struct {
	Name string `yaml:"name" json:"name"`
	// MaxConcurrent is the wave's limit as written (3, 25%); "" for none.
	MaxConcurrent string `yaml:"maxConcurrent,omitempty" json:"maxConcurrent,omitempty"`
	Clusters      int    `yaml:"clusters" json:"clusters"`
	Done          int    `yaml:"done" json:"done"`
	Updating      int    `yaml:"updating" json:"updating"`
	Waiting       int    `yaml:"waiting" json:"waiting"`
	// Paused counts its paused clusters the rollout passes over; a wave
	// whose every cluster is paused is passed over.
	Paused int `yaml:"paused,omitempty" json:"paused,omitempty"`
}

// Rejection is a commit that did not validate.
type Rejection struct {
	SourceCommit `yaml:",inline" json:",inline"`
	// Errors are formatted path:line:col: field: message, sorted.
	Errors []string `yaml:"errors" json:"errors"`
}

// Counts summarise the fleet.
type Counts struct {
	Clusters          int            `yaml:"clusters" json:"clusters"`
	Machines          int            `yaml:"machines" json:"machines"`
	ClustersByClass   map[string]int `yaml:"clustersByClass,omitempty" json:"clustersByClass,omitempty"`
	ClustersByVersion map[string]int `yaml:"clustersByVersion,omitempty" json:"clustersByVersion,omitempty"`
	ClustersByPhase   map[string]int `yaml:"clustersByPhase,omitempty" json:"clustersByPhase,omitempty"`
	MachinesByPhase   map[string]int `yaml:"machinesByPhase,omitempty" json:"machinesByPhase,omitempty"`
	MachinesByVersion map[string]int `yaml:"machinesByVersion,omitempty" json:"machinesByVersion,omitempty"`
}

// Snapshot is everything on the status branch at one commit.
type Snapshot struct {
	// Commit is the status branch commit read.
	Commit   string          `yaml:"commit" json:"commit"`
	Fleet    FleetStatus     `yaml:"fleet" json:"fleet"`
	Clusters []ClusterStatus `yaml:"clusters" json:"clusters"` // sorted by name
}

// Cluster returns the status of cluster name, or nil.
func (s *Snapshot) Cluster(name string) *ClusterStatus {
	for i := range s.Clusters {
		if s.Clusters[i].Name == name {
			return &s.Clusters[i]
		}
	}
	return nil
}

// Origin is what caused a change: the fleet repository commit and the plan.
// They become the trailers of the status commit that carries the change.
type Origin struct {
	SourceCommit string
	PlanID       string
}
