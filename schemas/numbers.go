package schemas

import (
	"encoding/json"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// fixNumbers turns the json.Numbers that decoding with UseNumber left in
// free-form fields (template specs, variable values) into int64 or float64,
// as in Object.Raw, so 4 stays an int for CUE constraints and providers.
func fixNumbers(v any) {
	switch o := v.(type) {
	case *v1alpha1.ClusterClass:
		fixSpec(o.Spec.ControlPlane.MachineTemplate.Spec)
		for i := range o.Spec.Workers.MachineDeployments {
			fixSpec(o.Spec.Workers.MachineDeployments[i].Template.Spec)
		}
		for i := range o.Spec.Variables {
			o.Spec.Variables[i].Default = number(o.Spec.Variables[i].Default)
			if s := o.Spec.Variables[i].Schema; s != nil {
				fixSpec(s.OpenAPIV3Schema)
			}
		}
		for i := range o.Spec.Patches {
			for j := range o.Spec.Patches[i].Definitions {
				ops := o.Spec.Patches[i].Definitions[j].JSONPatches
				for k := range ops {
					ops[k].Value = number(ops[k].Value)
				}
			}
		}
	case *v1alpha1.Cluster:
		for i := range o.Spec.Topology.Variables {
			o.Spec.Topology.Variables[i].Value = number(o.Spec.Topology.Variables[i].Value)
		}
	case *v1alpha1.MachineDeployment:
		fixSpec(o.Spec.Template.Spec)
	}
}

func fixSpec(m map[string]any) {
	for k, x := range m {
		m[k] = number(x)
	}
}

// number converts json.Number values anywhere inside v.
func number(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		fixSpec(x)
	case []any:
		for i := range x {
			x[i] = number(x[i])
		}
	}
	return v
}
