package planner

import (
	"fmt"

	"github.com/gitfleet/gitfleet/schemas/patch"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
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

// poolTemplate is a machine template as a pool takes it: its provider, its
// spec as JSON (nil for none) and why the spec could not be written as
// JSON, if it could not.
type poolTemplate struct {
	provider string
	spec     []byte
	err      error
}

func templateOf(tpl v1alpha1.MachineTemplate) poolTemplate {
	if tpl.Spec == nil {
		return poolTemplate{provider: tpl.Provider}
	}
	spec, err := wire.MarshalJSON(tpl.Spec)
	return poolTemplate{provider: tpl.Provider, spec: spec, err: err}
}

// templateMemo remembers, for one expansion worker, the templates it made
// of a class's: clusters of a class whose patches read the same inputs
// (patch.InputKey) get the same template, so a class change at 10,000
// clusters patches and encodes each template once a worker, not once a
// cluster, and their pools share its JSON. A nil memo remembers nothing.
type templateMemo map[templateKey]madeTemplate

type templateKey struct {
	cc *v1alpha1.ClusterClass
	in string
}

type madeTemplate struct {
	pt   poolTemplate
	errs []patch.Error
}

// template is the target's template for cluster c, with the class's
// patches applied in order over c's variables and builtins; what a patch
// could not do becomes a problem naming c.
func (m templateMemo) template(cc *v1alpha1.ClusterClass, c *v1alpha1.Cluster, tpl v1alpha1.MachineTemplate, t patch.Target, problems *[]Problem) poolTemplate {
	key, keyed := templateKey{cc: cc}, false
	if m != nil {
		key.in, keyed = patch.InputKey(cc, c, t)
	}
	made, hit := m[key]
	if !keyed || !hit {
		out, errs := tpl, []patch.Error(nil)
		if patch.Touches(cc, t) {
			out, _, errs = patch.Apply(cc, tpl, t, patch.Variables(cc, c, t))
		}
		made = madeTemplate{pt: templateOf(out), errs: errs}
		if keyed {
			m[key] = made
		}
	}
	for _, e := range made.errs {
		*problems = append(*problems, problemf(cc.Source, e.Field, "for cluster %s: %v", c.Metadata.Name, e.Err))
	}
	return made.pt
}
