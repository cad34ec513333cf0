package planner

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/layered"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Desired is the expanded fleet: every cluster's control plane and worker
// pools as they should be, and every class's rollout order.
type Desired struct {
	Clusters []*DesiredCluster // sorted by name
	Classes  []*DesiredClass   // sorted by name
	// Change is the spec commit this was read from (set by the caller): a
	// class revision first seen here starts its rollout with it.
	Change Change
	// byName shares all but the changed clusters with the expansion
	// it was made from (ExpandChanged): a one-cluster commit of 10,000
	// does not copy 10,000 entries.
	byName  *layered.Map[string, *DesiredCluster]
	byClass map[string]*DesiredClass
	// members are each class's clusters, in name order, listed once by
	// the first Rollouts: a daemon asks for them at every pass.
	membersOnce sync.Once
	members     map[string][]string
	// changes are what ExpandReusing made anew since the expansion it
	// was given; nil when it was given none.
	changes *changes
	// allKnown: every cluster was expanded with the content keys of its
	// inputs (ExpandChanged may keep them without looking).
	allKnown bool
}

type changes struct{ expanded, removed []string }

// Changes returns, for an expansion made by ExpandReusing from an earlier
// one, the clusters it expanded anew instead of keeping the earlier
// expansion (added ones, and those one of whose inputs changed) and those
// the earlier one had that it has not, each in name order. Every other
// cluster is the earlier expansion itself. ok is false when there was no
// earlier expansion: then every cluster is new.
func (d *Desired) Changes() (expanded, removed []string, ok bool) {
	if d == nil || d.changes == nil {
		return nil, nil, false
	}
	return d.changes.expanded, d.changes.removed, true
}

// classMembers returns each class's clusters, in name order.
func (d *Desired) classMembers() map[string][]string {
	d.membersOnce.Do(func() {
		sizes := map[string]int{}
		for _, dc := range d.Clusters {
			sizes[dc.Class]++
		}
		d.members = make(map[string][]string, len(sizes))
		for class, n := range sizes {
			d.members[class] = make([]string, 0, n)
		}
		for _, dc := range d.Clusters {
			d.members[dc.Class] = append(d.members[dc.Class], dc.Name)
		}
	})
	return d.members
}

// Cluster returns the desired cluster named name, or nil.
func (d *Desired) Cluster(name string) *DesiredCluster {
	if d == nil {
		return nil
	}
	return d.named(name)
}

// named is the desired cluster named name, or nil.
func (d *Desired) named(name string) *DesiredCluster {
	dc, _ := d.byName.Get(name)
	return dc
}

// Class returns the desired class named name, or nil.
func (d *Desired) Class(name string) *DesiredClass {
	if d == nil {
		return nil
	}
	return d.byClass[name]
}

// DesiredClass is what the planner needs of a ClusterClass: its versions and
// its fleet rollout.
type DesiredClass struct {
	Name string
	// Revision identifies what the class's machines are made of: a new
	// revision is a new rollout (see classRevision).
	Revision string
	// legacy is the revision an earlier gitfleet gave the class
	// (legacyRevision), to read its records by.
	legacy             string
	Source             v1alpha1.Source
	KubernetesVersions []string
	// Waves are the class's rollout waves followed by the implicit final
	// wave (named ImplicitWave) of clusters no wave selects.
	Waves       []Wave
	MaxFailures int
}

// ImplicitWave names the final wave of clusters matched by no wave.
const ImplicitWave = "(unmatched)"

// Wave is one wave of a class rollout.
type Wave struct {
	Name          string
	Selector      v1alpha1.LabelSelector
	MaxConcurrent *v1alpha1.IntOrPercent // nil: no limit
}

// slots is how many of the wave's n clusters may move to a class revision
// at a time: all of them, or its maxConcurrent of them (at least 1).
func (w *Wave) slots(n int) int {
	if w.MaxConcurrent == nil {
		return n
	}
	return max(w.MaxConcurrent.Scaled(n, false, n), 1)
}

// DesiredCluster is one cluster after expansion.
type DesiredCluster struct {
	Name   string
	Class  string
	Labels map[string]string
	Paused bool
	Source v1alpha1.Source
	// Version is the resolved Kubernetes version: topology.version, else the
	// class's spec.version. VersionSource and VersionField say where it was
	// written, for errors.
	Version       string
	VersionSource v1alpha1.Source
	VersionField  string
	// KubernetesVersions are the class's versions a chained upgrade may pass.
	KubernetesVersions []string
	// Network is spec.clusterNetwork (nil: not set), for machines'
	// bootstrap data.
	Network      *v1alpha1.ClusterNetwork
	ControlPlane Pool
	Deployments  []Pool // class-based first (in topology order), then standalone by name
	HealthChecks []HealthCheck
	// Wave is the index of the cluster's wave in its class's Waves.
	Wave     int
	WaveName string
	// Problems that stop the planner from touching this cluster at all.
	Problems []Problem
	// revision and legacy are its class's Revision and legacy revision
	// ("" without a class), to read admissions an earlier gitfleet
	// recorded (upgraded).
	revision, legacy string
	// inputs are the content keys the cluster was expanded from
	// (ExpandReusing); zero when one was unknown.
	inputs inputKeys
}

// Autoscale is the range the autoscaler annotations allow a pool.
type Autoscale struct{ Min, Max int }

// Pool is the control plane or one MachineDeployment of a cluster.
type Pool struct {
	Name          string // deployment name; "" for the control plane
	Role          wire.Role
	Replicas      int
	Version       string // the version this pool ends at
	Provider      string
	Spec          json.RawMessage // machine spec after variables and patches
	FailureDomain string
	// Strategy is strategy resolved against Replicas.
	Strategy Strategy
	strategy StrategySpec
	// Labels and Annotations are the machines': the class's and the
	// cluster's metadata, and gitfleet's labels (v1alpha1.LabelCluster,
	// ...). Shared by the pool's machines: read only.
	Labels      map[string]string
	Annotations map[string]string
	// RolloutAfter: once it has passed, machines created before it are
	// outdated (rollout.after); zero: never.
	RolloutAfter time.Time
	// DeletionOrder is which machines a scale-down takes first:
	// v1alpha1.DeleteOldest, DeleteNewest or DeleteRandom.
	DeletionOrder string
	// MinReady is how long a new machine must have been Running and ready
	// before it counts as available (minReadySeconds).
	MinReady time.Duration
	// Autoscale is set for a pool sized by the daemon within the
	// autoscaler annotations' bounds (ClusterInput.Scale), not by Git;
	// Replicas is then the minimum until a scale request says otherwise.
	Autoscale *Autoscale
	// Naming is the machineNaming template of the pool's machines; ""
	// names them <cluster>-<pool>-<random>.
	Naming string
	// MaxInFlight bounds the pool's machines being deleted while
	// unhealthy ones are replaced, when the health check that found them
	// has no bound of its own (a standalone MachineDeployment's
	// remediation.maxInFlight); nil: all at once.
	MaxInFlight *v1alpha1.IntOrPercent
	// TemplateHash identifies what a machine of this pool is at Version:
	// it changes exactly when a machine must be replaced.
	TemplateHash  string
	Source        v1alpha1.Source
	ReplicasField string
	// pending: the cluster's admission has no template for this pool yet
	// (see admitted); its machines are created once it is admitted.
	pending bool
}

// Strategy is a pool's resolved replacement strategy.
type Strategy struct {
	Type           string // v1alpha1.StrategyRollingUpdate or StrategyOnDelete
	MaxSurge       int
	MaxUnavailable int
}

// HealthCheck is a MachineHealthCheck resolved for one cluster.
type HealthCheck struct {
	Name     string
	Source   v1alpha1.Source
	Selector v1alpha1.LabelSelector
	// NodeStartupTimeout: not Running this long after creation; 0: off.
	NodeStartupTimeout time.Duration
	// HeartbeatTimeout is the Ready Unknown condition's timeout: no
	// heartbeat for this long; 0: not checked.
	HeartbeatTimeout time.Duration
	// NotReadyTimeout is the Ready False condition's timeout: the machine's
	// heartbeats have said it is not healthy for this long; 0: not checked.
	NotReadyTimeout time.Duration
	// MaxUnhealthy is triggerIf.unhealthyLessThanOrEqualTo; nil: 100%.
	MaxUnhealthy *v1alpha1.IntOrPercent
	// InRange is set from triggerIf.unhealthyInRange: remediation only
	// while RangeMin <= unhealthy <= RangeMax. It takes precedence.
	InRange            bool
	RangeMin, RangeMax int
	// MaxInFlight bounds the machines of a pool being deleted at once
	// while its unhealthy machines are replaced (count or percentage of
	// the pool's replicas); nil: no bound.
	MaxInFlight *v1alpha1.IntOrPercent
}

// Default timeouts, as Cluster API's MachineHealthCheck.
const DefaultNodeStartupTimeout = 10 * time.Minute
