package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/internal/layered"
	"github.com/gitfleet/gitfleet/schemas/patch"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Expand turns a validated fleet into the desired topology of every cluster.
// Problems are rules of the planner the fleet breaks; a cluster with a
// problem is still returned (so its machines are not mistaken for a removed
// cluster's) but carries the problem and gets no steps.
func Expand(fleet *v1alpha1.Fleet) (*Desired, []Problem) { return ExpandReusing(nil, fleet, nil) }

// ExpandReusing is Expand for a fleet whose objects have content keys
// (key(kind, name), "" when unknown; nil: none): a cluster whose inputs —
// its Cluster, its ClusterClass, the MachineDeployments and
// MachineHealthChecks that name it — have the keys they had when prev
// was expanded keeps prev's expansion, the same pointer. A one-cluster
// commit then expands one cluster, and a caller finds what changed by
// comparing pointers; a class change still re-expands all its clusters.
// Expansions are never changed once made, so sharing them is safe.
func ExpandReusing(prev *Desired, fleet *v1alpha1.Fleet, key func(kind, name string) string) (*Desired, []Problem) {
	d := &Desired{byName: layered.New[string, *DesiredCluster](0), byClass: map[string]*DesiredClass{}}
	if fleet == nil {
		return d, nil
	}
	var problems []Problem
	for _, cc := range fleet.Classes {
		dc := expandClass(cc)
		d.Classes = append(d.Classes, dc)
		d.byClass[dc.Name] = dc
	}
	sort.Slice(d.Classes, func(i, j int) bool { return d.Classes[i].Name < d.Classes[j].Name })
	var inputs []inputKeys
	if key != nil {
		inputs = clusterInputs(fleet, key)
		d.allKnown = !slices.ContainsFunc(inputs, func(k inputKeys) bool { return !k.known() })
	}
	reused := make(map[string]bool, len(fleet.Clusters))
	d.byName = layered.New[string, *DesiredCluster](len(fleet.Clusters))
	d.Clusters = make([]*DesiredCluster, len(fleet.Clusters))
	var todo []int
	for i, c := range fleet.Clusters {
		if inputs != nil && inputs[i].known() && prev != nil {
			// An expansion made from the same inputs (its own, set when
			// it was made) is kept.
			if pc := prev.named(c.Metadata.Name); pc != nil && pc.inputs == inputs[i] {
				d.Clusters[i] = pc
				reused[pc.Name] = true
				continue
			}
		}
		todo = append(todo, i)
	}
	// Clusters expand independently, reading the fleet and writing their
	// own expansion: a class change's thousands run on every core.
	inParallel(len(todo), func(lo, hi int) {
		memo := templateMemo{}
		for _, i := range todo[lo:hi] {
			c := fleet.Clusters[i]
			d.Clusters[i] = expandCluster(fleet, c, d.byClass[c.Spec.Topology.ClassRef.Name], memo)
			if inputs != nil {
				d.Clusters[i].inputs = inputs[i]
			}
		}
	})
	for _, dc := range d.Clusters {
		d.byName.Set(dc.Name, dc)
	}
	sort.Slice(d.Clusters, func(i, j int) bool { return d.Clusters[i].Name < d.Clusters[j].Name })
	problems = append(problems, addAttached(d, fleet, func(name string) bool { return !reused[name] })...)
	for _, dc := range d.Clusters {
		if !reused[dc.Name] {
			checkDeploymentNames(dc)
		}
		problems = append(problems, dc.Problems...)
	}
	if prev != nil {
		d.changes = changesSince(prev, d, fleet, todo)
	}
	return d, problems
}

// addAttached adds the standalone MachineDeployments and the health checks
// to the clusters they name for which expanding says so (the others keep
// theirs from an earlier expansion), and returns the problems of those
// that name no cluster.
func addAttached(d *Desired, fleet *v1alpha1.Fleet, expanding func(cluster string) bool) []Problem {
	problems := addStandalone(d, fleet.MachineDeployments, expanding)
	for _, hc := range fleet.HealthChecks {
		dc := d.named(hc.Spec.ClusterName)
		if dc == nil {
			problems = append(problems, problemf(hc.Source, "spec.clusterName",
				"no Cluster named %q; set clusterName to one of the fleet's clusters", hc.Spec.ClusterName))
			continue
		}
		if !expanding(dc.Name) {
			continue
		}
		dc.HealthChecks = append(dc.HealthChecks, expandHealthCheck(hc))
	}
	return problems
}

// ObjectRef names an object of a fleet by kind and name.
type ObjectRef struct{ Kind, Name string }

// ExpandChanged is ExpandReusing for a fleet that differs from the one
// prev was expanded from (with content keys, by ExpandReusing or
// ExpandChanged) in the objects changed names alone, each still there
// under its name: the source knows which files a commit changed. When
// those are Clusters and nothing else, it expands them alone and keeps
// every other cluster of prev, the same pointers, without walking the
// fleet's clusters: a one-cluster commit of a fleet of 10,000 costs one
// cluster's expansion. Any other change (a class, a MachineDeployment or
// health check, a cluster added or removed, a key unknown) is
// ExpandReusing's.
func ExpandChanged(prev *Desired, fleet *v1alpha1.Fleet, key func(kind, name string) string, changed []ObjectRef) (*Desired, []Problem) {
	if d, problems, ok := expandChanged(prev, fleet, key, changed); ok {
		return d, problems
	}
	return ExpandReusing(prev, fleet, key)
}

func expandChanged(prev *Desired, fleet *v1alpha1.Fleet, key func(kind, name string) string, changed []ObjectRef) (*Desired, []Problem, bool) {
	if prev == nil || !prev.allKnown || fleet == nil || key == nil || len(fleet.Clusters) != len(prev.Clusters) {
		return nil, nil, false
	}
	names := make([]string, 0, len(changed))
	for _, ref := range changed {
		if ref.Kind != v1alpha1.KindCluster || prev.named(ref.Name) == nil {
			return nil, nil, false
		}
		names = append(names, ref.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	// The changed clusters in the fleet, which lists them by name
	// (v1alpha1.Fleet): found by a search, not a walk of 10,000. One not
	// found there, or named twice, is expanded the long way.
	found := make([]*v1alpha1.Cluster, len(names))
	byName := func(c *v1alpha1.Cluster, name string) int { return strings.Compare(c.Metadata.Name, name) }
	for i, name := range names {
		at, ok := slices.BinarySearchFunc(fleet.Clusters, name, byName)
		if !ok || (at+1 < len(fleet.Clusters) && fleet.Clusters[at+1].Metadata.Name == name) {
			return nil, nil, false
		}
		found[i] = fleet.Clusters[at]
	}
	d := &Desired{Classes: prev.Classes, byClass: prev.byClass, allKnown: true,
		byName: prev.byName.Clone(), Clusters: slices.Clone(prev.Clusters)}
	for i, c := range found {
		if c == nil {
			return nil, nil, false // not in the fleet: removed, or renamed
		}
		class := c.Spec.Topology.ClassRef.Name
		in := inputKeys{cluster: key(v1alpha1.KindCluster, c.Metadata.Name), class: key(v1alpha1.KindClusterClass, class),
			extra: attachedKeys(fleet, c.Metadata.Name, key)}
		if in.cluster == "" || in.class == "" || strings.Contains("\x00"+in.extra+"\x00", "\x00md:\x00") ||
			strings.Contains("\x00"+in.extra+"\x00", "\x00hc:\x00") {
			return nil, nil, false
		}
		if prev.named(names[i]).inputs.class != in.class {
			return nil, nil, false // another class, or the class changed
		}
		dc := expandCluster(fleet, c, d.byClass[class], nil)
		dc.inputs = in
		d.byName.Set(dc.Name, dc)
		at, _ := slices.BinarySearchFunc(d.Clusters, dc.Name, func(e *DesiredCluster, n string) int { return strings.Compare(e.Name, n) })
		d.Clusters[at] = dc
	}
	problems := addAttached(d, fleet, func(name string) bool { _, ok := slices.BinarySearch(names, name); return ok })
	for _, n := range names {
		checkDeploymentNames(d.named(n))
	}
	for _, dc := range d.Clusters {
		problems = append(problems, dc.Problems...)
	}
	// Every cluster kept its class: the classes' members are prev's.
	d.membersOnce.Do(func() { d.members = prev.classMembers() })
	d.changes = &changes{expanded: names}
	return d, problems, true
}

// attachedKeys are the keys of the MachineDeployments and health checks
// that name cluster, as clusterInputs joins them.
func attachedKeys(fleet *v1alpha1.Fleet, cluster string, key func(kind, name string) string) string {
	var more []string
	for _, md := range fleet.MachineDeployments {
		if md.Spec.ClusterName == cluster {
			more = append(more, "md:"+key(v1alpha1.KindMachineDeployment, md.Metadata.Name))
		}
	}
	for _, hc := range fleet.HealthChecks {
		if hc.Spec.ClusterName == cluster {
			more = append(more, "hc:"+key(v1alpha1.KindMachineHealthCheck, hc.Metadata.Name))
		}
	}
	return strings.Join(more, "\x00")
}

// changesSince lists what d, expanded from fleet, made anew rather than
// kept from prev (todo: the indexes in fleet.Clusters of the clusters it
// expanded) and the clusters prev had that d has not. Clusters are
// removed rarely: prev is walked only when the counts say some were.
func changesSince(prev, d *Desired, fleet *v1alpha1.Fleet, todo []int) *changes {
	ch := &changes{expanded: make([]string, len(todo))}
	for i, t := range todo {
		ch.expanded[i] = fleet.Clusters[t].Metadata.Name
	}
	slices.Sort(ch.expanded)
	ch.expanded = slices.Compact(ch.expanded)
	// Names are counted once each (byName's), should a fleet name two
	// clusters alike: d keeps every cluster of prev when it has as many
	// of them as prev has clusters.
	added := 0
	for _, n := range ch.expanded {
		if prev.named(n) == nil {
			added++
		}
	}
	if d.byName.Len()-added != prev.byName.Len() {
		for _, pc := range prev.Clusters {
			if d.named(pc.Name) == nil {
				ch.removed = append(ch.removed, pc.Name)
			}
		}
	}
	return ch
}

func expandClass(cc *v1alpha1.ClusterClass) *DesiredClass {
	dc := &DesiredClass{Name: cc.Metadata.Name, Revision: classRevision(cc), legacy: legacyRevision(cc), Source: cc.Source,
		KubernetesVersions: cc.Spec.KubernetesVersions, MaxFailures: 1}
	if r := cc.Spec.Rollout; r != nil {
		for _, w := range r.Waves {
			dc.Waves = append(dc.Waves, Wave{Name: w.Name, Selector: w.Selector, MaxConcurrent: w.MaxConcurrent})
		}
		if r.MaxFailures != nil && *r.MaxFailures > 0 {
			dc.MaxFailures = *r.MaxFailures
		}
	}
	dc.Waves = append(dc.Waves, Wave{Name: ImplicitWave})
	return dc
}

// expandCluster is cluster c's desired state; memo is the worker's memo of
// the templates it made (nil: none).
func expandCluster(fleet *v1alpha1.Fleet, c *v1alpha1.Cluster, class *DesiredClass, memo templateMemo) *DesiredCluster {
	t := c.Spec.Topology
	dc := &DesiredCluster{
		Name: c.Metadata.Name, Class: t.ClassRef.Name, Labels: c.Metadata.Labels, Paused: c.Spec.Paused,
		Source: c.Source, Version: t.Version, VersionSource: c.Source, VersionField: "spec.topology.version",
		Network: c.Spec.ClusterNetwork,
	}
	cc := fleet.Class(t.ClassRef.Name)
	if cc == nil || class == nil {
		dc.Problems = append(dc.Problems, problemf(c.Source, "spec.topology.classRef.name",
			"no ClusterClass named %q; add it under classes/ or name an existing class", t.ClassRef.Name))
		return dc
	}
	dc.KubernetesVersions = cc.Spec.KubernetesVersions
	dc.revision, dc.legacy = class.Revision, class.legacy
	if dc.Version == "" {
		dc.Version, dc.VersionSource, dc.VersionField = cc.Spec.Version, cc.Source, "spec.version"
	}
	if _, ok := parseVersion(dc.Version); !ok {
		dc.Problems = append(dc.Problems, problemf(dc.VersionSource, dc.VersionField,
			"%q is not a Kubernetes version like v1.30.2; set topology.version on the cluster or spec.version on class %s", dc.Version, cc.Metadata.Name))
	}
	dc.Wave, dc.WaveName = waveOf(class, dc.Labels)
	checkVariables(cc, c, &dc.Problems)

	cpReplicas := 1
	if r := t.ControlPlane.Replicas; r != nil {
		cpReplicas = *r
	}
	if cpReplicas < 1 || cpReplicas%2 == 0 {
		dc.Problems = append(dc.Problems, problemf(c.Source, "spec.topology.controlPlane.replicas",
			"%d control-plane machines cannot keep etcd quorum safely; use an odd number like 1, 3 or 5", cpReplicas))
	}
	cpt := memo.template(cc, c, cc.Spec.ControlPlane.MachineTemplate, patch.Target{ControlPlane: true}, &dc.Problems)
	dc.ControlPlane = newPool(dc, "", wire.RoleControlPlane, cpReplicas, dc.Version, cpt, "",
		Strategy{Type: v1alpha1.StrategyRollingUpdate, MaxSurge: 1}, c.Source, "spec.topology.controlPlane.replicas",
		cc.Spec.ControlPlane.Metadata, t.ControlPlane.Metadata)
	if h, ok := topologyHealth(dc.Name+"-"+ControlPlanePool, dc.ControlPlane.Labels, cc.Spec.ControlPlane.HealthCheck, cc.Source,
		t.ControlPlane.HealthCheck, c.Source); ok {
		dc.HealthChecks = append(dc.HealthChecks, h)
	}

	for i, md := range t.Workers.MachineDeployments {
		field := fmt.Sprintf("spec.topology.workers.machineDeployments[%d]", i)
		mdc := classDeployment(cc, md.Class)
		if mdc == nil {
			dc.Problems = append(dc.Problems, problemf(c.Source, field+".class",
				"class %s has no machineDeployment class %q; use one of %s", cc.Metadata.Name, md.Class, deploymentClassNames(cc)))
			continue
		}
		replicas := 1
		if md.Replicas != nil {
			replicas = *md.Replicas
		}
		rollout, deletion := topologyRollout(md.Rollout, mdc.Rollout), topologyDeletion(md.Deletion, mdc.Deletion)
		spec := strategySpecOf(v1alpha1.StrategyOf(rollout))
		tpl := memo.template(cc, c, mdc.Template, patch.Target{MachineDeployment: &t.Workers.MachineDeployments[i]}, &dc.Problems)
		pool := newPool(dc, md.Name, wire.RoleWorker, replicas, dc.Version, tpl, md.FailureDomain, spec.resolve(replicas), c.Source, field+".replicas",
			mdc.Metadata, md.Metadata)
		pool.strategy = spec
		pool.setLifecycle(rollout, deletion, firstOf(md.MinReadySeconds, mdc.MinReadySeconds),
			firstOf(md.MachineNaming, mdc.MachineNaming))
		pool.setAutoscale(md.Metadata.Annotations, md.Replicas, c.Source, field, &dc.Problems)
		dc.Deployments = append(dc.Deployments, pool)
		if h, ok := topologyHealth(dc.Name+"-"+md.Name, pool.Labels, mdc.HealthCheck, cc.Source, md.HealthCheck, c.Source); ok {
			dc.HealthChecks = append(dc.HealthChecks, h)
		}
	}
	return dc
}

// firstOf returns the first of a and b that is not nil: a topology's
// setting, else its class's.
func firstOf[T any](a, b *T) *T {
	if a != nil {
		return a
	}
	return b
}

// topologyRollout is a topology pool's rollout over its worker class's,
// field by field as Cluster API v1beta2 resolves them: a topology that
// sets only rollout.strategy keeps the class's rollout.after, and one
// that sets only rollout.after the class's strategy. The strategy is one
// field (a topology's replaces the class's whole, as in Cluster API).
func topologyRollout(top, class *v1alpha1.MachineRollout) *v1alpha1.MachineRollout {
	if top == nil || class == nil {
		return firstOf(top, class)
	}
	return &v1alpha1.MachineRollout{Strategy: firstOf(top.Strategy, class.Strategy), After: firstOf(top.After, class.After)}
}

// topologyDeletion is a topology pool's deletion over its worker class's,
// field by field: a topology's deletion: {} keeps the class's order.
func topologyDeletion(top, class *v1alpha1.MachineDeletion) *v1alpha1.MachineDeletion {
	if top == nil || top.Order == "" {
		return class
	}
	return top
}

// setLifecycle sets how the pool's machines are named (machineNaming),
// when they are replaced by time (rollout.after), which go first on a
// scale-down (deletion.order) and how long a new one must be ready before
// it counts (minReadySeconds).
func (p *Pool) setLifecycle(r *v1alpha1.MachineRollout, d *v1alpha1.MachineDeletion, minReady *int, naming *v1alpha1.MachineNaming) {
	if naming != nil {
		p.Naming = naming.Template
	}
	if r != nil && r.After != nil {
		p.RolloutAfter = *r.After
	}
	p.DeletionOrder = v1alpha1.DeleteOldest
	if d != nil && d.Order != "" {
		p.DeletionOrder = d.Order
	}
	if minReady != nil {
		p.MinReady = time.Duration(*minReady) * time.Second
	}
}

// setAutoscale makes the pool autoscaled when its annotations carry the
// autoscaler's bounds: it starts at the minimum.
func (p *Pool) setAutoscale(annotations map[string]string, replicas *int, src v1alpha1.Source, field string, problems *[]Problem) {
	lo, hi, ok, err := v1alpha1.AutoscaleBounds(annotations)
	switch {
	case !ok:
		return
	case err != nil:
		*problems = append(*problems, problemf(src, field+".annotations", "%v", err))
		return
	case replicas != nil:
		*problems = append(*problems, problemf(src, field+".replicas",
			"is set, but the autoscaler annotations make the daemon size this pool: remove replicas, or the annotations"))
		return
	}
	p.Autoscale = &Autoscale{Min: lo, Max: hi}
	p.Replicas = lo
}

// topologyHealth resolves the health check of a control plane or pool
// written in its class and cluster, as Cluster API's topology controller
// makes a MachineHealthCheck of them: the cluster's rules when it sets
// checks or remediation, else the class's; none when the cluster sets
// enabled: false or neither defines one. It selects the pool's machines by
// their labels and is named <cluster>-<pool>.
func topologyHealth(name string, labels map[string]string, class *v1alpha1.HealthRules, classSrc v1alpha1.Source,
	top *v1alpha1.TopologyHealthCheck, clusterSrc v1alpha1.Source) (HealthCheck, bool) {
	if top != nil && top.Enabled != nil && !*top.Enabled {
		return HealthCheck{}, false
	}
	rules, src := class, classSrc
	if top.Overrides() {
		rules, src = &top.HealthRules, clusterSrc
	}
	if rules == nil {
		return HealthCheck{}, false
	}
	sel := v1alpha1.LabelSelector{MatchLabels: map[string]string{}}
	for _, k := range []string{v1alpha1.LabelCluster, v1alpha1.LabelControlPlane, v1alpha1.LabelDeployment} {
		if v, ok := labels[k]; ok {
			sel.MatchLabels[k] = v
		}
	}
	return healthCheck(name, src, sel, *rules), true
}

// newPool makes a pool; meta are the metadata written for its machines, the
// class's first, each later one's keys over the earlier ones', gitfleet's
// own labels over all.
func newPool(dc *DesiredCluster, name string, role wire.Role, replicas int, ver string, tpl poolTemplate, fd string, s Strategy, src v1alpha1.Source, field string, meta ...v1alpha1.MachineMetadata) Pool {
	spec := tpl.spec
	if tpl.err != nil {
		dc.Problems = append(dc.Problems, problemf(src, field, "machine spec cannot be written as JSON: %v", tpl.err))
	}
	labels := map[string]string{}
	var annotations map[string]string
	for _, m := range meta {
		maps.Copy(labels, m.Labels)
		if len(m.Annotations) > 0 {
			if annotations == nil {
				annotations = map[string]string{}
			}
			maps.Copy(annotations, m.Annotations)
		}
	}
	labels[v1alpha1.LabelCluster] = dc.Name
	if role == wire.RoleControlPlane {
		labels[v1alpha1.LabelControlPlane] = "true"
	} else {
		labels[v1alpha1.LabelDeployment] = name
	}
	if n := machineBytes(spec, labels, annotations); n > wire.MaxMachineBytes {
		// The pool's own field, not its replicas'.
		at, what := strings.TrimSuffix(field, ".replicas"), "pool "+name
		if at == "spec" {
			at = "spec.template"
		}
		if role == wire.RoleControlPlane {
			what = "the control plane"
		}
		dc.Problems = append(dc.Problems, problemf(src, at, "the machines of %s would carry %d KiB of spec, labels and annotations (after the class's patches); at most %d KiB fit in a task: keep large data out of machine templates",
			what, (n+1023)>>10, wire.MaxMachineBytes>>10))
	}
	p := Pool{Name: name, Role: role, Replicas: replicas, Version: ver, Provider: tpl.provider, Spec: spec,
		FailureDomain: fd, Strategy: s, Labels: labels, Annotations: annotations, Source: src, ReplicasField: field}
	p.TemplateHash = p.hashAt(ver)
	return p
}

// machineBytes is what a pool's template takes in each task, or a bound of
// it no larger than wire.MaxMachineBytes: its spec's JSON and the labels'
// and annotations' keys and values as JSON strings.
// Its bound first: a JSON string takes at most six bytes a byte and its
// quotes, so most pools are known to fit without measuring every label.
func machineBytes(spec []byte, labels, annotations map[string]string) int {
	bound := len(spec)
	for _, m := range []map[string]string{labels, annotations} {
		for k, v := range m {
			bound += 6*(len(k)+len(v)) + 6
		}
	}
	if bound <= wire.MaxMachineBytes {
		return bound
	}
	n := len(spec)
	for _, m := range []map[string]string{labels, annotations} {
		for k, v := range m {
			n += wire.JSONStringLen(k) + wire.JSONStringLen(v) + 2
		}
	}
	return n
}

// hashAt is the template hash of a machine of this pool at version v: what a
// machine is made of (version, provider, spec, failure domain), not how many
// there are nor their labels and annotations (a change of those replaces
// no machine, as Cluster API updates metadata in place).
func (p *Pool) hashAt(v string) string {
	// Each part followed by a zero byte, hashed at once.
	var buf [256]byte
	b := append(append(buf[:0], v...), 0)
	b = append(append(b, p.Provider...), 0)
	b = append(append(b, p.Spec...), 0)
	b = append(append(b, p.FailureDomain...), 0)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:5])
}

// StrategySpec is a pool's strategy as written, before it is resolved
// against the pool's replicas (percentages): the zero value is
// RollingUpdate with Cluster API's defaults (maxSurge 1, maxUnavailable 0).
type StrategySpec struct {
	OnDelete       bool                   `json:"onDelete,omitempty"`
	MaxSurge       *v1alpha1.IntOrPercent `json:"maxSurge,omitempty"`
	MaxUnavailable *v1alpha1.IntOrPercent `json:"maxUnavailable,omitempty"`
}

func strategySpecOf(s *v1alpha1.MachineDeploymentStrategy) StrategySpec {
	switch {
	case s == nil:
		return StrategySpec{}
	case s.Type == v1alpha1.StrategyOnDelete:
		return StrategySpec{OnDelete: true}
	case s.RollingUpdate == nil:
		return StrategySpec{}
	}
	return StrategySpec{MaxSurge: s.RollingUpdate.MaxSurge, MaxUnavailable: s.RollingUpdate.MaxUnavailable}
}

func (s StrategySpec) equal(o StrategySpec) bool {
	return s.OnDelete == o.OnDelete && sameIntOrPercent(s.MaxSurge, o.MaxSurge) && sameIntOrPercent(s.MaxUnavailable, o.MaxUnavailable)
}

func sameIntOrPercent(a, b *v1alpha1.IntOrPercent) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// resolve is the strategy of a pool of the given replicas.
func (s StrategySpec) resolve(replicas int) Strategy {
	if s.OnDelete {
		return Strategy{Type: v1alpha1.StrategyOnDelete}
	}
	out := Strategy{
		Type:           v1alpha1.StrategyRollingUpdate,
		MaxSurge:       s.MaxSurge.Scaled(replicas, true, 1),
		MaxUnavailable: s.MaxUnavailable.Scaled(replicas, false, 0),
	}
	// Percentages may both round to zero; Cluster API then allows one
	// unavailable machine so the rollout can progress.
	if out.MaxSurge == 0 && out.MaxUnavailable == 0 {
		out.MaxUnavailable = 1
	}
	return out
}

func classDeployment(cc *v1alpha1.ClusterClass, name string) *v1alpha1.MachineDeploymentClass {
	for i := range cc.Spec.Workers.MachineDeployments {
		if cc.Spec.Workers.MachineDeployments[i].Class == name {
			return &cc.Spec.Workers.MachineDeployments[i]
		}
	}
	return nil
}

func deploymentClassNames(cc *v1alpha1.ClusterClass) string {
	var names []string
	for _, m := range cc.Spec.Workers.MachineDeployments {
		names = append(names, m.Class)
	}
	if len(names) == 0 {
		return "(none defined)"
	}
	return strings.Join(names, ", ")
}

func waveOf(class *DesiredClass, labels map[string]string) (int, string) {
	last := len(class.Waves) - 1
	for i, w := range class.Waves[:last] {
		if w.Selector.Matches(labels) {
			return i, w.Name
		}
	}
	return last, ImplicitWave
}

// inputKeys are the content keys of what a cluster's expansion reads: its
// Cluster, its class and (joined, in fleet order) the MachineDeployments
// and health checks that name it. A struct of the keys the source already
// holds, not one string made of them: a revision of 10,000 clusters
// builds it for every cluster.
type inputKeys struct{ cluster, class, extra string }

// known: every key was known (a cluster key is never "").
func (k inputKeys) known() bool { return k.cluster != "" }

// clusterInputs is, for each of the fleet's clusters in its order, the
// content keys of what its expansion reads; zero for a cluster one of
// whose keys is unknown.
func clusterInputs(fleet *v1alpha1.Fleet, key func(kind, name string) string) []inputKeys {
	var extra map[string][]string // cluster -> keys of its MDs and health checks, in fleet order
	if len(fleet.MachineDeployments)+len(fleet.HealthChecks) > 0 {
		extra = map[string][]string{}
	}
	for _, md := range fleet.MachineDeployments {
		extra[md.Spec.ClusterName] = append(extra[md.Spec.ClusterName], "md:"+key(v1alpha1.KindMachineDeployment, md.Metadata.Name))
	}
	for _, hc := range fleet.HealthChecks {
		extra[hc.Spec.ClusterName] = append(extra[hc.Spec.ClusterName], "hc:"+key(v1alpha1.KindMachineHealthCheck, hc.Metadata.Name))
	}
	classKeys := map[string]string{} // a fleet has a few classes and many clusters
	out := make([]inputKeys, len(fleet.Clusters))
	for i, c := range fleet.Clusters {
		class := c.Spec.Topology.ClassRef.Name
		kk, ok := classKeys[class]
		if !ok {
			kk = key(v1alpha1.KindClusterClass, class)
			classKeys[class] = kk
		}
		ck := key(v1alpha1.KindCluster, c.Metadata.Name)
		if ck == "" || kk == "" {
			continue
		}
		more := extra[c.Metadata.Name]
		if slices.ContainsFunc(more, func(p string) bool { return p == "md:" || p == "hc:" }) {
			continue
		}
		out[i] = inputKeys{cluster: ck, class: kk, extra: strings.Join(more, "\x00")}
	}
	return out
}

func addStandalone(d *Desired, mds []*v1alpha1.MachineDeployment, expanding func(cluster string) bool) []Problem {
	var problems []Problem
	sorted := append([]*v1alpha1.MachineDeployment(nil), mds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Metadata.Name < sorted[j].Metadata.Name })
	for _, md := range sorted {
		dc := d.named(md.Spec.ClusterName)
		if dc == nil {
			problems = append(problems, problemf(md.Source, "spec.clusterName",
				"no Cluster named %q; set clusterName to one of the fleet's clusters", md.Spec.ClusterName))
			continue
		}
		if !expanding(dc.Name) {
			continue
		}
		replicas := 1
		if md.Spec.Replicas != nil {
			replicas = *md.Spec.Replicas
		}
		ver := md.Spec.Version
		if ver == "" {
			ver = dc.Version
		} else if compareVersions(ver, dc.Version) > 0 {
			dc.Problems = append(dc.Problems, problemf(md.Source, "spec.version",
				"%s is newer than the cluster's control plane (%s); workers are never newer than the control plane: set %s or older, or upgrade the cluster first", ver, dc.Version, dc.Version))
		}
		spec := strategySpecOf(v1alpha1.StrategyOf(md.Spec.Rollout))
		p := newPool(dc, md.Metadata.Name, wire.RoleWorker, replicas, ver, templateOf(md.Spec.Template), md.Spec.FailureDomain,
			spec.resolve(replicas), md.Source, "spec.replicas")
		p.strategy = spec
		p.setLifecycle(md.Spec.Rollout, md.Spec.Deletion, md.Spec.MinReadySeconds, md.Spec.MachineNaming)
		p.setAutoscale(md.Metadata.Annotations, md.Spec.Replicas, md.Source, "metadata", &dc.Problems)
		if md.Spec.Remediation != nil {
			p.MaxInFlight = md.Spec.Remediation.MaxInFlight
		}
		dc.Deployments = append(dc.Deployments, p)
	}
	return problems
}

// checkDeploymentNames adds a problem to dc for each MachineDeployment
// name it has twice (topology and standalone ones together).
func checkDeploymentNames(dc *DesiredCluster) {
	seen := map[string]bool{}
	for _, p := range dc.Deployments {
		if seen[p.Name] {
			dc.Problems = append(dc.Problems, problemf(p.Source, "metadata.name",
				"cluster %s has two MachineDeployments named %q; rename one", dc.Name, p.Name))
		}
		seen[p.Name] = true
	}
}

func expandHealthCheck(hc *v1alpha1.MachineHealthCheck) HealthCheck {
	return healthCheck(hc.Metadata.Name, hc.Source, hc.Spec.Selector, hc.Spec.HealthRules)
}

// healthCheck resolves health rules written in Cluster API v1beta2's shape.
func healthCheck(name string, src v1alpha1.Source, sel v1alpha1.LabelSelector, rules v1alpha1.HealthRules) HealthCheck {
	h := HealthCheck{Name: name, Source: src, Selector: sel, NodeStartupTimeout: DefaultNodeStartupTimeout}
	if s := rules.Checks.NodeStartupTimeoutSeconds; s != nil {
		h.NodeStartupTimeout = time.Duration(*s) * time.Second
	}
	for _, c := range rules.Checks.UnhealthyNodeConditions {
		if c.Type != v1alpha1.ConditionReady {
			continue // refused by validation
		}
		d := time.Duration(c.TimeoutSeconds) * time.Second
		switch c.Status {
		case v1alpha1.ConditionUnknown:
			h.HeartbeatTimeout = d
		case v1alpha1.ConditionStatusFalse:
			h.NotReadyTimeout = d
		}
	}
	h.MaxInFlight = rules.Remediation.MaxInFlight
	if t := rules.Remediation.TriggerIf; t != nil {
		h.MaxUnhealthy = t.UnhealthyLessThanOrEqualTo
		h.RangeMin, h.RangeMax, h.InRange = t.Range()
	}
	return h
}
