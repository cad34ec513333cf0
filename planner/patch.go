package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// variables resolves every class variable for one cluster: the cluster's
// value, else the class default. A required variable with neither, or a
// cluster value for an undeclared variable, is a problem.
func variables(cc *v1alpha1.ClusterClass, c *v1alpha1.Cluster, problems *[]Problem) map[string]any {
	vals := map[string]any{}
	declared := map[string]bool{}
	for _, v := range cc.Spec.Variables {
		declared[v.Name] = true
		if v.Default != nil {
			vals[v.Name] = v.Default
		}
	}
	for i, v := range c.Spec.Topology.Variables {
		if !declared[v.Name] {
			*problems = append(*problems, problemf(c.Source, fmt.Sprintf("spec.topology.variables[%d].name", i),
				"class %s declares no variable %q; remove it or declare it in the class's spec.variables", cc.Metadata.Name, v.Name))
			continue
		}
		vals[v.Name] = v.Value
	}
	for _, v := range cc.Spec.Variables {
		if _, ok := vals[v.Name]; v.Required && !ok {
			*problems = append(*problems, problemf(c.Source, "spec.topology.variables",
				"class %s requires variable %q and it has no default; add {name: %s, value: ...}", cc.Metadata.Name, v.Name, v.Name))
		}
	}
	return vals
}

// applyPatches returns a copy of tpl with the class's patches that select it
// applied, in order.
func applyPatches(cc *v1alpha1.ClusterClass, tpl v1alpha1.MachineTemplate, controlPlane bool, mdClass string, vars map[string]any, src v1alpha1.Source, problems *[]Problem) v1alpha1.MachineTemplate {
	out := v1alpha1.MachineTemplate{Provider: tpl.Provider}
	if tpl.Spec != nil {
		out.Spec = deepCopy(tpl.Spec).(map[string]any)
	}
	for pi, p := range cc.Spec.Patches {
		if !(controlPlane && p.Selector.ControlPlane) && (controlPlane || !slices.Contains(p.Selector.MachineDeploymentClass, mdClass)) {
			continue
		}
		for si, s := range p.Set {
			field := fmt.Sprintf("spec.patches[%d].set[%d]", pi, si)
			val := s.Value
			if s.ValueFrom != nil {
				v, ok := vars[s.ValueFrom.Variable]
				if !ok {
					// Unset optional variable: the patch leaves the field alone.
					continue
				}
				val = v
			}
			if err := setPath(&out, s.Path, deepCopy(val)); err != nil {
				*problems = append(*problems, problemf(cc.Source, field+".path", "%v", err))
			}
		}
	}
	return out
}

func setPath(t *v1alpha1.MachineTemplate, path string, val any) error {
	parts := strings.Split(path, ".")
	if path == "provider" {
		s, ok := val.(string)
		if !ok {
			return fmt.Errorf("provider must be a string, got %T", val)
		}
		t.Provider = s
		return nil
	}
	if parts[0] != "spec" || len(parts) < 2 {
		return fmt.Errorf("%q is not a template field; write a path like spec.cpus or provider", path)
	}
	if t.Spec == nil {
		t.Spec = map[string]any{}
	}
	m := t.Spec
	for i, p := range parts[1 : len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			if _, exists := m[p]; exists {
				return fmt.Errorf("%q: %s is not an object", path, strings.Join(parts[:i+2], "."))
			}
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = val
	return nil
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}
