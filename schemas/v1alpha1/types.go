// Package v1alpha1 holds the Go types of the fleet API (apiVersion
// gitfleet.io/v1alpha1): what users write in a fleet repository. Field names
// follow Cluster API where it has one. The CUE schemas in package schemas are
// the source of truth for what is valid; these types are what validated
// documents decode into.
package v1alpha1

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// APIVersion is the only apiVersion the fleet API accepts today.
const APIVersion = "gitfleet.io/v1alpha1"

// Kinds of the fleet API.
const (
	KindFleetConfig        = "FleetConfig"
	KindClusterClass       = "ClusterClass"
	KindCluster            = "Cluster"
	KindMachineDeployment  = "MachineDeployment"
	KindMachineHealthCheck = "MachineHealthCheck"
)

// Labels that gitfleet puts on every machine; MachineHealthCheck selectors and
// rollout bookkeeping match on them.
const (
	LabelCluster      = "gitfleet.io/cluster"
	LabelControlPlane = "gitfleet.io/control-plane"
	LabelDeployment   = "gitfleet.io/deployment"
)

// Strategy types of a MachineDeployment.
const (
	StrategyRollingUpdate = "RollingUpdate"
	StrategyOnDelete      = "OnDelete"
)

// Source says where in the fleet repository an object was written.
type Source struct {
	Path string // repository-relative, slash-separated
	Line int    // 1-based line of the document's first line
}

func (s Source) String() string {
	if s.Line == 0 {
		return s.Path
	}
	return fmt.Sprintf("%s:%d", s.Path, s.Line)
}

// TypeMeta is the apiVersion and kind every document carries.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// ObjectMeta is the subset of Kubernetes object metadata gitfleet uses.
type ObjectMeta struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// MachineTemplate says which provider makes a machine and with what
// provider-specific spec; each provider validates its spec with its own schema.
type MachineTemplate struct {
	Provider string         `json:"provider"`
	Spec     map[string]any `json:"spec,omitempty"`
}

// FleetConfig is the optional gitfleet.yaml at the root of a fleet repository.
type FleetConfig struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta      `json:"metadata,omitzero"`
	Spec     FleetConfigSpec `json:"spec"`
	Source   Source          `json:"-"`
}

// FleetConfigSpec says what to read and where status goes.
type FleetConfigSpec struct {
	// Paths are the repository folders (or files) read for fleet objects;
	// empty means the whole tree.
	Paths []string `json:"paths,omitempty"`
	// Policies is the folder of the fleet's own CUE constraints.
	Policies string `json:"policies,omitempty"`
	// StatusBranch is where the daemon commits status.
	StatusBranch string `json:"statusBranch,omitempty"`
}

// Defaults for FleetConfigSpec fields left empty.
const (
	DefaultPoliciesDir  = "policies"
	DefaultStatusBranch = "gitfleet/status"
)

// ClusterClass is the shape shared by many clusters.
type ClusterClass struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta       `json:"metadata"`
	Spec     ClusterClassSpec `json:"spec"`
	Source   Source           `json:"-"`
}

// ClusterClassSpec is the class's control plane, worker classes, variables,
// patches and fleet rollout.
type ClusterClassSpec struct {
	// Version is the Kubernetes version of clusters that set none.
	Version string `json:"version,omitempty"`
	// KubernetesVersions lists the versions an upgrade may pass through, so a
	// jump of several minors becomes a chain of one-minor upgrades.
	KubernetesVersions []string          `json:"kubernetesVersions,omitempty"`
	ControlPlane       ControlPlaneClass `json:"controlPlane"`
	Workers            WorkersClass      `json:"workers,omitzero"`
	Variables          []ClassVariable   `json:"variables,omitempty"`
	Patches            []ClassPatch      `json:"patches,omitempty"`
	Rollout            *RolloutSpec      `json:"rollout,omitempty"`
}

// ControlPlaneClass is the control plane's machine template and health
// check.
type ControlPlaneClass struct {
	// Metadata is given to the control-plane machines of every cluster of
	// the class.
	Metadata        MachineMetadata `json:"metadata,omitzero"`
	MachineTemplate MachineTemplate `json:"machineTemplate"`
	// HealthCheck checks the control-plane machines of every cluster of
	// the class, unless a cluster overrides or disables it.
	HealthCheck *HealthRules `json:"healthCheck,omitempty"`
}

// WorkersClass lists the worker pool classes clusters may instantiate.
type WorkersClass struct {
	MachineDeployments []MachineDeploymentClass `json:"machineDeployments,omitempty"`
}

// MachineDeploymentClass is one kind of worker pool.
type MachineDeploymentClass struct {
	Class string `json:"class"`
	// Metadata is given to the machines of every pool of this class.
	Metadata MachineMetadata `json:"metadata,omitzero"`
	Template MachineTemplate `json:"template"`
	// PoolLifecycle is the default of the class's pools.
	PoolLifecycle `json:",inline"`
	// HealthCheck checks the machines of every pool of this class, unless
	// a cluster overrides or disables it.
	HealthCheck *HealthRules `json:"healthCheck,omitempty"`
}

// ClassVariable is a variable clusters of the class set (or default).
type ClassVariable struct {
	Name     string `json:"name"`
	Required bool   `json:"required,omitempty"`
	// Constraint is a CUE expression the value must satisfy, e.g.
	// `int & >=1 & <=64` or `"small" | "large"`.
	Constraint string `json:"constraint,omitempty"`
	// Schema is Cluster API's: an OpenAPI v3 schema the value must
	// satisfy, with defaults. With Constraint, both apply.
	Schema  *VariableSchema `json:"schema,omitempty"`
	Default any             `json:"default,omitempty"`
}

// VariableSchema holds a variable's OpenAPI v3 schema, as Cluster API's
// ClusterClass variables write it.
type VariableSchema struct {
	OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
}

// ClassPatch changes machine templates, as Cluster API v1beta2's inline
// patches: when EnabledIf (a Go template) renders "true" or is empty, each
// definition's JSON patches apply to the templates its selector matches.
type ClassPatch struct {
	Name        string            `json:"name"`
	Description string            `json:"description,omitempty"`
	EnabledIf   string            `json:"enabledIf,omitempty"`
	Definitions []PatchDefinition `json:"definitions"`
}

// PatchDefinition is a selector and the JSON patches for what it selects.
type PatchDefinition struct {
	Selector    PatchSelector `json:"selector"`
	JSONPatches []JSONPatch   `json:"jsonPatches"`
}

// PatchSelector says which machine templates a definition patches.
// APIVersion and Kind are accepted as Cluster API writes them and not
// used: gitfleet's machine templates have no kinds.
type PatchSelector struct {
	APIVersion     string         `json:"apiVersion,omitempty"`
	Kind           string         `json:"kind,omitempty"`
	MatchResources MatchResources `json:"matchResources"`
}

// MatchResources selects the control plane's template and worker classes'.
type MatchResources struct {
	ControlPlane           bool                 `json:"controlPlane,omitempty"`
	MachineDeploymentClass *MachineClassMatcher `json:"machineDeploymentClass,omitempty"`
}

// MachineClassMatcher names worker classes.
type MachineClassMatcher struct {
	Names []string `json:"names,omitempty"`
}

// JSONPatch is one RFC 6902 operation (add, replace or remove) on a
// machine template, whose JSON is {"provider": ..., "spec": {...}}: Path
// is a JSON pointer like /spec/cpus or /spec/disks/- (append).
type JSONPatch struct {
	Op        string     `json:"op"`
	Path      string     `json:"path"`
	Value     any        `json:"value,omitempty"`
	ValueFrom *ValueFrom `json:"valueFrom,omitempty"`
}

// ValueFrom takes a patch's value from a variable (a name, or a path into
// an object variable: proxy.httpProxy, builtin.cluster.name) or a Go
// template over the variables, whose output is read as YAML.
type ValueFrom struct {
	Variable string `json:"variable,omitempty"`
	Template string `json:"template,omitempty"`
}

// Patch operations.
const (
	PatchAdd     = "add"
	PatchReplace = "replace"
	PatchRemove  = "remove"
)

// RolloutSpec orders how a class change reaches the clusters using it.
type RolloutSpec struct {
	Waves []RolloutWave `json:"waves,omitempty"`
	// MaxFailures is how many clusters may fail before the rollout halts
	// (default 1: the first failure halts it).
	MaxFailures *int `json:"maxFailures,omitempty"`
}

// RolloutWave is one step of a fleet rollout.
type RolloutWave struct {
	Name          string        `json:"name"`
	Selector      LabelSelector `json:"selector"`
	MaxConcurrent *IntOrPercent `json:"maxConcurrent,omitempty"`
}

// LabelSelector matches labels like Kubernetes' metav1.LabelSelector.
type LabelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels,omitempty"`
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is one expression of a LabelSelector.
type LabelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"` // In, NotIn, Exists, DoesNotExist
	Values   []string `json:"values,omitempty"`
}

// Matches reports whether labels satisfy the selector. An empty selector
// matches everything.
func (s LabelSelector) Matches(labels map[string]string) bool {
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range s.MatchExpressions {
		v, ok := labels[r.Key]
		switch r.Operator {
		case "In":
			if !ok || !contains(r.Values, v) {
				return false
			}
		case "NotIn":
			if ok && contains(r.Values, v) {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Cluster is one Kubernetes cluster of the fleet.
type Cluster struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta  `json:"metadata"`
	Spec     ClusterSpec `json:"spec"`
	Source   Source      `json:"-"`
}

// ClusterSpec is a cluster's network and topology.
type ClusterSpec struct {
	Paused         bool            `json:"paused,omitempty"`
	ClusterNetwork *ClusterNetwork `json:"clusterNetwork,omitempty"`
	Topology       Topology        `json:"topology"`
}

// ClusterNetwork holds the pod and service ranges.
type ClusterNetwork struct {
	Pods          *NetworkRanges `json:"pods,omitempty"`
	Services      *NetworkRanges `json:"services,omitempty"`
	ServiceDomain string         `json:"serviceDomain,omitempty"`
}

// NetworkRanges is a list of CIDR blocks.
type NetworkRanges struct {
	CIDRBlocks []string `json:"cidrBlocks"`
}

// Topology instantiates a ClusterClass.
type Topology struct {
	ClassRef     ClassRef             `json:"classRef"`
	Version      string               `json:"version,omitempty"`
	ControlPlane ControlPlaneTopology `json:"controlPlane,omitzero"`
	Workers      WorkersTopology      `json:"workers,omitzero"`
	Variables    []ClusterVariable    `json:"variables,omitempty"`
}

// MachineMetadata is the labels and annotations a pool's machines carry
// (Cluster API v1beta2's metadata of a control plane or MachineDeployment
// topology). Labels under gitfleet.io/ are gitfleet's own.
type MachineMetadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ClassRef names the ClusterClass of a topology (Cluster API v1beta2's
// topology.classRef; gitfleet has no namespaces).
type ClassRef struct {
	Name string `json:"name"`
}

// ControlPlaneTopology sizes the control plane.
type ControlPlaneTopology struct {
	// Metadata is given to the control-plane machines, over the class's.
	Metadata MachineMetadata `json:"metadata,omitzero"`
	// Replicas defaults to 1.
	Replicas    *int                 `json:"replicas,omitempty"`
	HealthCheck *TopologyHealthCheck `json:"healthCheck,omitempty"`
}

// TopologyHealthCheck turns the class's health check of a control plane or
// pool on or off, or replaces it: when checks or remediation is set, they
// are used instead of the class's (Cluster API's override).
type TopologyHealthCheck struct {
	// Enabled false: no health check. true: the class or this must define
	// one. Unset: the class's or this one, if any.
	Enabled     *bool `json:"enabled,omitempty"`
	HealthRules `json:",inline"`
}

// Overrides reports whether h replaces the class's rules.
func (h *TopologyHealthCheck) Overrides() bool {
	return h != nil && (!isZeroChecks(h.Checks) || h.Remediation.TriggerIf != nil || h.Remediation.MaxInFlight != nil)
}

func isZeroChecks(c HealthChecks) bool {
	return c.NodeStartupTimeoutSeconds == nil && len(c.UnhealthyNodeConditions) == 0
}

// WorkersTopology lists the cluster's worker pools.
type WorkersTopology struct {
	MachineDeployments []MachineDeploymentTopology `json:"machineDeployments,omitempty"`
}

// MachineDeploymentTopology is one worker pool of a cluster, of a class.
type MachineDeploymentTopology struct {
	// Metadata is given to the pool's machines, over the class's.
	Metadata      MachineMetadata      `json:"metadata,omitzero"`
	Class         string               `json:"class"`
	Name          string               `json:"name"`
	Replicas      *int                 `json:"replicas,omitempty"`
	FailureDomain string               `json:"failureDomain,omitempty"`
	HealthCheck   *TopologyHealthCheck `json:"healthCheck,omitempty"`
	// PoolLifecycle overrides the worker class's, field by field.
	PoolLifecycle `json:",inline"`
}

// ClusterVariable sets a class variable for one cluster.
type ClusterVariable struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// MachineDeployment is a worker pool outside the class.
type MachineDeployment struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta            `json:"metadata"`
	Spec     MachineDeploymentSpec `json:"spec"`
	Source   Source                `json:"-"`
}

// MachineDeploymentSpec is a standalone pool's size, version and template.
type MachineDeploymentSpec struct {
	ClusterName   string          `json:"clusterName"`
	Replicas      *int            `json:"replicas,omitempty"`
	Version       string          `json:"version,omitempty"`
	FailureDomain string          `json:"failureDomain,omitempty"`
	Template      MachineTemplate `json:"template"`
	PoolLifecycle `json:",inline"`
	// Remediation bounds the pool's machines that health checks replace
	// at once (Cluster API v1beta2's MachineDeployment remediation).
	Remediation *MachineDeploymentRemediation `json:"remediation,omitempty"`
}

// MachineDeploymentRemediation is how a standalone MachineDeployment's
// unhealthy machines are replaced: at most MaxInFlight at a time (a count
// or a percentage of the pool's replicas, rounded up), whichever
// MachineHealthCheck found them; unset, all at once.
type MachineDeploymentRemediation struct {
	MaxInFlight *IntOrPercent `json:"maxInFlight,omitempty"`
}

// PoolLifecycle is how a worker pool's machines are replaced, which go
// first on a scale-down, and how long a new one must be ready before it
// counts (Cluster API v1beta2's rollout, deletion and minReadySeconds).
type PoolLifecycle struct {
	Rollout         *MachineRollout  `json:"rollout,omitempty"`
	Deletion        *MachineDeletion `json:"deletion,omitempty"`
	MinReadySeconds *int             `json:"minReadySeconds,omitempty"`
	// MachineNaming names the pool's machines (Cluster API v1beta2's
	// machineNaming of a MachineDeployment).
	MachineNaming *MachineNaming `json:"machineNaming,omitempty"`
}

// MachineNaming is a Go template of machine names, over .cluster.name,
// .machineDeployment.name, .machineSet.name (<cluster>-<pool>) and
// .random (five random characters, which it must use); default
// "{{ .machineSet.name }}-{{ .random }}".
type MachineNaming struct {
	Template string `json:"template"`
}

// MachineRollout is how a pool's machines are replaced (Cluster API
// v1beta2's rollout of a MachineDeployment).
type MachineRollout struct {
	Strategy *MachineDeploymentStrategy `json:"strategy,omitempty"`
	// After: once this time has passed, the pool's machines created
	// before it are replaced, as after a template change.
	After *time.Time `json:"after,omitempty"`
}

// MachineDeletion says which machines go first when a pool scales down.
type MachineDeletion struct {
	Order string `json:"order,omitempty"` // Oldest (default), Newest or Random
}

// Deletion orders of a pool.
const (
	DeleteOldest = "Oldest"
	DeleteNewest = "Newest"
	DeleteRandom = "Random"
)

// StrategyOf returns r's strategy, or nil when r or its strategy is unset.
func StrategyOf(r *MachineRollout) *MachineDeploymentStrategy {
	if r == nil {
		return nil
	}
	return r.Strategy
}

// MachineDeploymentStrategy is how machines are replaced.
type MachineDeploymentStrategy struct {
	Type          string                 `json:"type,omitempty"` // RollingUpdate (default) or OnDelete
	RollingUpdate *RollingUpdateStrategy `json:"rollingUpdate,omitempty"`
}

// RollingUpdateStrategy bounds a rolling update. Defaults follow Cluster API:
// maxSurge 1, maxUnavailable 0.
type RollingUpdateStrategy struct {
	MaxSurge       *IntOrPercent `json:"maxSurge,omitempty"`
	MaxUnavailable *IntOrPercent `json:"maxUnavailable,omitempty"`
}

// MachineHealthCheck says when machines of a cluster are unhealthy.
type MachineHealthCheck struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta             `json:"metadata"`
	Spec     MachineHealthCheckSpec `json:"spec"`
	Source   Source                 `json:"-"`
}

// MachineHealthCheckSpec selects machines and sets the health rules, in
// Cluster API v1beta2's shape.
type MachineHealthCheckSpec struct {
	ClusterName string        `json:"clusterName"`
	Selector    LabelSelector `json:"selector,omitzero"`
	HealthRules `json:",inline"`
}

// HealthRules are the checks and the remediation of a MachineHealthCheck.
type HealthRules struct {
	Checks      HealthChecks      `json:"checks,omitzero"`
	Remediation HealthRemediation `json:"remediation,omitzero"`
}

// HealthChecks say when a machine is unhealthy.
type HealthChecks struct {
	// NodeStartupTimeoutSeconds: a machine not Running this long after
	// creation is unhealthy. Unset: 600; 0 turns the check off.
	NodeStartupTimeoutSeconds *int `json:"nodeStartupTimeoutSeconds,omitempty"`
	// UnhealthyNodeConditions: a machine whose Ready condition has had the
	// status for timeoutSeconds is unhealthy. Ready is Unknown when the
	// machine's heartbeats stopped, False when its heartbeats say it is not
	// healthy.
	UnhealthyNodeConditions []UnhealthyNodeCondition `json:"unhealthyNodeConditions,omitempty"`
}

// UnhealthyNodeCondition is one node condition that makes a machine
// unhealthy once it has held for TimeoutSeconds.
type UnhealthyNodeCondition struct {
	Type           string `json:"type"`   // Ready
	Status         string `json:"status"` // Unknown or False
	TimeoutSeconds int    `json:"timeoutSeconds"`
}

// Node condition type and statuses gitfleet's machines report.
const (
	ConditionReady       = "Ready"
	ConditionStatusFalse = "False"
	ConditionUnknown     = "Unknown"
)

// HealthRemediation says when unhealthy machines are replaced.
type HealthRemediation struct {
	TriggerIf *RemediationTrigger `json:"triggerIf,omitempty"`
	// MaxInFlight bounds the machines of a pool being replaced at once
	// (a worker class's or topology's health check only).
	MaxInFlight *IntOrPercent `json:"maxInFlight,omitempty"`
}

// RemediationTrigger allows remediation only while the count of unhealthy
// machines is at most UnhealthyLessThanOrEqualTo, or within
// UnhealthyInRange ("[3-5]"), which takes precedence.
type RemediationTrigger struct {
	UnhealthyLessThanOrEqualTo *IntOrPercent `json:"unhealthyLessThanOrEqualTo,omitempty"`
	UnhealthyInRange           string        `json:"unhealthyInRange,omitempty"`
}

// Range parses UnhealthyInRange: "[3-5]" is 3, 5; ok is false when it is
// unset or malformed.
func (t *RemediationTrigger) Range() (lo, hi int, ok bool) {
	if t == nil || t.UnhealthyInRange == "" {
		return 0, 0, false
	}
	s := t.UnhealthyInRange
	if len(s) < 5 || s[0] != '[' || s[len(s)-1] != ']' {
		return 0, 0, false
	}
	a, b, found := strings.Cut(s[1:len(s)-1], "-")
	if !found {
		return 0, 0, false
	}
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || lo < 0 || hi < lo {
		return 0, 0, false
	}
	return lo, hi, true
}

// Duration is a time.Duration written as "30s", "10m".
type Duration struct{ time.Duration }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"5m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// IntOrPercent is a count (3) or a percentage ("25%").
type IntOrPercent struct {
	Value   int
	Percent bool
}

// Int returns a count.
func Int(n int) *IntOrPercent { return &IntOrPercent{Value: n} }

// Percent returns a percentage.
func Percent(n int) *IntOrPercent { return &IntOrPercent{Value: n, Percent: true} }

// UnmarshalJSON reads 3 or "25%".
func (v *IntOrPercent) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		n, ok := strings.CutSuffix(s, "%")
		if !ok {
			return fmt.Errorf("%q is neither a count nor a percentage like \"25%%\"", s)
		}
		p, err := strconv.Atoi(n)
		if err != nil {
			return fmt.Errorf("%q is not a percentage like \"25%%\"", s)
		}
		*v = IntOrPercent{Value: p, Percent: true}
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a count or a percentage like \"25%%\": %w", err)
	}
	*v = IntOrPercent{Value: n}
	return nil
}

// MarshalJSON writes 3 or "25%".
func (v IntOrPercent) MarshalJSON() ([]byte, error) {
	if v.Percent {
		return json.Marshal(v.String())
	}
	return json.Marshal(v.Value)
}

func (v IntOrPercent) String() string {
	if v.Percent {
		return strconv.Itoa(v.Value) + "%"
	}
	return strconv.Itoa(v.Value)
}

// Scaled resolves the value against total, rounding a percentage up or down
// the way Cluster API does (maxSurge rounds up, maxUnavailable rounds down).
// A nil value resolves to def.
func (v *IntOrPercent) Scaled(total int, roundUp bool, def int) int {
	if v == nil {
		return def
	}
	if !v.Percent {
		return v.Value
	}
	f := float64(v.Value) * float64(total) / 100
	if roundUp {
		return int(math.Ceil(f))
	}
	return int(math.Floor(f))
}

// Fleet is every object read from one revision of a fleet repository,
// each list sorted by name.
type Fleet struct {
	Config             FleetConfig
	Classes            []*ClusterClass
	Clusters           []*Cluster
	MachineDeployments []*MachineDeployment
	HealthChecks       []*MachineHealthCheck
}

// Class returns the class named name, or nil.
func (f *Fleet) Class(name string) *ClusterClass {
	for _, c := range f.Classes {
		if c.Metadata.Name == name {
			return c
		}
	}
	return nil
}

// Cluster returns the cluster named name, or nil.
func (f *Fleet) Cluster(name string) *Cluster {
	for _, c := range f.Clusters {
		if c.Metadata.Name == name {
			return c
		}
	}
	return nil
}

// Cluster API's autoscaler annotations: a worker pool (a topology's
// metadata.annotations, or a MachineDeployment's) that carries both, and
// writes no replicas, is sized by the daemon within them (gitfleet scale),
// not by Git.
const (
	AnnotationAutoscalerMin = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	AnnotationAutoscalerMax = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
)

// MaxReplicas bounds the machines of one pool (a MachineDeployment, a
// control plane), in the schema and in the autoscaler's max size: twice
// the 5,000 nodes Kubernetes supports in a cluster, so that a slip of the
// keyboard (replicas: 1000000) is an error at its line instead of a
// million machines planned.
const MaxReplicas = 10_000

// AutoscaleBounds reads the autoscaler annotations: ok is false when
// neither is set; err says what is wrong with them otherwise.
func AutoscaleBounds(annotations map[string]string) (minSize, maxSize int, ok bool, err error) {
	lo, hasMin := annotations[AnnotationAutoscalerMin]
	hi, hasMax := annotations[AnnotationAutoscalerMax]
	if !hasMin && !hasMax {
		return 0, 0, false, nil
	}
	if !hasMin || !hasMax {
		return 0, 0, true, fmt.Errorf("set both %s and %s, or neither", AnnotationAutoscalerMin, AnnotationAutoscalerMax)
	}
	minSize, err1 := strconv.Atoi(lo)
	maxSize, err2 := strconv.Atoi(hi)
	switch {
	case err1 != nil || minSize < 0:
		return 0, 0, true, fmt.Errorf("%s: %q is not a machine count >= 0", AnnotationAutoscalerMin, lo)
	case err2 != nil || maxSize < 0:
		return 0, 0, true, fmt.Errorf("%s: %q is not a machine count >= 0", AnnotationAutoscalerMax, hi)
	case maxSize > MaxReplicas:
		return 0, 0, true, fmt.Errorf("%s: %d is more machines than a pool may have (at most %d)", AnnotationAutoscalerMax, maxSize, MaxReplicas)
	case minSize > maxSize:
		return 0, 0, true, fmt.Errorf("min size %d is more than max size %d", minSize, maxSize)
	}
	return minSize, maxSize, true, nil
}
