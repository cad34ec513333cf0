package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
)

// The expansion of a class's machine templates for one cluster, shared by
// the planner (which makes machines of them) and validation (which checks
// them against the provider's schema before anything is merged).

// ClassVariables resolves every variable of class cc for cluster c: the
// cluster's value for a declared variable, else the class's default.
// Undeclared and missing required variables are left to the caller.
func ClassVariables(cc *ClusterClass, c *Cluster) map[string]any {
	vals := map[string]any{}
	declared := map[string]bool{}
	for _, v := range cc.Spec.Variables {
		declared[v.Name] = true
		if v.Default != nil {
			vals[v.Name] = v.Default
		}
	}
	for _, v := range c.Spec.Topology.Variables {
		if declared[v.Name] {
			vals[v.Name] = v.Value
		}
	}
	return vals
}

// AppliedSet is one set entry of a patch that wrote a template field.
type AppliedSet struct {
	Patch, Set int    // indexes in spec.patches and its set
	Path       string // the field written, e.g. spec.cpus
	Value      any
	Variable   string // the variable the value came from; "" for a literal
}

// Field is the set entry's field path in the class: spec.patches[0].set[1].
func (a AppliedSet) Field() string { return fmt.Sprintf("spec.patches[%d].set[%d]", a.Patch, a.Set) }

// PatchError is a set entry that could not be applied.
type PatchError struct {
	AppliedSet
	Err error
}

// ApplyPatches returns a copy of tpl with the class's patches that select
// it applied in order (the control plane's template when controlPlane,
// else worker class mdClass's), the set entries it applied, and those it
// could not. An optional variable left unset leaves its field alone.
func ApplyPatches(cc *ClusterClass, tpl MachineTemplate, controlPlane bool, mdClass string, vars map[string]any) (MachineTemplate, []AppliedSet, []PatchError) {
	out := MachineTemplate{Provider: tpl.Provider}
	if tpl.Spec != nil {
		out.Spec = deepCopy(tpl.Spec).(map[string]any)
	}
	var applied []AppliedSet
	var errs []PatchError
	for pi, p := range cc.Spec.Patches {
		if !(controlPlane && p.Selector.ControlPlane) && (controlPlane || !slices.Contains(p.Selector.MachineDeploymentClass, mdClass)) {
			continue
		}
		for si, s := range p.Set {
			a := AppliedSet{Patch: pi, Set: si, Path: s.Path, Value: s.Value}
			if s.ValueFrom != nil {
				v, ok := vars[s.ValueFrom.Variable]
				if !ok {
					continue
				}
				a.Value, a.Variable = v, s.ValueFrom.Variable
			}
			if err := setPath(&out, s.Path, deepCopy(a.Value)); err != nil {
				errs = append(errs, PatchError{AppliedSet: a, Err: err})
				continue
			}
			applied = append(applied, a)
		}
	}
	return out, applied, errs
}

func setPath(t *MachineTemplate, path string, val any) error {
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
