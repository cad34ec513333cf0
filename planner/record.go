package planner

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// Records are the decisions earlier plans took, which the caller persists
// and hands back: what each cluster was admitted to and how its pools back
// off, and each class's current rollout. The planner never infers them from
// machines; it only moves them forward.
type Records struct {
	Clusters map[string]ClusterRecord `json:"clusters,omitempty"`
	Rollouts map[string]RolloutRecord `json:"rollouts,omitempty"`
}

// ClusterRecord is what the planner decided about one cluster.
type ClusterRecord struct {
	Cluster string `json:"cluster"`
	// Admission is the class revision the cluster is admitted to; nil
	// until the planner first admits it.
	Admission *Admission `json:"admission,omitempty"`
	// Backoff holds the pools whose creates failed, sorted by pool.
	Backoff []PoolBackoff `json:"backoff,omitempty"`
}

// Admission states.
const (
	// AdmissionProgressing: its wave admitted the cluster to a new class
	// revision, and it is moving to it.
	AdmissionProgressing = "Progressing"
	// AdmissionUpdating: the cluster moves to a revision without waiting
	// for a wave: it is new, or the change is in its own files.
	AdmissionUpdating = "Updating"
	// AdmissionDone: every pool runs the admitted templates, ready.
	AdmissionDone = "Done"
	// AdmissionFailed: a machine created for the admitted revision failed
	// or became unhealthy before the cluster was done.
	AdmissionFailed = "Failed"
)

// Admission records that a cluster was admitted to a class revision. From
// then on the planner moves the cluster's machines to the pools recorded
// here, and to nothing else, until it admits the cluster to another
// revision: a cluster that waits for its wave keeps creating replacements
// and scale-ups with the templates it was admitted to last, and keeps
// acting on the rules it was admitted with (strategies, rollout.after,
// health checks...). Only the sizes (replicas) and spec.paused are the
// desired cluster's at once.
type Admission struct {
	// Revision is the class revision (DesiredClass.Revision).
	Revision   string    `json:"revision"`
	Wave       string    `json:"wave,omitempty"`
	AdmittedAt time.Time `json:"admittedAt"`
	State      string    `json:"state"`
	// Reason says which machine failed and why (State Failed).
	Reason   string    `json:"reason,omitempty"`
	FailedAt time.Time `json:"failedAt,omitzero"`
	// Version is the control plane's version at this revision.
	Version string `json:"version"`
	// Pools are the templates of the control plane (Name "") and of each
	// worker pool at this revision.
	Pools []PoolTemplate `json:"pools"`
	// Rules says the admission holds the pools' Rules, HealthChecks and
	// KubernetesVersions. One recorded before gitfleet recorded them has
	// none: it is read with the desired cluster's (upgraded).
	Rules bool `json:"rules,omitempty"`
	// HealthChecks are the cluster's health checks at this revision: its
	// class's, its own overrides and the MachineHealthChecks naming it.
	HealthChecks []HealthCheck `json:"healthChecks,omitempty"`
	// KubernetesVersions are the class's versions a chained upgrade
	// passes through at this revision.
	KubernetesVersions []string `json:"kubernetesVersions,omitempty"`
}

// PoolTemplate is what machines of one pool are made of at one revision.
type PoolTemplate struct {
	Name          string          `json:"name,omitempty"` // "" for the control plane
	Version       string          `json:"version"`
	Provider      string          `json:"provider"`
	Spec          json.RawMessage `json:"spec,omitempty"`
	FailureDomain string          `json:"failureDomain,omitempty"`
	// Hash is the pool's TemplateHash at Version.
	Hash string `json:"hash"`
	// Rules are how the pool's machines are replaced, removed, named and
	// labelled at this revision.
	Rules PoolRules `json:"rules,omitzero"`
}

// PoolRules are all a pool acts on at one revision besides its template
// and its size: its strategy, rollout.after, deletion order,
// minReadySeconds, machine naming, remediation bound and its machines'
// labels and annotations (which its health checks select by).
type PoolRules struct {
	Strategy      StrategySpec           `json:"strategy,omitzero"`
	RolloutAfter  time.Time              `json:"rolloutAfter,omitzero"`
	DeletionOrder string                 `json:"deletionOrder,omitempty"`
	MinReady      time.Duration          `json:"minReady,omitempty"`
	Naming        string                 `json:"naming,omitempty"`
	MaxInFlight   *v1alpha1.IntOrPercent `json:"maxInFlight,omitempty"`
	Labels        map[string]string      `json:"labels,omitempty"`
	Annotations   map[string]string      `json:"annotations,omitempty"`
}

// equal: the same rules, whether a map is empty or nil and whatever a
// time's location (a record read back from JSON has lost both).
func (r *PoolRules) equal(o *PoolRules) bool {
	return r.Strategy.equal(o.Strategy) && r.RolloutAfter.Equal(o.RolloutAfter) && r.DeletionOrder == o.DeletionOrder &&
		r.MinReady == o.MinReady && r.Naming == o.Naming && sameIntOrPercent(r.MaxInFlight, o.MaxInFlight) &&
		maps.Equal(r.Labels, o.Labels) && maps.Equal(r.Annotations, o.Annotations)
}

// pool returns the recorded template of pool name, or nil.
func (a *Admission) pool(name string) *PoolTemplate {
	for i := range a.Pools {
		if a.Pools[i].Name == name {
			return &a.Pools[i]
		}
	}
	return nil
}

// PoolBackoff is one pool whose machines failed to be created: no machine
// of the pool is created before NextRetry.
type PoolBackoff struct {
	Pool        string    `json:"pool"` // PoolName
	Failures    int       `json:"failures"`
	LastFailure time.Time `json:"lastFailure"`
	NextRetry   time.Time `json:"nextRetry"`
	// Reason is the last failed machine and what its provider said.
	Reason string `json:"reason"`
	// Counted names the Failed machines already counted, while they exist.
	Counted []string `json:"counted,omitempty"`
}

// RolloutRecord is a class's current rollout: the revision it rolls out,
// since when, and the clusters that failed on it. A commit that changes the
// class again starts a new one, even when it restores an earlier revision.
type RolloutRecord struct {
	Class    string           `json:"class"`
	Revision string           `json:"revision"`
	Started  time.Time        `json:"started"`
	Change   Change           `json:"change,omitzero"`
	Failed   []RolloutFailure `json:"failed,omitempty"`
}

// Change is the spec commit a revision was read from: the one that
// started a rollout.
type Change struct {
	Commit  string `json:"commit,omitempty"`
	Author  string `json:"author,omitempty"`
	Subject string `json:"subject,omitempty"`
}

// RolloutFailure is a cluster that failed on a rollout.
type RolloutFailure struct {
	Cluster string    `json:"cluster"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

// equal reports whether two records say the same: times are compared as
// instants, as the rollout compares them.
func (r RolloutRecord) equal(o RolloutRecord) bool {
	return r.Class == o.Class && r.Revision == o.Revision && r.Started.Equal(o.Started) && r.Change == o.Change &&
		slices.EqualFunc(r.Failed, o.Failed, func(a, b RolloutFailure) bool {
			return a.Cluster == b.Cluster && a.Reason == b.Reason && a.At.Equal(b.At)
		})
}

func (r *RolloutRecord) failed(cluster string) bool {
	return slices.ContainsFunc(r.Failed, func(f RolloutFailure) bool { return f.Cluster == cluster })
}

// Equal reports whether two cluster records hold the same decisions: the
// same JSON. An admission is not encoded when both hold the same one (a
// plan that moves none keeps its pointer): with its pools' labels and
// its health checks, encoding it was a quarter of a plan's allocations.
func (r ClusterRecord) Equal(o ClusterRecord) bool {
	return r.Cluster == o.Cluster && (r.Admission == o.Admission || sameJSON(r.Admission, o.Admission)) &&
		(len(r.Backoff) == 0 && len(o.Backoff) == 0 || sameJSON(r.Backoff, o.Backoff))
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// Equal reports whether two rollout records are the same.
func (r RolloutRecord) Equal(o RolloutRecord) bool {
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(o)
	return string(a) == string(b)
}
