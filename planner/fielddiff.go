package planner

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// FieldChange is one field of one fleet object that differs between two
// revisions: Object names it ("cluster dev-1", "class standard",
// "machinedeployment x", "healthcheck y"), Path is the field inside it
// (spec.topology.workers.machineDeployments[md-0].replicas), From and To
// are its values as text ("" and Created/Deleted for a whole object).
type FieldChange struct {
	Object  string `json:"object"`
	Path    string `json:"path,omitempty"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Created bool   `json:"created,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
}

// String reads "class standard: spec.version: v1.31.2 → v1.32.0".
func (c FieldChange) String() string {
	switch {
	case c.Created:
		return c.Object + " created"
	case c.Deleted:
		return c.Object + " deleted"
	}
	return c.Object + ": " + c.Path + ": " + c.From + " → " + c.To
}

// FieldChanges lists every field that differs from a to b (nil: an empty
// fleet), object by object in name order. With cluster set, only the
// objects that concern it: the cluster, its class, its standalone
// MachineDeployments and its health checks.
func FieldChanges(a, b *v1alpha1.Fleet, cluster string) []FieldChange {
	d := newFleetDiff(a, b)
	if cluster == "" {
		var out []FieldChange
		for _, k := range d.keys {
			out = append(out, d.changes[k]...)
		}
		return out
	}
	return d.of(cluster)
}

// fleetDiff is the field changes of every object of two revisions, and
// which objects concern each cluster, computed once for a whole fleet.
type fleetDiff struct {
	keys     []string                 // changed objects, sorted
	changes  map[string][]FieldChange // by object
	concerns map[string][]string      // cluster → changed objects, sorted
}

func newFleetDiff(a, b *v1alpha1.Fleet) *fleetDiff {
	ao, bo := fleetObjects(a), fleetObjects(b)
	keys := map[string]bool{}
	for k := range ao {
		keys[k] = true
	}
	for k := range bo {
		keys[k] = true
	}
	d := &fleetDiff{changes: map[string][]FieldChange{}, concerns: map[string][]string{}}
	for _, k := range sortedKeys(keys) {
		x, y := ao[k], bo[k]
		var out []FieldChange
		switch {
		case x.obj == nil:
			out = append(out, FieldChange{Object: k, Created: true})
		case y.obj == nil:
			out = append(out, FieldChange{Object: k, Deleted: true})
		case sameObject(x.obj, y.obj):
		default:
			diffValues(k, "", asJSON(x.obj), asJSON(y.obj), &out)
		}
		if len(out) == 0 {
			continue
		}
		d.keys = append(d.keys, k)
		d.changes[k] = out
		seen := map[string]bool{}
		for _, c := range append(x.clusters, y.clusters...) {
			if !seen[c] {
				seen[c] = true
				d.concerns[c] = append(d.concerns[c], k)
			}
		}
	}
	return d
}

// of is the changes of the objects that concern cluster.
func (d *fleetDiff) of(cluster string) []FieldChange {
	var out []FieldChange
	for _, k := range d.concerns[cluster] {
		out = append(out, d.changes[k]...)
	}
	return out
}

// fleetObject is one object as generic JSON, with the clusters it concerns.
type fleetObject struct {
	obj      any      // the typed object; its JSON form is made only when it differs
	clusters []string // for a class, the clusters using it
}

// sameObject reports whether two typed objects of one kind are written
// alike, wherever they are written (Source aside): most objects of a pull
// request are, and comparing them costs less than writing them as JSON.
func sameObject(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Kind() != reflect.Pointer || vb.Kind() != reflect.Pointer || va.Type() != vb.Type() || va.IsNil() || vb.IsNil() {
		return false
	}
	if va.Pointer() == vb.Pointer() {
		return true // one object: two revisions of a file that did not change share it
	}
	ca, cb := reflect.New(va.Elem().Type()).Elem(), reflect.New(vb.Elem().Type()).Elem()
	ca.Set(va.Elem())
	cb.Set(vb.Elem())
	if f := ca.FieldByName("Source"); f.IsValid() && f.CanSet() {
		f.SetZero()
		cb.FieldByName("Source").SetZero()
	}
	return reflect.DeepEqual(ca.Interface(), cb.Interface())
}

// fleetObjects keys every object of f by "kind name".
func fleetObjects(f *v1alpha1.Fleet) map[string]fleetObject {
	out := map[string]fleetObject{}
	if f == nil {
		return out
	}
	for _, c := range f.Clusters {
		out["cluster "+c.Metadata.Name] = fleetObject{obj: c, clusters: []string{c.Metadata.Name}}
	}
	for _, cc := range f.Classes {
		o := fleetObject{obj: cc}
		for _, c := range f.Clusters {
			if c.Spec.Topology.ClassRef.Name == cc.Metadata.Name {
				o.clusters = append(o.clusters, c.Metadata.Name)
			}
		}
		out["class "+cc.Metadata.Name] = o
	}
	for _, md := range f.MachineDeployments {
		out["machinedeployment "+md.Metadata.Name] = fleetObject{obj: md, clusters: []string{md.Spec.ClusterName}}
	}
	for _, hc := range f.HealthChecks {
		out["healthcheck "+hc.Metadata.Name] = fleetObject{obj: hc, clusters: []string{hc.Spec.ClusterName}}
	}
	return out
}

// asJSON turns a typed object into maps, slices and scalars, without its
// apiVersion, kind and name, which never differ for one key.
func asJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out map[string]any
	if json.Unmarshal(b, &out) != nil {
		return string(b)
	}
	delete(out, "apiVersion")
	delete(out, "kind")
	if m, ok := out["metadata"].(map[string]any); ok {
		delete(m, "name")
		if len(m) == 0 {
			delete(out, "metadata")
		}
	}
	return out
}

// diffValues appends a change for every leaf that differs. Lists of
// objects with a name (or class) are matched by it, so a change reads
// machineDeployments[md-0].replicas rather than an index.
func diffValues(object, path string, a, b any, out *[]FieldChange) {
	if reflect.DeepEqual(a, b) {
		return
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			diffValues(object, joinPath(path, k), am[k], bm[k], out)
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if key := sharedListKey(al, bl); aok && bok && key != "" {
		index := func(l []any) (map[string]any, []string) {
			m, order := map[string]any{}, []string{}
			for _, x := range l {
				n := fmt.Sprint(x.(map[string]any)[key])
				m[n] = x
				order = append(order, n)
			}
			return m, order
		}
		ai, aorder := index(al)
		bi, border := index(bl)
		seen := map[string]bool{}
		for _, n := range append(aorder, border...) {
			if !seen[n] {
				seen[n] = true
				diffValues(object, path+"["+n+"]", ai[n], bi[n], out)
			}
		}
		return
	}
	*out = append(*out, FieldChange{Object: object, Path: path, From: showValue(a), To: showValue(b)})
}

// sharedListKey is the key naming the elements of both lists (either may
// be empty), or "".
func sharedListKey(a, b []any) string {
	ka, kb := listKey(a), listKey(b)
	switch {
	case len(a) == 0:
		return kb
	case len(b) == 0 || ka == kb:
		return ka
	}
	return ""
}

// listKey is the field that names each element of l ("name" or "class"),
// or "" when the elements are not all objects with one.
func listKey(l []any) string {
	for _, key := range []string{"name", "class"} {
		ok := len(l) > 0
		for _, x := range l {
			m, isMap := x.(map[string]any)
			if _, has := m[key]; !isMap || !has {
				ok = false
				break
			}
		}
		if ok {
			return key
		}
	}
	return ""
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// showValue prints a value compactly: strings bare, the rest as JSON,
// "(none)" for a field that is not set.
func showValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "(none)"
	case string:
		return x
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// diffLines renders changes as the body of a ```diff block: "- path: old"
// then "+ path: new", each path prefixed with its object unless it is the
// cluster's own.
func diffLines(changes []FieldChange, cluster string) []string {
	var out []string
	for _, c := range changes {
		name := c.Object
		if name == "cluster "+cluster {
			name = ""
		}
		switch {
		case c.Created:
			out = append(out, "+ "+c.Object)
		case c.Deleted:
			out = append(out, "- "+c.Object)
		default:
			p := c.Path
			if name != "" {
				p = name + ": " + p
			}
			if c.From != "(none)" {
				out = append(out, "- "+p+": "+oneLine(c.From))
			}
			if c.To != "(none)" {
				out = append(out, "+ "+p+": "+oneLine(c.To))
			}
		}
	}
	return out
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", `\n`) }
