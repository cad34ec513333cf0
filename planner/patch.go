package planner

import (
	"fmt"

	"github.com/gitfleet/gitfleet/schemas/patch"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// checkVariables reports a required variable with neither a cluster value
// nor a class default, and a cluster value for an undeclared variable.
func checkVariables(cc *v1alpha1.ClusterClass, c *v1alpha1.Cluster, problems *[]Problem) {
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
	vals := patch.ClassVariables(cc, c)
	for _, v := range cc.Spec.Variables {
		if _, ok := vals[v.Name]; v.Required && !ok {
			*problems = append(*problems, problemf(c.Source, "spec.topology.variables",
				"class %s requires variable %q and it has no default; add {name: %s, value: ...}", cc.Metadata.Name, v.Name, v.Name))
		}
	}
}

// applyPatches returns a copy of the target's template with the class's
// patches applied, in order, over cluster c's variables and builtins.
func applyPatches(cc *v1alpha1.ClusterClass, c *v1alpha1.Cluster, tpl v1alpha1.MachineTemplate, t patch.Target, problems *[]Problem) v1alpha1.MachineTemplate {
	if !patch.Touches(cc, t) {
		return tpl
	}
	out, _, errs := patch.Apply(cc, tpl, t, patch.Variables(cc, c, t))
	for _, e := range errs {
		*problems = append(*problems, problemf(cc.Source, e.Field, "for cluster %s: %v", c.Metadata.Name, e.Err))
	}
	return out
}
