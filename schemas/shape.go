package schemas

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"cuelang.org/go/cue"
)

// shape is the set of field names the schema allows at each level. CUE
// reports a closed-struct violation only when a document has no other error,
// so unknown fields are found here instead, all of them, with a suggestion.
type shape struct {
	fields   map[string]*shape // nil: not a struct
	open     bool              // any field allowed (a map like labels, or {...})
	elem     *shape            // list element
	template bool              // a machine template: spec's shape depends on provider
	// kind is the kinds of value the schema takes here (cue.TopKind:
	// any), so that a value of another kind is told in words (kinds.go).
	kind     cue.Kind
	optional bool     // a field that may be left out
	names    []string // fields in the schema's order, for hints
	pattern  *shape   // the value of each field of a map like labels ([string]: T)
}

// shapes is the allowed-field tree of every kind and provider spec.
type shapes struct {
	kinds     map[string]*shape
	providers map[string]*shape
}

func buildShapes(root cue.Value) *shapes {
	s := &shapes{kinds: map[string]*shape{}, providers: map[string]*shape{}}
	for kind, def := range kindDefs {
		s.kinds[kind] = shapeOf(root.LookupPath(cue.ParsePath(def)), 0)
	}
	it, _ := root.LookupPath(cue.ParsePath("#providers")).Fields(cue.Definitions(false))
	for it != nil && it.Next() {
		name := it.Selector().Unquoted()
		s.providers[name] = shapeOf(it.Value(), 0)
	}
	return s
}

func shapeOf(v cue.Value, depth int) *shape {
	sh := &shape{kind: cue.TopKind}
	if depth > 32 {
		sh.open = true
		return sh
	}
	k := v.IncompleteKind()
	if k != cue.BottomKind {
		sh.kind = k
	}
	if k&cue.ListKind != 0 {
		sh.elem = shapeOf(v.LookupPath(cue.MakePath(cue.AnyIndex)), depth+1)
	}
	if k&cue.StructKind == 0 {
		return sh
	}
	sh.fields = map[string]*shape{}
	if p := v.LookupPath(cue.MakePath(cue.AnyString)); p.Exists() || v.Allows(cue.AnyString) {
		sh.open = true
		if p.Exists() {
			sh.pattern = shapeOf(p, depth+1)
		}
	}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		sh.open = true
		return sh
	}
	for it.Next() {
		sel := it.Selector()
		if sel.IsDefinition() || sel.PkgPath() != "" {
			continue
		}
		f := shapeOf(it.Value(), depth+1)
		f.optional = it.IsOptional()
		sh.fields[sel.Unquoted()] = f
		sh.names = append(sh.names, sel.Unquoted())
	}
	if _, ok := sh.fields["provider"]; ok {
		sh.template = true // #MachineTemplate: spec's fields come from #providers[provider]
	}
	return sh
}

// unknownFields reports every field of value that the kind's schema does not
// allow.
func (s *shapes) unknownFields(kind string, value any, d *doc, path string) []Error {
	var errs []Error
	s.walk(s.kinds[kind], value, "", func(field, key string, allowed *shape) {
		msg := fmt.Sprintf("unknown field %q", key)
		if hint, ok := renamedFields[kind+" "+listIndex.ReplaceAllString(field, "[]")]; ok {
			msg += ": " + hint
		} else if sug := suggest(key, keys(allowed.fields)); sug != "" {
			msg += fmt.Sprintf("; did you mean %q?", sug)
		} else if len(allowed.fields) > 0 {
			msg += "; allowed here: " + strings.Join(keys(allowed.fields), ", ")
		}
		errs = append(errs, d.errorAt(path, field, msg))
	})
	return errs
}

// renamedFields names the gitfleet field for a field written as Cluster API
// v1beta1 (or an earlier gitfleet) wrote it, keyed by kind and field path
// with list indexes as []. docs/fleet-api.md has the whole table.
var renamedFields = map[string]string{
	"Cluster spec.topology.class": "Cluster API v1beta2 and gitfleet write topology.classRef.name: " +
		"replace class: NAME with classRef: {name: NAME}",
	"Cluster spec.topology.workers.machineDeployments[].strategy": "Cluster API v1beta2 and gitfleet write rollout.strategy: " +
		"move strategy under rollout:",
	"ClusterClass spec.workers.machineDeployments[].strategy": "Cluster API v1beta2 and gitfleet write rollout.strategy: " +
		"move strategy under rollout:",
	"MachineDeployment spec.strategy": "Cluster API v1beta2 and gitfleet write spec.rollout.strategy: move strategy under rollout:",
	"ClusterClass spec.patches[].set": "gitfleet writes patches as Cluster API v1beta2 does: " +
		"definitions: [{selector: {matchResources: ...}, jsonPatches: [{op: add, path: /spec/cpus, valueFrom: {variable: cpus}}]}]",
	"ClusterClass spec.patches[].selector": "the selector goes in each of definitions[], as selector.matchResources, " +
		"as Cluster API v1beta2 writes it: {controlPlane: true, machineDeploymentClass: {names: [...]}}",
	"ClusterClass spec.controlPlane.machineInfrastructure": "gitfleet writes the control plane's machines as a machine template: " +
		"spec.controlPlane.machineTemplate: {provider: NAME, spec: {...}} (gitfleet import capi converts Cluster API classes)",
	"ClusterClass spec.controlPlane.ref":         "gitfleet has no kubeadm control-plane object: write spec.controlPlane.machineTemplate",
	"ClusterClass spec.controlPlane.templateRef": "gitfleet has no kubeadm control-plane object: write spec.controlPlane.machineTemplate",
	"ClusterClass spec.controlPlane.machineHealthCheck": "Cluster API v1beta2 and gitfleet write spec.controlPlane.healthCheck " +
		"(checks, remediation)",
	"ClusterClass spec.workers.machineDeployments[].machineHealthCheck": "Cluster API v1beta2 and gitfleet write healthCheck (checks, remediation)",
	"ClusterClass spec.workers.machineDeployments[].infrastructure": "gitfleet writes a worker class's machines as a machine template: " +
		"template: {provider: NAME, spec: {...}}",
	"ClusterClass spec.workers.machineDeployments[].bootstrap": "gitfleet makes bootstrap data itself: write template: {provider: NAME, spec: {...}}",
	"Cluster spec.topology.controlPlane.machineHealthCheck":    "Cluster API v1beta2 and gitfleet write healthCheck (enabled, checks, remediation)",
	"Cluster spec.topology.workers.machineDeployments[].machineHealthCheck": "Cluster API v1beta2 and gitfleet write healthCheck " +
		"(enabled, checks, remediation)",
	"Cluster spec.topology.classNamespace": "gitfleet has no namespaces: remove it",
	"MachineDeployment spec.deletePolicy":  "Cluster API v1beta2 and gitfleet write spec.deletion.order",
	"MachineHealthCheck spec.nodeStartupTimeout": "Cluster API v1beta2 and gitfleet write spec.checks.nodeStartupTimeoutSeconds, " +
		"a number of seconds (10m is 600)",
	"MachineHealthCheck spec.unhealthyConditions": "Cluster API v1beta2 and gitfleet write spec.checks.unhealthyNodeConditions, " +
		"each with type, status and timeoutSeconds",
	"MachineHealthCheck spec.unhealthyTimeout": "gitfleet now writes a missed heartbeat as Cluster API v1beta2 does: " +
		"spec.checks.unhealthyNodeConditions: [{type: Ready, status: Unknown, timeoutSeconds: N}]",
	"MachineHealthCheck spec.maxUnhealthy":   "Cluster API v1beta2 and gitfleet write spec.remediation.triggerIf.unhealthyLessThanOrEqualTo",
	"MachineHealthCheck spec.unhealthyRange": "Cluster API v1beta2 and gitfleet write spec.remediation.triggerIf.unhealthyInRange",
}

var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

func (s *shapes) walk(sh *shape, value any, p string, report func(field, key string, allowed *shape)) {
	if sh == nil {
		return
	}
	switch v := value.(type) {
	case map[string]any:
		if sh.fields == nil {
			return // a type error; CUE reports it
		}
		for k, x := range v { // errors are sorted by position later
			sub, ok := sh.fields[k]
			if sh.template && k == "spec" {
				prov, _ := v["provider"].(string)
				sub, ok = s.providers[prov], true
			}
			if !ok {
				if !sh.open {
					report(joinField(p, k), k, sh)
				}
				continue
			}
			if isContainer(x) { // a scalar has no field to walk: no path made
				s.walk(sub, x, joinField(p, k), report)
			}
		}
	case []any:
		for i, x := range v {
			if isContainer(x) {
				s.walk(sh.elem, x, internPath(p, "", i), report)
			}
		}
	}
}

// isContainer reports whether x is a map or a list, which walk goes into.
func isContainer(x any) bool {
	switch x.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ProviderFields lists the top-level fields of provider's machine spec,
// sorted; ok is false for a provider gitfleet does not know.
func ProviderFields(provider string) (fields []string, ok bool) {
	sh, ok := allowedShapes().providers[provider]
	if !ok {
		return nil, false
	}
	return keys(sh.fields), true
}

// SendsHeartbeats reports whether provider's machines send heartbeats (so
// a missed one means something).
func SendsHeartbeats(provider string) bool { return !silentProviders()[provider] }

// Providers lists the providers gitfleet knows, sorted.
func Providers() []string { return keys(allowedShapes().providers) }
