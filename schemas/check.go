package schemas

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/schemas/patch"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// Check runs the rules that need more than one document — classes and
// clusters exist, worker classes exist in their class, class variables are
// set and satisfy their constraint, names are unique per kind — and the
// fleet's policies (CUE files), and returns the fleet of valid objects,
// each list sorted by name. Objects marked Invalid count for names only.
func Check(objs []Object, policies []File) (*v1alpha1.Fleet, Errors) {
	return CheckKnown(objs, policies, nil)
}

// KnownGood remembers clusters and classes whose own checks passed.
// CheckKnown asks it before a cluster's own checks — its variables against
// its class's constraints, its health-check overrides, its class's patches
// applied to its templates — which depend on the cluster and its class
// alone: both objects' Key name what decided them. A class's own checks
// (its variables, patches and templates) are asked for with cluster "".
type KnownGood interface {
	Good(cluster, class string) bool
	Add(cluster, class string)
}

// KnownGoodBatch is a KnownGood that answers many clusters at once:
// CheckKnown asks it for a goroutine's share of the fleet in one call
// rather than cluster by cluster (a memory behind one lock then takes it
// 40 times for 10,000 clusters, not 10,000 times from two goroutines).
// GoodAll sets good[i] to Good(keys[i].Cluster, keys[i].Class); a key
// with an empty Cluster is never good.
type KnownGoodBatch interface {
	KnownGood
	GoodAll(keys []ClusterKeys, good []bool)
}

// ClusterKeys are the content keys that decide a cluster's own checks:
// the cluster's and its class's.
type ClusterKeys struct{ Cluster, Class string }

// CheckKnown is Check, skipping the own checks of each cluster that known
// says passed with this very class (both objects' Key unchanged), and
// telling known of each cluster that passes them now. Objects without a
// Key are always checked; known may be nil.
func CheckKnown(objs []Object, policies []File, known KnownGood) (*v1alpha1.Fleet, Errors) {
	fleet, errs, _ := CheckIndexed(objs, policies, known, nil)
	return fleet, errs
}

// Index is the cross-object checks' index of one slice of objects: the
// first object of each kind and name. A validation that replaces objects
// in place, each by one of the same kind and name (an edited file of a
// fleet of 10,000), hands the last Index to CheckIndexed, which keeps it
// rather than hashing 10,000 names into new maps. It is never changed once
// made.
type Index struct {
	at    *Object // &objs[0] of the slice it was made for
	refs  []indexRef
	first []bool // objs[i] is the first of its kind and name
	// byKind maps kind and name to the first such object.
	byKind map[string]map[string]*Object
	// dups: some kind and name came twice (their errors name the other
	// object's place, which an edit may move: such an index is not kept).
	dups bool
	// clusters are the indexes of the Clusters among the objects (the
	// first of each name), in name order; nil until fleet needs them.
	// Names do not change while the index fits, so neither does their
	// order: a commit of 10,000 clusters does not sort them again.
	clusters []int32
	// good is, by object, the keys with which a Cluster's own checks last
	// passed (nil until a check with a KnownGood): while the cluster's and
	// its class's keys are those, it is good again without asking known.
	// An index is only ever handed back with the same known.
	good []goodMemo
}

// goodMemo is a cluster's key, its class object and that object's key, as
// they were when the cluster's own checks passed.
type goodMemo struct {
	cluster  string
	class    *Object
	classKey string
}

// passed reports whether o is the cluster m remembers, with its class as
// it was.
func (m *goodMemo) passed(o *Object) bool {
	return m.cluster != "" && m.cluster == o.Key && !m.class.Invalid && m.class.Key == m.classKey
}

type indexRef struct{ kind, name string }

// fits reports whether idx was made for objs as they are now: the same
// slice, each object of the kind and name it had.
func (idx *Index) fits(objs []Object) bool {
	if idx == nil || idx.dups || len(objs) == 0 || len(idx.refs) != len(objs) || idx.at != &objs[0] {
		return false
	}
	for i := range objs {
		if objs[i].Kind != idx.refs[i].kind || objs[i].Name != idx.refs[i].name {
			return false
		}
	}
	return true
}

// CheckIndexed is CheckKnown keeping idx (from a CheckIndexed of the same
// slice before) when it still fits the objects, and returning the index it
// used, for the next call.
func CheckIndexed(objs []Object, policies []File, known KnownGood, idx *Index) (*v1alpha1.Fleet, Errors, *Index) {
	c := &checker{known: known}
	if idx.fits(objs) {
		c.idx = idx
	} else {
		c.index(objs)
	}
	c.byKind = c.idx.byKind
	fleet := c.fleet(objs)
	defer func() {
		if c.vars != nil {
			c.vars.close()
		}
	}()
	for _, cl := range fleet.Classes {
		// A class's own checks depend on the class alone.
		o := c.objectOf(v1alpha1.KindClusterClass, cl.Metadata.Name)
		key := ""
		if known != nil && o != nil {
			key = o.Key
		}
		if key != "" && known.Good("", key) {
			continue
		}
		if c.vars == nil {
			c.vars = newVariables()
		}
		errs := len(c.errs)
		c.checkClass(cl)
		if key != "" && len(c.errs) == errs {
			known.Add("", key)
		}
	}
	// Clusters are many and independent: check them in parallel, each
	// goroutine with its own errors and CUE context.
	chunks := chunk(fleet.Clusters, rotateAfter)
	subs := make([]*checker, len(chunks))
	var memo []goodMemo
	if known != nil {
		if len(c.idx.good) != len(objs) {
			c.idx.good = make([]goodMemo, len(objs))
		}
		memo = c.idx.good
	}
	parallel(len(chunks), func(i int) {
		sc := &checker{byKind: c.byKind}
		defer func() {
			if sc.vars != nil {
				sc.vars.close()
			}
		}()
		// The clusters the memo does not vouch for (at a commit of one
		// cluster of 10,000, one), their keys, and what known says.
		var todo []int
		for j := range chunks[i] {
			if at := c.clusterAt[i*rotateAfter+j]; memo != nil && memo[at].passed(&objs[at]) {
				continue
			}
			todo = append(todo, j)
		}
		keys := make([]ClusterKeys, len(todo))
		good := make([]bool, len(todo))
		for t, j := range todo {
			keys[t].Cluster, keys[t].Class = c.clusterKeys(&objs[c.clusterAt[i*rotateAfter+j]], chunks[i][j])
		}
		if b, ok := known.(KnownGoodBatch); ok {
			b.GoodAll(keys, good)
		} else {
			for t, k := range keys {
				good[t] = k.Cluster != "" && known.Good(k.Cluster, k.Class)
			}
		}
		for t, j := range todo {
			cl, k := chunks[i][j], i*rotateAfter+j
			key, classKey := keys[t].Cluster, keys[t].Class
			passed := good[t]
			if !passed {
				if sc.vars == nil {
					sc.vars = newVariables()
				}
				errs, findings, beats := len(sc.errs), len(sc.findings), len(sc.beats)
				sc.checkCluster(cl)
				passed = key != "" && len(sc.errs) == errs && len(sc.findings) == findings && len(sc.beats) == beats
				if passed {
					known.Add(key, classKey)
				}
			}
			if memo != nil {
				m := goodMemo{}
				if passed {
					m = goodMemo{cluster: key, class: c.objectOf(v1alpha1.KindClusterClass, cl.Spec.Topology.ClassRef.Name), classKey: classKey}
				}
				memo[c.clusterAt[k]] = m
			}
		}
		subs[i] = sc
	})
	var findings []patchFinding
	var beats []beatFinding
	for _, sc := range subs {
		c.errs = append(c.errs, sc.errs...)
		findings = append(findings, sc.findings...)
		beats = append(beats, sc.beats...)
	}
	c.errs = append(c.errs, patchErrors(findings, c.errs)...)
	c.errs = append(c.errs, beatErrors(beats)...)
	for _, md := range fleet.MachineDeployments {
		c.clusterExists(c.objectOf(v1alpha1.KindMachineDeployment, md.Metadata.Name), md.Spec.ClusterName)
	}
	for _, hc := range fleet.HealthChecks {
		c.clusterExists(c.objectOf(v1alpha1.KindMachineHealthCheck, hc.Metadata.Name), hc.Spec.ClusterName)
		c.checkHealthCheck(fleet, hc)
	}
	c.errs = append(c.errs, applyPolicies(objs, policies)...)
	return fleet, sortErrors(c.errs), c.idx
}

// clusterKeys are the content keys that decide cl's own checks (o is its
// object): the cluster's and its class's; "" when there is no cache, no
// key or no valid class.
func (c *checker) clusterKeys(o *Object, cl *v1alpha1.Cluster) (cluster, class string) {
	if c.known == nil {
		return "", ""
	}
	co := c.objectOf(v1alpha1.KindClusterClass, cl.Spec.Topology.ClassRef.Name)
	if o == nil || co == nil || co.Invalid || o.Key == "" || co.Key == "" {
		return "", ""
	}
	return o.Key, co.Key
}

type checker struct {
	known  KnownGood
	idx    *Index
	byKind map[string]map[string]*Object // kind -> name -> first object (idx's)
	errs   Errors
	vars   *variables
	// findings are patched template fields providers refuse (templates.go).
	findings []patchFinding
	// beats are class health rules too quick for the heartbeats a
	// cluster's machines get from the class's patches (beats.go).
	beats []beatFinding
	// beatMemo are the heartbeats of templates patched before, for
	// clusters alike (beats.go).
	beatMemo map[templateCheck]beat
	// templates are the findings of templates patched before, for
	// clusters alike (templates.go).
	templates map[templateCheck][]patchFinding
	// clusterAt is the index among the objects of each of the fleet's
	// clusters, in the order of fleet.Clusters (set by fleet).
	clusterAt []int32
}

func (c *checker) errorAt(o *Object, field, format string, args ...any) {
	c.errs = append(c.errs, objectError(o, field, fmt.Sprintf(format, args...)))
}

// danglingAt is an error at field of o, which names an object the fleet
// lacks (Error.Dangling).
func (c *checker) danglingAt(o *Object, field, msg string) {
	e := objectError(o, field, msg)
	e.Dangling = true
	c.errs = append(c.errs, e)
}

// objectError is an error at field's line in o.
func objectError(o *Object, field, msg string) Error {
	return errorNear(o.Source.Path, o.Source.Line, o.Lines, field, msg)
}

// placeOf says where field is written in o, path:line (the document's
// line when the field is not written).
func (o *Object) placeOf(field string) string {
	if p, ok := o.Lines.At(field); ok {
		return fmt.Sprintf("%s:%d", o.Source.Path, p.Line)
	}
	return o.Source.String()
}

// ErrorAt is an error at field's line and column in o (or its nearest
// written parent's), for checks made after parsing (the planner's). field
// uses the keys of Object.Lines: spec.topology.workers.machineDeployments[0].replicas.
func (o *Object) ErrorAt(field, message string) Error { return objectError(o, field, message) }

// ConfigFieldError is an error at a field of gitfleet.yaml, such as
// spec.paths[1], placed at its line when the file parses.
func ConfigFieldError(config File, field, message string) Error {
	objs, _ := ParseFile(config)
	for i := range objs {
		if objs[i].Kind == v1alpha1.KindFleetConfig {
			return objs[i].ErrorAt(field, message)
		}
	}
	return Error{Path: config.Path, Field: field, Message: message}
}

// index records the first object of each kind and name and reports repeats.
func (c *checker) index(objs []Object) {
	// Each kind's map is made at its size: grown one object at a time, the
	// map of 10,000 clusters is copied over a dozen times at every revision.
	counts := map[string]int{}
	for i := range objs {
		counts[objs[i].Kind]++
	}
	idx := &Index{refs: make([]indexRef, len(objs)), first: make([]bool, len(objs)),
		byKind: make(map[string]map[string]*Object, len(counts))}
	if len(objs) > 0 {
		idx.at = &objs[0]
	}
	for kind, n := range counts {
		idx.byKind[kind] = make(map[string]*Object, n)
	}
	for i := range objs {
		o := &objs[i]
		idx.refs[i] = indexRef{o.Kind, o.Name}
		names := idx.byKind[o.Kind]
		if first, dup := names[o.Name]; dup {
			idx.dups = true
			if o.Kind == v1alpha1.KindFleetConfig {
				c.errorAt(o, "kind", "a second FleetConfig (the first is at %s): keep one, in gitfleet.yaml", first.Source)
			} else {
				c.errorAt(o, "metadata.name", "duplicate %s %q (also at %s): names are unique per kind; rename one", o.Kind, o.Name, first.placeOf("metadata.name"))
			}
			continue
		}
		names[o.Name] = o
		idx.first[i] = true
	}
	c.idx = idx
}

func (c *checker) objectOf(kind, name string) *Object { return c.byKind[kind][name] }

// fleet collects the valid objects, first of each name, sorted by name.
func (c *checker) fleet(objs []Object) *v1alpha1.Fleet {
	f := &v1alpha1.Fleet{}
	order := c.idx.clusterOrder(objs)
	f.Clusters = make([]*v1alpha1.Cluster, 0, len(order))
	c.clusterAt = make([]int32, 0, len(order))
	for _, i := range order {
		o := &objs[i]
		if v, ok := o.Value.(*v1alpha1.Cluster); ok && !o.Invalid {
			f.Clusters = append(f.Clusters, v)
			c.clusterAt = append(c.clusterAt, i)
		}
	}
	for i := range objs {
		o := &objs[i]
		if o.Invalid || !c.idx.first[i] {
			continue
		}
		switch v := o.Value.(type) {
		case *v1alpha1.FleetConfig:
			f.Config = *v
		case *v1alpha1.ClusterClass:
			f.Classes = append(f.Classes, v)
		case *v1alpha1.MachineDeployment:
			f.MachineDeployments = append(f.MachineDeployments, v)
		case *v1alpha1.MachineHealthCheck:
			f.HealthChecks = append(f.HealthChecks, v)
		}
	}
	if f.Config.Spec.Policies == "" {
		f.Config.Spec.Policies = v1alpha1.DefaultPoliciesDir
	}
	if f.Config.Spec.StatusBranch == "" {
		f.Config.Spec.StatusBranch = v1alpha1.DefaultStatusBranch
	}
	sortByName(f.Classes, func(x *v1alpha1.ClusterClass) string { return x.Metadata.Name })
	sortByName(f.MachineDeployments, func(x *v1alpha1.MachineDeployment) string { return x.Metadata.Name })
	sortByName(f.HealthChecks, func(x *v1alpha1.MachineHealthCheck) string { return x.Metadata.Name })
	return f
}

// clusterOrder is idx.clusters, worked out the first time. Files are read
// in path order, which is most often name order: then nothing is sorted.
func (idx *Index) clusterOrder(objs []Object) []int32 {
	if idx.clusters != nil {
		return idx.clusters
	}
	order := make([]int32, 0, len(idx.byKind[v1alpha1.KindCluster]))
	for i := range objs {
		if idx.first[i] && objs[i].Kind == v1alpha1.KindCluster {
			order = append(order, int32(i))
		}
	}
	byName := func(a, b int32) int { return cmp.Compare(objs[a].Name, objs[b].Name) }
	if !slices.IsSortedFunc(order, byName) {
		slices.SortFunc(order, byName)
	}
	idx.clusters = order
	return order
}

func sortByName[T any](s []T, name func(T) string) {
	slices.SortFunc(s, func(a, b T) int { return cmp.Compare(name(a), name(b)) })
}

func (c *checker) clusterExists(o *Object, name string) {
	if o == nil || c.objectOf(v1alpha1.KindCluster, name) != nil {
		return
	}
	c.danglingAt(o, "spec.clusterName", notFound("cluster", name, "", keys(c.byKind[v1alpha1.KindCluster])))
}

// notFound says a name is unknown (in where, when not empty) and suggests
// the closest known one.
func notFound(what, name, where string, known []string) string {
	msg := fmt.Sprintf("%s %q not found", what, name)
	if where != "" {
		msg += " in " + where
	}
	if s := suggest(name, known); s != "" {
		return msg + fmt.Sprintf("; did you mean %q?", s)
	}
	if len(known) == 0 {
		return msg + fmt.Sprintf("; no %s is defined", what)
	}
	if len(known) > 10 {
		known = append(known[:10:10], "…")
	}
	return msg + "; known: " + strings.Join(known, ", ")
}

// checkHealthCheck: a MachineHealthCheck selects at least one of its
// cluster's pools (a selector that matches none checks nothing, silently);
// and one with the condition Ready Unknown (no heartbeat) must not select
// machines of a provider that sends no heartbeats: they would be found
// unhealthy once the timeout passed, and replaced over and over.
func (c *checker) checkHealthCheck(fleet *v1alpha1.Fleet, hc *v1alpha1.MachineHealthCheck) {
	cl := fleet.Cluster(hc.Spec.ClusterName)
	if cl == nil {
		return
	}
	o := c.objectOf(v1alpha1.KindMachineHealthCheck, hc.Metadata.Name)
	pools, complete := c.poolsOf(fleet, cl)
	var selected []machinePool
	for _, p := range pools {
		if hc.Spec.Selector.Matches(p.labels) {
			selected = append(selected, p)
		}
	}
	if len(selected) == 0 && complete {
		var have []string
		for _, p := range pools {
			have = append(have, fmt.Sprintf("%s %s", p.name, labelText(p.labels)))
		}
		c.errorAt(o, "spec.selector", "selects no machine of cluster %s, so it checks nothing: its machines are labelled %s; match one of those labels",
			cl.Metadata.Name, strings.Join(have, ", "))
		return
	}
	cond := -1
	for i, u := range hc.Spec.Checks.UnhealthyNodeConditions {
		if u.Type == v1alpha1.ConditionReady && u.Status == v1alpha1.ConditionUnknown {
			cond = i
		}
	}
	if cond < 0 {
		return
	}
	silent := silentProviders()
	for _, p := range selected {
		if b := p.heartbeat; silent[b.provider] {
			origin, fix := providerOrigin(b)
			if b.providerPatch == "" {
				fix = "narrow the selector to machines that send heartbeats"
			} else {
				fix = "narrow the selector to machines that send heartbeats, or " + fix
			}
			c.errorAt(o, fmt.Sprintf("spec.checks.unhealthyNodeConditions[%d]", cond),
				"selects machines of %s of cluster %s, made by provider %s%s, which sends no heartbeats: their Ready condition would turn Unknown after %ds and they would be replaced over and over; remove the Ready Unknown condition, or %s",
				p.name, cl.Metadata.Name, b.provider, origin, hc.Spec.Checks.UnhealthyNodeConditions[cond].TimeoutSeconds, fix)
			return
		}
	}
	// The slowest heartbeats among the selected machines decide, as the
	// class's patches set them for the cluster.
	var slowest beat
	what := ""
	for _, p := range selected {
		if p.heartbeat.every > slowest.every {
			slowest, what = p.heartbeat, p.name+" of cluster "+cl.Metadata.Name
		}
	}
	checkBeatTimeout(func(f, format string, args ...any) { c.errorAt(o, f, format, args...) },
		"spec", what, slowest, &v1alpha1.HealthRules{Checks: hc.Spec.Checks})
}

// machinePool is a cluster's control plane or worker pool as a health
// check's selector sees it: the labels every machine of it carries.
type machinePool struct {
	name      string
	labels    map[string]string
	heartbeat beat // its provider and interval after the class's patches (beatOf)
}

// poolsOf lists cl's pools: its class's control plane and topology
// workers, and its standalone MachineDeployments. complete is false when
// a pool is missing because its class or worker class is not found (an
// error of its own).
func (c *checker) poolsOf(fleet *v1alpha1.Fleet, cl *v1alpha1.Cluster) (pools []machinePool, complete bool) {
	complete = true
	if class := fleet.Class(cl.Spec.Topology.ClassRef.Name); class == nil {
		complete = false
	} else {
		pools = append(pools, machinePool{"the control plane",
			withLabels(map[string]string{v1alpha1.LabelCluster: cl.Metadata.Name, v1alpha1.LabelControlPlane: "true"},
				class.Spec.ControlPlane.Metadata, cl.Spec.Topology.ControlPlane.Metadata),
			c.beatOf(class, cl, class.Spec.ControlPlane.MachineTemplate, patch.Target{ControlPlane: true})})
		for i, md := range cl.Spec.Topology.Workers.MachineDeployments {
			if w := classWorker(class, md.Class); w != nil {
				pools = append(pools, machinePool{"MachineDeployment " + md.Name,
					withLabels(map[string]string{v1alpha1.LabelCluster: cl.Metadata.Name, v1alpha1.LabelDeployment: md.Name},
						w.Metadata, md.Metadata), c.beatOf(class, cl, w.Template, patch.Target{MachineDeployment: &cl.Spec.Topology.Workers.MachineDeployments[i]})})
			} else {
				complete = false
			}
		}
	}
	for _, md := range fleet.MachineDeployments {
		if md.Spec.ClusterName == cl.Metadata.Name {
			pools = append(pools, machinePool{"MachineDeployment " + md.Metadata.Name,
				map[string]string{v1alpha1.LabelCluster: cl.Metadata.Name, v1alpha1.LabelDeployment: md.Metadata.Name},
				templateBeat(md.Spec.Template)})
		}
	}
	return pools, complete
}

// withLabels adds the labels of meta to own, which win, as the planner
// gives them to machines.
func withLabels(own map[string]string, meta ...v1alpha1.MachineMetadata) map[string]string {
	out := map[string]string{}
	for _, m := range meta {
		maps.Copy(out, m.Labels)
	}
	maps.Copy(out, own)
	return out
}

// labelText writes labels as {k: v, ...}, sorted, leaving out the cluster
// label every machine of the cluster has.
func labelText(labels map[string]string) string {
	var parts []string
	for _, k := range keys(labels) {
		if k != v1alpha1.LabelCluster {
			parts = append(parts, fmt.Sprintf("%s: %s", k, labels[k]))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
