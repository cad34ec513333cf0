package schemas

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/schemas/patch"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// A Ready Unknown condition is held to the heartbeats a machine sends —
// whether its provider sends any (checkSilent), and how often
// (checkBeatTimeout) — which a class's patches may set per cluster (a
// variable's value, a literal): the class's template as written says what
// the machines of a cluster get only when no patch may write it. Such a
// check is then made for each cluster, with its templates patched as the
// planner patches them.

// beat is how often a pool's machines send heartbeats (heartbeatEvery's),
// the patch that wrote their interval ("": the template as written) and
// the variable it took it from ("": a literal or a template); and the
// provider that makes them, with the patch and variable that wrote it.
type beat struct {
	every           time.Duration
	patch, variable string
	provider        string
	providerPatch   string
	providerVar     string
}

// templateBeat is the heartbeats of machines made from tpl as written.
func templateBeat(tpl v1alpha1.MachineTemplate) beat {
	return beat{every: heartbeatEvery(tpl), provider: tpl.Provider}
}

// patchesBeat reports whether a patch of class may write the heartbeat
// interval of target t's machines: a JSON patch of a definition that
// selects t writes spec.heartbeatInterval, the whole spec, or the provider
// (whose default interval, or lack of heartbeats, it then is).
func patchesBeat(class *v1alpha1.ClusterClass, t patch.Target) bool {
	return patchesAny(class, t, writesBeat)
}

// patchesProvider reports whether a patch of class may write the provider
// of target t's machines (/provider), and with it whether they send
// heartbeats at all.
func patchesProvider(class *v1alpha1.ClusterClass, t patch.Target) bool {
	return patchesAny(class, t, writesProvider)
}

// patchesAny reports whether a JSON patch of a definition of class that
// selects t writes a field (dotted, as spec.heartbeatInterval) for which
// writes is true.
func patchesAny(class *v1alpha1.ClusterClass, t patch.Target, writes func(field string) bool) bool {
	for _, p := range class.Spec.Patches {
		for _, d := range p.Definitions {
			if !patch.Selects(d.Selector, t) {
				continue
			}
			for _, op := range d.JSONPatches {
				if ptr, err := patch.ParsePointer(op.Path); err == nil && writes(ptr.Dotted()) {
					return true
				}
			}
		}
	}
	return false
}

func writesBeat(field string) bool {
	return field == "spec" || field == "spec.heartbeatInterval" || writesProvider(field)
}

func writesProvider(field string) bool { return field == "provider" }

// beatOf is how often cluster cl's machines of target t, made from class's
// template tpl, send heartbeats once the class's patches are applied.
// Clusters alike (patch.InputKey) are patched once a checker.
func (c *checker) beatOf(class *v1alpha1.ClusterClass, cl *v1alpha1.Cluster, tpl v1alpha1.MachineTemplate, t patch.Target) beat {
	if class == nil || !patchesBeat(class, t) {
		return templateBeat(tpl)
	}
	in, keyed := patch.InputKey(class, cl, t)
	key := templateCheck{class: class, in: in}
	if b, ok := c.beatMemo[key]; keyed && ok {
		return b
	}
	b := patchedBeat(class, cl, tpl, t)
	if keyed {
		if c.beatMemo == nil {
			c.beatMemo = map[templateCheck]beat{}
		}
		c.beatMemo[key] = b
	}
	return b
}

// patchedBeat is beatOf's, patching tpl.
func patchedBeat(class *v1alpha1.ClusterClass, cl *v1alpha1.Cluster, tpl v1alpha1.MachineTemplate, t patch.Target) beat {
	out, applied, _ := patch.Apply(class, tpl, t, patch.Variables(class, cl, t))
	b := templateBeat(out)
	for i := len(applied) - 1; i >= 0; i-- {
		if writesBeat(applied[i].Path) {
			b.patch, b.variable = class.Spec.Patches[applied[i].Patch].Name, applied[i].Variable
			break
		}
	}
	for i := len(applied) - 1; i >= 0; i-- {
		if writesProvider(applied[i].Path) {
			b.providerPatch, b.providerVar = class.Spec.Patches[applied[i].Patch].Name, applied[i].Variable
			break
		}
	}
	return b
}

// classTarget is the patch target of a class's worker class (its
// topologies' class).
func classTarget(class string) patch.Target {
	return patch.Target{MachineDeployment: &v1alpha1.MachineDeploymentTopology{Class: class}}
}

// beatFinding is a class's health rules found too quick for the heartbeats
// of one cluster's machines, or waiting for heartbeats its provider does
// not send, which a patch of the class may set: findings
// of the same rules and interval are reported once, at the class's field,
// naming the clusters.
type beatFinding struct {
	class   *Object
	field   string // the class's health rules: spec.controlPlane.healthCheck
	what    string // "worker class worker"
	beat    beat
	rules   *v1alpha1.HealthRules
	cluster string
}

// checkClassBeat checks the class's health rules of target t (at field,
// rules; nil: none) against the heartbeats of cluster cl's machines (b),
// when a patch of the class may set them (their provider, their
// interval), so that the class's own check, which reads the template as
// written, was not made (semanticChecks). A cluster whose own rules
// replace or disable the class's (top) is checked with those
// (checkTopologyHealth).
func (c *checker) checkClassBeat(classObj *Object, class *v1alpha1.ClusterClass, field, what string, rules *v1alpha1.HealthRules,
	top *v1alpha1.TopologyHealthCheck, t patch.Target, b beat, cl *v1alpha1.Cluster) {
	if rules == nil || classObj == nil || !patchesBeat(class, t) || top.Overrides() || top != nil && top.Enabled != nil && !*top.Enabled {
		return
	}
	var found bool
	flag := func(string, string, ...any) { found = true }
	if patchesProvider(class, t) {
		checkSilent(flag, field, what, b, rules)
	}
	checkBeatTimeout(flag, field, what, b, rules)
	if found {
		c.beats = append(c.beats, beatFinding{class: classObj, field: field, what: what, beat: b, rules: rules, cluster: cl.Metadata.Name})
	}
}

// beatErrors turns findings into errors at the class's fields, one per
// field and interval, naming the clusters (three, and how many more).
func beatErrors(findings []beatFinding) Errors {
	type key struct {
		class *Object
		field string
		beat  beat
	}
	groups := map[key][]string{}
	var order []key
	first := map[key]*beatFinding{}
	for i := range findings {
		f := &findings[i]
		k := key{f.class, f.field, f.beat}
		if groups[k] == nil {
			order = append(order, k)
			first[k] = f
		}
		if !slices.Contains(groups[k], f.cluster) {
			groups[k] = append(groups[k], f.cluster)
		}
	}
	var out Errors
	for _, k := range order {
		names := groups[k]
		sort.Strings(names)
		who := "cluster " + names[0]
		if len(names) > 1 {
			who = "clusters " + strings.Join(names[:min(3, len(names))], ", ")
			if len(names) > 3 {
				who += fmt.Sprintf(" and %d more", len(names)-3)
			}
		}
		f := first[k]
		add := func(field, format string, args ...any) {
			out = append(out, objectError(f.class, field, fmt.Sprintf(format, args...)))
		}
		// A provider that sends no heartbeats has no interval: one of
		// the two at most says something.
		checkSilent(add, f.field, f.what+" of "+who, f.beat, f.rules)
		checkBeatTimeout(add, f.field, f.what+" of "+who, f.beat, f.rules)
	}
	return out
}
