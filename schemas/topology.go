package schemas

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/schemas/patch"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// checkClass checks a class's own references: worker classes unique, patches
// naming declared variables and worker classes, variable constraints that
// compile and defaults that satisfy them.
func (c *checker) checkClass(cl *v1alpha1.ClusterClass) {
	o := c.objectOf(v1alpha1.KindClusterClass, cl.Metadata.Name)
	workers := map[string]bool{}
	for i, md := range cl.Spec.Workers.MachineDeployments {
		if workers[md.Class] {
			c.errorAt(o, fmt.Sprintf("spec.workers.machineDeployments[%d].class", i), "duplicate worker class %q: rename one", md.Class)
		}
		workers[md.Class] = true
	}
	declared := map[string]bool{}
	for i, v := range cl.Spec.Variables {
		p := fmt.Sprintf("spec.variables[%d]", i)
		if declared[v.Name] {
			c.errorAt(o, p+".name", "duplicate variable %q: rename one", v.Name)
		}
		declared[v.Name] = true
		cv, err := c.vars.compile(cl, i)
		var se *schemaError
		switch {
		case errors.As(err, &se):
			c.errorAt(o, p+".schema.openAPIV3Schema", "is not an OpenAPI v3 schema CUE can read: %v", se.err)
			continue
		case err != nil:
			c.errorAt(o, p+".constraint", "%q is not a CUE constraint: %v", v.Constraint, err)
			continue
		}
		if def := variableDefault(v); def != nil {
			if msg := cv.check(def); msg != "" {
				field := p + ".default"
				if v.Default == nil {
					field = p + ".schema.openAPIV3Schema.default"
				}
				c.errorAt(o, field, "%s does not satisfy %s: %s", describe(def), constraintName(v), msg)
			}
		}
	}
	for i, pt := range cl.Spec.Patches {
		p := fmt.Sprintf("spec.patches[%d]", i)
		if pt.EnabledIf != "" {
			if _, err := patch.ParseTemplate(pt.EnabledIf); err != nil {
				c.errorAt(o, p+".enabledIf", "is not a Go template: %v", err)
			}
		}
		for j, d := range pt.Definitions {
			dp := fmt.Sprintf("%s.definitions[%d]", p, j)
			m := d.Selector.MatchResources
			if !m.ControlPlane && (m.MachineDeploymentClass == nil || len(m.MachineDeploymentClass.Names) == 0) {
				c.errorAt(o, dp+".selector.matchResources", "selects no machine template: set controlPlane: true or machineDeploymentClass: {names: [...]}")
			}
			if mc := m.MachineDeploymentClass; mc != nil {
				for k, w := range mc.Names {
					if !workers[w] {
						c.errorAt(o, fmt.Sprintf("%s.selector.matchResources.machineDeploymentClass.names[%d]", dp, k), "%s", notFound("worker class", w, "", keys(workers)))
					}
				}
			}
			for k, op := range d.JSONPatches {
				c.checkJSONPatch(o, fmt.Sprintf("%s.jsonPatches[%d]", dp, k), op, declared)
			}
		}
	}
}

// builtins are the builtin variables patches may read (Cluster API's, as
// far as gitfleet has them).
var builtins = []string{
	"builtin.cluster.name", "builtin.cluster.namespace", "builtin.cluster.topology.version", "builtin.cluster.topology.class",
	"builtin.cluster.network.serviceDomain", "builtin.cluster.network.pods", "builtin.cluster.network.services",
	"builtin.controlPlane.version", "builtin.controlPlane.replicas", "builtin.controlPlane.name",
	"builtin.machineDeployment.version", "builtin.machineDeployment.class", "builtin.machineDeployment.name",
	"builtin.machineDeployment.topologyName", "builtin.machineDeployment.replicas",
}

// variableDefault is a variable's default, its own or its schema's, with
// its schema's nested defaults filled in; nil when it has none.
func variableDefault(v v1alpha1.ClassVariable) any {
	return withSchemaDefaults(&v, v.Default)
}

// withSchemaDefaults fills in the defaults of v's schema, if it has one,
// as the planner will before the value is used.
func withSchemaDefaults(v *v1alpha1.ClassVariable, value any) any {
	if v.Schema == nil {
		return value
	}
	return patch.WithDefaults(v.Schema.OpenAPIV3Schema, value)
}

// constraintName says what a variable's value must satisfy, for messages.
func constraintName(v v1alpha1.ClassVariable) string {
	switch {
	case v.Schema != nil && v.Constraint != "":
		return fmt.Sprintf("%s, the constraint, and schema.openAPIV3Schema", v.Constraint)
	case v.Schema != nil:
		return "schema.openAPIV3Schema"
	}
	return v.Constraint + ", the constraint"
}

// checkJSONPatch: an op gitfleet has, a pointer into the machine template,
// a value for add and replace (and none for remove), a variable the class
// declares or a builtin, and a template that parses.
func (c *checker) checkJSONPatch(o *Object, f string, op v1alpha1.JSONPatch, declared map[string]bool) {
	if _, err := patch.ParsePointer(op.Path); err != nil {
		c.errorAt(o, f+".path", "%v", err)
	}
	vf := op.ValueFrom
	switch {
	case op.Op == v1alpha1.PatchRemove && (op.Value != nil || vf != nil):
		c.errorAt(o, f, "op remove takes no value or valueFrom: remove them")
	case op.Op != v1alpha1.PatchRemove && op.Value == nil && vf == nil:
		c.errorAt(o, f, "op %s needs value or valueFrom (variable or template)", op.Op)
	case op.Value != nil && vf != nil:
		c.errorAt(o, f, "has both value and valueFrom: keep one")
	case vf != nil && (vf.Variable == "") == (vf.Template == ""):
		c.errorAt(o, f+".valueFrom", "needs exactly one of variable and template")
	case vf != nil && vf.Variable != "":
		name, _, _ := strings.Cut(strings.SplitN(vf.Variable, "[", 2)[0], ".")
		if name == "builtin" {
			if !slices.Contains(builtins, vf.Variable) {
				c.errorAt(o, f+".valueFrom.variable", "%s", notFound("builtin variable", vf.Variable, "", builtins))
			}
		} else if !declared[name] {
			c.errorAt(o, f+".valueFrom.variable", "%s", notFound("variable", name, "", keys(declared)))
		}
	case vf != nil:
		if _, err := patch.ParseTemplate(vf.Template); err != nil {
			c.errorAt(o, f+".valueFrom.template", "is not a Go template: %v", err)
		}
	}
}

// checkCluster checks a cluster against its class.
func (c *checker) checkCluster(cl *v1alpha1.Cluster) {
	o := c.objectOf(v1alpha1.KindCluster, cl.Metadata.Name)
	classObj := c.objectOf(v1alpha1.KindClusterClass, cl.Spec.Topology.ClassRef.Name)
	if classObj == nil {
		c.danglingAt(o, "spec.topology.classRef.name", notFound("ClusterClass", cl.Spec.Topology.ClassRef.Name, "", keys(c.byKind[v1alpha1.KindClusterClass])))
		return
	}
	if classObj.Invalid {
		return // its own errors say what to fix first
	}
	class := classObj.Value.(*v1alpha1.ClusterClass)
	workers := map[string]bool{}
	for _, md := range class.Spec.Workers.MachineDeployments {
		workers[md.Class] = true
	}
	// Health checks are held to the heartbeats the machines get, after
	// the class's patches (beats.go).
	cpTarget := patch.Target{ControlPlane: true}
	cpBeat := c.beatOf(class, cl, class.Spec.ControlPlane.MachineTemplate, cpTarget)
	c.checkTopologyHealth(o, "spec.topology.controlPlane.healthCheck", "the control plane", class.Spec.ControlPlane.HealthCheck,
		cl.Spec.Topology.ControlPlane.HealthCheck, cpBeat)
	c.checkClassBeat(classObj, class, "spec.controlPlane.healthCheck", "the control plane", class.Spec.ControlPlane.HealthCheck,
		cl.Spec.Topology.ControlPlane.HealthCheck, cpTarget, cpBeat, cl)
	names := map[string]bool{}
	for i, md := range cl.Spec.Topology.Workers.MachineDeployments {
		p := fmt.Sprintf("spec.topology.workers.machineDeployments[%d]", i)
		if !workers[md.Class] {
			c.errorAt(o, p+".class", "%s", notFound("worker class", md.Class, fmt.Sprintf("ClusterClass %q", class.Metadata.Name), keys(workers)))
		} else if ci, mdc := classWorkerAt(class, md.Class); mdc != nil {
			t := patch.Target{MachineDeployment: &cl.Spec.Topology.Workers.MachineDeployments[i]}
			b := c.beatOf(class, cl, mdc.Template, t)
			c.checkTopologyHealth(o, p+".healthCheck", "MachineDeployment "+md.Name, mdc.HealthCheck, md.HealthCheck, b)
			c.checkClassBeat(classObj, class, fmt.Sprintf("spec.workers.machineDeployments[%d].healthCheck", ci),
				"worker class "+md.Class, mdc.HealthCheck, md.HealthCheck, t, b, cl)
		}
		if names[md.Name] {
			c.errorAt(o, p+".name", "duplicate machine deployment name %q in this cluster: rename one", md.Name)
		}
		names[md.Name] = true
	}
	if c.checkVariables(o, cl, class) {
		c.checkTemplates(cl, class)
	}
}

// checkTopologyHealth: a cluster's healthCheck with enabled: true has
// rules, its own or the class's, and its own rules do not use the Ready
// Unknown condition on a provider that sends no heartbeats, nor wait less
// than two heartbeats for it (b: the machines' provider and interval,
// after the class's patches).
func (c *checker) checkTopologyHealth(o *Object, field, what string, class *v1alpha1.HealthRules, top *v1alpha1.TopologyHealthCheck, b beat) {
	if top == nil {
		return
	}
	if top.Enabled != nil && *top.Enabled && class == nil && !top.Overrides() {
		c.errorAt(o, field+".enabled", "is true, but neither the class nor this cluster defines a health check for %s: add checks here or to the class, or remove enabled", what)
	}
	if top.Overrides() {
		add := func(f, format string, args ...any) { c.errorAt(o, f, format, args...) }
		checkSilent(add, field, what, b, &top.HealthRules)
		checkBeatTimeout(add, field, what, b, &top.HealthRules)
	}
}

func classWorker(class *v1alpha1.ClusterClass, name string) *v1alpha1.MachineDeploymentClass {
	_, w := classWorkerAt(class, name)
	return w
}

// classWorkerAt is the worker class of that name and its index in the
// class's spec.workers.machineDeployments; nil when there is none.
func classWorkerAt(class *v1alpha1.ClusterClass, name string) (int, *v1alpha1.MachineDeploymentClass) {
	for i := range class.Spec.Workers.MachineDeployments {
		if class.Spec.Workers.MachineDeployments[i].Class == name {
			return i, &class.Spec.Workers.MachineDeployments[i]
		}
	}
	return -1, nil
}

// checkVariables: every variable set is declared by the class, set once and
// satisfies the class's constraint; every required one without a default is
// set. It reports whether all of that holds.
func (c *checker) checkVariables(o *Object, cl *v1alpha1.Cluster, class *v1alpha1.ClusterClass) bool {
	before := len(c.errs)
	index := map[string]int{}
	for i, v := range class.Spec.Variables {
		index[v.Name] = i
	}
	set := map[string]bool{}
	for i, v := range cl.Spec.Topology.Variables {
		p := fmt.Sprintf("spec.topology.variables[%d]", i)
		ci, ok := index[v.Name]
		if !ok {
			c.errorAt(o, p+".name", "%s", notFound("variable", v.Name, fmt.Sprintf("ClusterClass %q", class.Metadata.Name), keys(index)))
			continue
		}
		if set[v.Name] {
			c.errorAt(o, p+".name", "variable %q is set twice: remove one", v.Name)
			continue
		}
		set[v.Name] = true
		cv, err := c.vars.compile(class, ci)
		if err != nil {
			continue // reported on the class
		}
		decl := class.Spec.Variables[ci]
		if msg := cv.check(withSchemaDefaults(&decl, v.Value)); msg != "" {
			where := class.Source.String()
			if co := c.objectOf(v1alpha1.KindClusterClass, class.Metadata.Name); co != nil {
				where = co.placeOf(fmt.Sprintf("spec.variables[%d]", ci))
			}
			c.errorAt(o, p+".value", "%s does not satisfy %s of variable %q in ClusterClass %q (%s): %s",
				describe(v.Value), constraintName(decl), v.Name, class.Metadata.Name, where, msg)
		}
	}
	for _, v := range class.Spec.Variables {
		if v.Required && variableDefault(v) == nil && !set[v.Name] {
			c.errorAt(o, "spec.topology", "variable %q is required by ClusterClass %q: add it to spec.topology.variables", v.Name, class.Metadata.Name)
		}
	}
	return len(c.errs) == before
}
