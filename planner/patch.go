package planner

import (
	"fmt"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// variables resolves every class variable for one cluster: the cluster's
// value, else the class default. A required variable with neither, or a
// cluster value for an undeclared variable, is a problem.
func variables(cc *v1alpha1.ClusterClass, c *v1alpha1.Cluster, problems *[]Problem) map[string]any {
	declared := map[string]bool{}
	for _, v := range cc.Spec.Variables {
		declared[v.Name] = true
	}
	for i, v := range c.Spec.Topology.Variables {
		if !declared[v.Name] {
			*problems = append(*problems, problemf(c.Source, fmt.Sprintf("spec.topology.variables[%d].name", i),
				"class %s declares no variable %q; remove it or declare it in the class's spec.variables", cc.Metadata.Name, v.Name))
		}
	}
	vals := v1alpha1.ClassVariables(cc, c)
	for _, v := range cc.Spec.Variables {
		if _, ok := vals[v.Name]; v.Required && !ok {
			*problems = append(*problems, problemf(c.Source, "spec.topology.variables",
				"class %s requires variable %q and it has no default; add {name: %s, value: ...}", cc.Metadata.Name, v.Name, v.Name))
		}
	}
	return vals
}

// applyPatches returns a copy of tpl with the class's patches that select
// it applied, in order.
func applyPatches(cc *v1alpha1.ClusterClass, tpl v1alpha1.MachineTemplate, controlPlane bool, mdClass string, vars map[string]any, src v1alpha1.Source, problems *[]Problem) v1alpha1.MachineTemplate {
	out, _, errs := v1alpha1.ApplyPatches(cc, tpl, controlPlane, mdClass, vars)
	for _, e := range errs {
		*problems = append(*problems, problemf(cc.Source, e.Field()+".path", "%v", e.Err))
	}
	return out
}
