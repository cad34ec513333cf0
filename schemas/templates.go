package schemas

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/schemas/patch"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A class's patches write template fields from variables, so a patch to a
// field the provider does not have (spec.cpu for spec.cpus), or a variable
// value its schema refuses, would only show when every new machine fails.
// Validation therefore expands every cluster's templates the way the
// planner will (patch.Apply, with the cluster's variables) and
// checks each patched spec against its provider's schema.

// patchFinding is one patched field a provider's spec does not allow, for
// one cluster; findings of the same set entry, field and message are
// reported once, naming the clusters.
type patchFinding struct {
	class   *Object
	set     patch.Applied
	field   string // in the template, e.g. spec.cpus
	unknown bool   // the provider's spec has no such field
	msg     string
	// failed is why the patch could not be applied (field is then the
	// class's field that says so: a path, a valueFrom, an enabledIf).
	failed  string
	cluster string
}

// checkTemplates expands a cluster's control-plane and worker templates
// with its variables and patches and checks what the patches wrote.
func (c *checker) checkTemplates(cl *v1alpha1.Cluster, class *v1alpha1.ClusterClass) {
	if len(class.Spec.Patches) == 0 {
		return
	}
	classObj := c.objectOf(v1alpha1.KindClusterClass, class.Metadata.Name)
	check := func(tpl v1alpha1.MachineTemplate, t patch.Target) {
		if !patch.Touches(class, t) {
			return // nothing applies: the template is the class's, checked with it
		}
		// Clusters alike (patch.InputKey) get the same findings: a class
		// change at 10,000 clusters patches and checks each template once
		// a checker, not once a cluster.
		in, keyed := patch.InputKey(class, cl, t)
		key := templateCheck{class: class, in: in}
		found, ok := c.templates[key]
		if !keyed || !ok {
			found = c.findingsOf(classObj, class, cl, tpl, t)
			if keyed {
				if c.templates == nil {
					c.templates = map[templateCheck][]patchFinding{}
				}
				c.templates[key] = found
			}
		}
		for _, f := range found {
			f.cluster = cl.Metadata.Name
			c.findings = append(c.findings, f)
		}
	}
	check(class.Spec.ControlPlane.MachineTemplate, patch.Target{ControlPlane: true})
	for i, md := range cl.Spec.Topology.Workers.MachineDeployments {
		if w := classWorker(class, md.Class); w != nil {
			check(w.Template, patch.Target{MachineDeployment: &cl.Spec.Topology.Workers.MachineDeployments[i]})
		}
	}
}

// templateCheck keys what checkTemplates found for a target of a class's
// clusters alike (patch.InputKey).
type templateCheck struct {
	class *v1alpha1.ClusterClass
	in    string
}

// findingsOf is what applying class's patches to target t's template for
// cluster cl finds, naming no cluster.
func (c *checker) findingsOf(classObj *Object, class *v1alpha1.ClusterClass, cl *v1alpha1.Cluster, tpl v1alpha1.MachineTemplate, t patch.Target) []patchFinding {
	var found []patchFinding
	out, applied, errs := patch.Apply(class, tpl, t, patch.Variables(class, cl, t))
	for _, e := range errs {
		found = append(found, patchFinding{class: classObj, set: e.Applied, field: e.Field, failed: e.Err.Error()})
	}
	if len(applied) == 0 {
		return found
	}
	for _, v := range c.vars.specViolations(out) {
		a, ok := blame(applied, v.field)
		if !ok {
			continue // not written by a patch: reported on the class itself
		}
		found = append(found, patchFinding{class: classObj, set: a, field: v.field, unknown: v.unknown, msg: v.msg})
	}
	return found
}

// blame returns the last JSON patch that wrote field, a field inside it or
// a field around it.
func blame(applied []patch.Applied, field string) (patch.Applied, bool) {
	for i := len(applied) - 1; i >= 0; i-- {
		p := applied[i].Path
		if p == field || strings.HasPrefix(field, p+".") || strings.HasPrefix(field, p+"[") ||
			strings.HasPrefix(p, field+".") || strings.HasPrefix(p, field+"[") {
			return applied[i], true
		}
	}
	return patch.Applied{}, false
}

// patchErrors turns findings into errors at each JSON patch's line, one
// per JSON patch, field and message, naming the clusters. A patch that
// fails at a field where reported has an error already is that error met
// again by each cluster (a path that is not a pointer, a template that
// does not parse: the class's own checks say so), and is left out.
func patchErrors(findings []patchFinding, reported []Error) []Error {
	type key struct {
		class             string
		patch, def, op    int
		field, value, msg string
	}
	type place struct {
		path      string
		line, col int
		field     string
	}
	var said map[place]bool
	groups := map[key][]*patchFinding{}
	var order []key
	for i := range findings {
		f := &findings[i]
		if f.failed != "" {
			if said == nil {
				said = map[place]bool{}
				for _, e := range reported {
					said[place{e.Path, e.Line, e.Col, e.Field}] = true
				}
			}
			if e := f.class.ErrorAt(f.field, ""); said[place{e.Path, e.Line, e.Col, e.Field}] {
				continue
			}
		}
		k := key{f.class.Name, f.set.Patch, f.set.Definition, f.set.Op, f.field, describe(f.set.Value), f.msg + f.failed}
		if f.unknown || f.failed != "" {
			k.value = "" // the field is unknown whatever the value
		}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], f)
	}
	var out []Error
	for _, k := range order {
		fs := groups[k]
		f := fs[0]
		var names []string
		for _, g := range fs {
			if !slices.Contains(names, g.cluster) {
				names = append(names, g.cluster)
			}
		}
		sort.Strings(names)
		who := "cluster " + names[0]
		if len(names) > 1 {
			who = fmt.Sprintf("clusters %s", strings.Join(names[:min(3, len(names))], ", "))
			if len(names) > 3 {
				who += fmt.Sprintf(" and %d more", len(names)-3)
			}
		}
		value := describe(f.set.Value)
		switch {
		case f.set.Variable != "":
			value += fmt.Sprintf(" (variable %s)", f.set.Variable)
		case f.set.Template != "":
			value += " (from its template)"
		}
		var msg, field string
		switch {
		case f.failed != "":
			field = f.field
			msg = fmt.Sprintf("patch %q fails for %s: %s", patchName(f), who, f.failed)
		case f.unknown:
			field = f.set.Field() + ".path"
			msg = fmt.Sprintf("patch %q sets %s for %s, but %s", patchName(f), f.field, who, f.msg)
		default:
			field = f.set.Field()
			msg = fmt.Sprintf("patch %q sets %s to %s for %s, %s", patchName(f), f.field, value, who, f.msg)
		}
		out = append(out, f.class.ErrorAt(field, msg))
	}
	return out
}

func patchName(f *patchFinding) string {
	class := f.class.Value.(*v1alpha1.ClusterClass)
	return class.Spec.Patches[f.set.Patch].Name
}

// specViolation is one field of a machine template its provider's schema
// does not allow.
type specViolation struct {
	field   string
	unknown bool
	msg     string
}

// specViolations checks a machine template against its provider's schema:
// unknown fields with what is allowed, and values the schema refuses with
// its help text.
func (vs *variables) specViolations(tpl v1alpha1.MachineTemplate) []specViolation {
	sh := allowedShapes()
	prov, ok := sh.providers[tpl.Provider]
	if !ok || tpl.Spec == nil {
		return nil // an unknown provider is reported where it is written
	}
	// Clusters of a class mostly expand to the same few templates: keyed
	// by provider (length first, so no two keys run together) and spec.
	spec, err := wire.MarshalJSON(tpl.Spec)
	key := strconv.Itoa(len(tpl.Provider)) + ":" + tpl.Provider + string(spec)
	if err == nil {
		if out, ok := vs.specs[key]; ok {
			return out
		}
	}
	out := vs.checkSpec(sh, prov, tpl)
	if err == nil {
		if vs.specs == nil {
			vs.specs = map[string][]specViolation{}
		}
		vs.specs[key] = out
	}
	return out
}

func (vs *variables) checkSpec(sh *shapes, prov *shape, tpl v1alpha1.MachineTemplate) []specViolation {
	var out []specViolation
	sh.walk(prov, tpl.Spec, "spec", func(field, key string, allowed *shape) {
		msg := fmt.Sprintf("provider %s's spec has no field %q", tpl.Provider, key)
		if sug := suggest(key, keys(allowed.fields)); sug != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", sug)
		}
		if len(allowed.fields) > 0 {
			msg += "; it allows: " + strings.Join(keys(allowed.fields), ", ")
		}
		out = append(out, specViolation{field: field, unknown: true, msg: msg})
	})
	if _, why, short := heartbeatTooShort(prov, tpl.Spec); short {
		out = append(out, specViolation{field: "spec.heartbeatInterval", msg: fmt.Sprintf("which provider %s's spec refuses: %s", tpl.Provider, why)})
	}
	if vs.v.used++; vs.v.used >= rotateAfter {
		vs.rotate()
	}
	err := safely(func() error {
		data := map[string]any{"provider": tpl.Provider, "spec": tpl.Spec}
		if vs.v.precheckTemplate(data) {
			return nil // CUE would find nothing wrong (precheck.go)
		}
		v := vs.v.root.LookupPath(cue.ParsePath("#MachineTemplate")).Unify(vs.ctx.Encode(data))
		verr := v.Validate(cue.Concrete(true), cue.All())
		if verr == nil {
			return nil
		}
		for _, g := range groupErrors(verr, data, 1) {
			if strings.Contains(g.msg, "field not allowed") {
				continue // reported as unknown above
			}
			msg := g.msg
			x, _ := lookupRaw(data, g.path)
			want := sh.at(&shape{fields: map[string]*shape{"spec": prov}}, data, g.path)
			var n yaml.Node
			help, hasHelp := "", false
			if n.Encode(x) == nil {
				help, hasHelp = helpFor(v, g.path, &n)
			}
			switch {
			case hasHelp:
				msg = help
			case kindMismatch(want, x, false):
				// Not CUE's dump of the schema: the patch's value is in
				// the message already, what the spec takes there is said.
				msg = expectedWords(want) + " is expected"
			}
			out = append(out, specViolation{field: g.field, msg: fmt.Sprintf("which provider %s's spec refuses: %s", tpl.Provider, msg)})
		}
		return nil
	})
	if err != nil {
		vs.v.used = rotateAfter // do not reuse a context CUE panicked in
	}
	return out
}
