// Package patch applies a ClusterClass's patches to machine templates, as
// Cluster API v1beta2 writes inline patches (JSON patches, enabledIf and
// valueFrom templates with sprig's hermetic functions, builtin variables).
// The planner, which makes machines of the patched templates, and
// validation, which checks them against the providers' schemas, share it.
// It is pure: its templates have no environment, clock or randomness.
// docs/fleet-api.md ("Patches") says where it differs from Cluster API.
package patch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"unicode/utf8"

	"github.com/Masterminds/sprig/v3"
	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/internal/valuekey"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// ClassVariables resolves every variable of class cc for cluster c: the
// cluster's value for a declared variable, else the class's default (its
// default, or its schema's), with the defaults of its schema's properties
// filled in, as Cluster API defaults variables. Undeclared and missing
// required variables are left to the caller.
func ClassVariables(cc *v1alpha1.ClusterClass, c *v1alpha1.Cluster) map[string]any {
	decls := cc.Spec.Variables
	vals := make(map[string]any, len(decls))
	for i := range decls {
		if decls[i].Default != nil {
			vals[decls[i].Name] = decls[i].Default
		}
	}
	// A class declares a handful of variables: looking each of the
	// cluster's up in the list costs less than a map built per cluster,
	// which a class bump at 10,000 clusters would build 10,000 times. A
	// class of many gets the map, so that a cluster setting many does not
	// cost their product.
	declared := func(name string) bool { return declares(decls, name) }
	if len(decls) > maxListedVariables {
		set := make(map[string]bool, len(decls))
		for i := range decls {
			set[decls[i].Name] = true
		}
		declared = func(name string) bool { return set[name] }
	}
	for _, v := range c.Spec.Topology.Variables {
		if declared(v.Name) {
			vals[v.Name] = v.Value
		}
	}
	for i := range decls {
		if decl := &decls[i]; decl.Schema != nil {
			if v := WithDefaults(decl.Schema.OpenAPIV3Schema, vals[decl.Name]); v != nil {
				vals[decl.Name] = v
			}
		}
	}
	return vals
}

// maxListedVariables is the most variables ClassVariables looks up in the
// class's list rather than in a map.
const maxListedVariables = 32

func declares(decls []v1alpha1.ClassVariable, name string) bool {
	for i := range decls {
		if decls[i].Name == name {
			return true
		}
	}
	return false
}

// WithDefaults returns v with the defaults of OpenAPI v3 schema s filled in:
// s's own when v is nil, and those of object properties v lacks, at every
// depth (properties and items). v itself is never changed: a copy is.
func WithDefaults(s map[string]any, v any) any {
	if !hasDefaults(s) {
		return v
	}
	return fillDefaults(s, deepCopy(v))
}

func fillDefaults(s map[string]any, v any) any {
	if v == nil {
		d, ok := s["default"]
		if !ok {
			return nil
		}
		v = deepCopy(d)
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for name, ps := range props {
			sub, ok := ps.(map[string]any)
			if !ok {
				continue
			}
			if d := fillDefaults(sub, x[name]); d != nil {
				x[name] = d
			}
		}
	case []any:
		if items, ok := s["items"].(map[string]any); ok {
			for i := range x {
				x[i] = fillDefaults(items, x[i])
			}
		}
	}
	return v
}

func hasDefaults(s map[string]any) bool {
	if _, ok := s["default"]; ok {
		return true
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for _, ps := range props {
			if sub, ok := ps.(map[string]any); ok && hasDefaults(sub) {
				return true
			}
		}
	}
	items, ok := s["items"].(map[string]any)
	return ok && hasDefaults(items)
}

// Target is the machine template a patch may apply to: the control plane's,
// or a worker pool's (MachineDeployment set).
type Target struct {
	ControlPlane      bool
	MachineDeployment *v1alpha1.MachineDeploymentTopology
}

// Variables are the values patches read for one target of cluster c:
// the class variables (ClassVariables) and "builtin", with Cluster API's
// builtin variables. Versions are the cluster's: what it runs once
// converged. builtin is left out when no patch of cc can read it
// (readsBuiltin): its maps were a sixth of a warm plan's CPU at 1,000
// clusters, for classes whose patches read one variable by name.
func Variables(cc *v1alpha1.ClusterClass, c *v1alpha1.Cluster, t Target) map[string]any {
	vals := ClassVariables(cc, c)
	if !readsBuiltin(cc) {
		return vals
	}
	version := c.Spec.Topology.Version
	if version == "" {
		version = cc.Spec.Version
	}
	cp := 1
	if r := c.Spec.Topology.ControlPlane.Replicas; r != nil {
		cp = *r
	}
	network := map[string]any{}
	if n := c.Spec.ClusterNetwork; n != nil {
		if n.ServiceDomain != "" {
			network["serviceDomain"] = n.ServiceDomain
		}
		if n.Pods != nil {
			network["pods"] = strings.Join(n.Pods.CIDRBlocks, ",")
		}
		if n.Services != nil {
			network["services"] = strings.Join(n.Services.CIDRBlocks, ",")
		}
	}
	builtin := map[string]any{
		"cluster": map[string]any{
			"name":      c.Metadata.Name,
			"namespace": "",
			"topology":  map[string]any{"version": version, "class": cc.Metadata.Name},
			"network":   network,
		},
	}
	if t.ControlPlane {
		builtin["controlPlane"] = map[string]any{"version": version, "replicas": int64(cp), "name": c.Metadata.Name + "-control-plane"}
	}
	if md := t.MachineDeployment; md != nil {
		replicas := int64(1)
		if md.Replicas != nil {
			replicas = int64(*md.Replicas)
		}
		builtin["machineDeployment"] = map[string]any{"version": version, "class": md.Class,
			"name": c.Metadata.Name + "-" + md.Name, "topologyName": md.Name, "replicas": replicas}
	}
	vals["builtin"] = builtin
	return vals
}

// readsBuiltin reports whether a patch of cc may read the builtin
// variables: a JSON patch whose valueFrom.variable is a builtin path, or
// any template (enabledIf, valueFrom.template), which may read anything.
// ("builtin" cannot name a class variable.)
func readsBuiltin(cc *v1alpha1.ClusterClass) bool {
	for _, p := range cc.Spec.Patches {
		if p.EnabledIf != "" {
			return true
		}
		for _, d := range p.Definitions {
			for _, op := range d.JSONPatches {
				vf := op.ValueFrom
				if vf == nil {
					continue
				}
				if root, _, _ := strings.Cut(strings.SplitN(vf.Variable, "[", 2)[0], "."); vf.Template != "" || root == "builtin" {
					return true
				}
			}
		}
	}
	return false
}

// Applied is one JSON patch that changed a template.
type Applied struct {
	Patch, Definition, Op int    // indexes in spec.patches, its definitions and their jsonPatches
	Path                  string // the field written, dotted: spec.cpus, spec.disks[0]
	Value                 any
	// Variable or Template is where the value came from; both "" for a
	// literal.
	Variable, Template string
}

// Field is the JSON patch's field path in the class:
// spec.patches[0].definitions[0].jsonPatches[1].
func (a Applied) Field() string {
	return fmt.Sprintf("spec.patches[%d].definitions[%d].jsonPatches[%d]", a.Patch, a.Definition, a.Op)
}

// Error is a patch that could not be applied; Field says which part
// (enabledIf, a JSON patch's path or valueFrom).
type Error struct {
	Applied
	Field string
	Err   error
}

// Selects reports whether a definition's selector matches target t.
func Selects(s v1alpha1.PatchSelector, t Target) bool {
	if t.ControlPlane {
		return s.MatchResources.ControlPlane
	}
	m := s.MatchResources.MachineDeploymentClass
	return m != nil && t.MachineDeployment != nil && slices.Contains(m.Names, t.MachineDeployment.Class)
}

// Touches reports whether Apply can change tpl or report an error for
// target t: some patch has an enabledIf (rendered for every target) or a
// definition that selects t. When none does, Apply returns tpl as it is,
// and callers need not work out the variables.
func Touches(cc *v1alpha1.ClusterClass, t Target) bool {
	for _, p := range cc.Spec.Patches {
		if p.EnabledIf != "" {
			return true
		}
		for _, d := range p.Definitions {
			if Selects(d.Selector, t) {
				return true
			}
		}
	}
	return false
}

// InputKey is a key of what Apply reads of cluster c for target t, beyond
// the class cc and its template for t: for one class, two targets of equal
// keys get equal results from Apply, so that a caller patching a class's
// clusters one by one (a class bump of 10,000) may patch each template once
// for all the clusters alike. A target no patch touches has the key of its
// kind alone; one that is patched has its class variables too (the
// cluster's values, as written: a key, not a canonical form, so clusters
// that list the same values in another order only miss). ok is false when
// there is no such key: a patch may read the builtin variables, which name
// the cluster, or a value is of a type internal/valuekey does not know.
func InputKey(cc *v1alpha1.ClusterClass, c *v1alpha1.Cluster, t Target) (key string, ok bool) {
	var b []byte
	switch {
	case t.ControlPlane:
		b = append(b, 'c')
	case t.MachineDeployment != nil:
		b = valuekey.AppendString(append(b, 'm'), t.MachineDeployment.Class)
	}
	if !Touches(cc, t) {
		return string(b), true
	}
	if readsBuiltin(cc) {
		return "", false
	}
	vs := c.Spec.Topology.Variables
	b = binary.AppendUvarint(append(b, 'v'), uint64(len(vs)))
	for _, v := range vs {
		if b, ok = valuekey.Append(valuekey.AppendString(b, v.Name), v.Value, 0); !ok {
			return "", false
		}
	}
	return string(b), true
}

// Apply returns a copy of tpl with the class's patches applied in
// order to target t, the patches it applied and those it could not: a
// patch is skipped when its enabledIf does not render "true", a JSON patch
// whose variable is unset is skipped (an optional variable leaves its field
// alone).
func Apply(cc *v1alpha1.ClusterClass, tpl v1alpha1.MachineTemplate, t Target, vars map[string]any) (v1alpha1.MachineTemplate, []Applied, []Error) {
	doc := map[string]any{"provider": tpl.Provider}
	if tpl.Spec != nil {
		doc["spec"] = deepCopy(tpl.Spec)
	}
	var applied []Applied
	var errs []Error
	for pi, p := range cc.Spec.Patches {
		if p.EnabledIf != "" {
			out, err := Render(p.EnabledIf, vars)
			if err != nil {
				errs = append(errs, Error{Applied: Applied{Patch: pi}, Field: fmt.Sprintf("spec.patches[%d].enabledIf", pi), Err: err})
				continue
			}
			if strings.TrimSpace(out) != "true" {
				continue
			}
		}
		for di, d := range p.Definitions {
			if !Selects(d.Selector, t) {
				continue
			}
			for oi, op := range d.JSONPatches {
				a := Applied{Patch: pi, Definition: di, Op: oi, Value: op.Value}
				fail := func(field string, err error) {
					errs = append(errs, Error{Applied: a, Field: a.Field() + field, Err: err})
				}
				ptr, err := ParsePointer(op.Path)
				if err != nil {
					fail(".path", err)
					continue
				}
				a.Path = ptr.Dotted()
				if op.Op != v1alpha1.PatchRemove && op.ValueFrom != nil {
					switch vf := op.ValueFrom; {
					case vf.Variable != "":
						v, ok, err := Lookup(vars, vf.Variable)
						if err != nil {
							fail(".valueFrom.variable", err)
							continue
						}
						if !ok {
							continue
						}
						a.Value, a.Variable = v, vf.Variable
					case vf.Template != "":
						out, err := Render(vf.Template, vars)
						if err != nil {
							fail(".valueFrom.template", err)
							continue
						}
						var v any
						if err := yaml.Unmarshal([]byte(out), &v); err != nil {
							fail(".valueFrom.template", fmt.Errorf("renders %q, which is not YAML: %v", out, err))
							continue
						}
						a.Value, a.Template = plain(v), vf.Template
					}
				}
				if err := ptr.apply(doc, op.Op, deepCopy(a.Value)); err != nil {
					fail(".path", err)
					continue
				}
				applied = append(applied, a)
			}
		}
	}
	out := v1alpha1.MachineTemplate{Provider: tpl.Provider}
	if prov, ok := doc["provider"].(string); ok {
		out.Provider = prov
	} else {
		errs = append(errs, Error{Field: "spec.patches", Err: fmt.Errorf("the patches leave provider %v, which is not a string", doc["provider"])})
	}
	switch spec := doc["spec"].(type) {
	case map[string]any:
		out.Spec = spec
	case nil:
	default:
		errs = append(errs, Error{Field: "spec.patches", Err: fmt.Errorf("the patches leave spec a %T, not an object", spec)})
	}
	return out, applied, errs
}

// templates caches parsed templates: a fleet's clusters render the same
// few thousands of times.
var templates sync.Map // string -> *template.Template

// MaxRender bounds what one template renders, and MaxList the lists its
// functions make (until, untilStep, seq): a template is a value of a
// machine's spec, a name or a condition, and one that asks for a
// gigabyte (repeat 1000000000 "x") is refused instead of running the
// daemon out of memory.
const (
	MaxRender = 1 << 20
	MaxList   = 10_000
)

// funcs are sprig's hermetic functions (no environment, clock or
// randomness), those that make something as large as a number they are
// given bounded by MaxRender and MaxList.
var funcs = func() template.FuncMap {
	m := sprig.HermeticTxtFuncMap()
	until, untilStep, seq := m["until"].(func(int) []int), m["untilStep"].(func(int, int, int) []int), m["seq"].(func(...int) string)
	indent, nindent := m["indent"].(func(int, string) string), m["nindent"].(func(int, string) string)
	tooLong := func(fn string, n int) error {
		return fmt.Errorf("%s %d: more than the %d bytes a template may render", fn, n, MaxRender)
	}
	// span is how many numbers sprig's untilStep makes (without making
	// them; the differences are taken as unsigned so that no int wraps).
	span := func(start, stop, step int) uint64 {
		switch {
		case stop > start && step > 0:
			return (uint64(stop)-uint64(start)-1)/uint64(step) + 1
		case stop < start && step < 0:
			return (uint64(start)-uint64(stop)-1)/(-uint64(step)) + 1
		}
		return 0
	}
	tooMany := func(fn string, n uint64) error {
		return fmt.Errorf("%s: a list of %d numbers, more than the %d a template may make", fn, n, MaxList)
	}
	m["repeat"] = func(count int, str string) (string, error) {
		switch {
		case count < 0:
			return "", fmt.Errorf("repeat: negative count %d", count)
		case len(str) > 0 && count > MaxRender/len(str):
			return "", tooLong("repeat", count)
		}
		return strings.Repeat(str, count), nil
	}
	m["until"] = func(count int) ([]int, error) {
		step := 1
		if count < 0 {
			step = -1
		}
		if n := span(0, count, step); n > MaxList {
			return nil, tooMany("until", n)
		}
		return until(count), nil
	}
	m["untilStep"] = func(start, stop, step int) ([]int, error) {
		if n := span(start, stop, step); n > MaxList {
			return nil, tooMany("untilStep", n)
		}
		return untilStep(start, stop, step), nil
	}
	m["seq"] = func(params ...int) (string, error) {
		// The untilStep sprig's seq makes, end included.
		var start, end, step int
		switch len(params) {
		case 1:
			start, end, step = 1, params[0], 1
		case 2:
			start, end, step = params[0], params[1], 1
		case 3:
			start, step, end = params[0], params[1], params[2]
		}
		dir := 1
		if end < start {
			dir = -1
			if len(params) < 3 {
				step = -1
			}
		}
		if n := span(start, end+dir, step); len(params) >= 1 && len(params) <= 3 && n > MaxList {
			return "", tooMany("seq", n)
		}
		return seq(params...), nil
	}
	pad := func(fn string, f func(int, string) string) func(int, string) (string, error) {
		return func(spaces int, str string) (string, error) {
			if lines := strings.Count(str, "\n") + 1; spaces > MaxRender/lines {
				return "", tooLong(fn, spaces)
			}
			return f(spaces, str), nil
		}
	}
	m["indent"], m["nindent"] = pad("indent", indent), pad("nindent", nindent)
	return m
}()

// ParseTemplate parses a patch template with Cluster API's functions
// (sprig's hermetic set: no environment, clock or randomness; funcs).
func ParseTemplate(text string) (*template.Template, error) {
	if t, ok := templates.Load(text); ok {
		return t.(*template.Template), nil
	}
	t, err := template.New("").Funcs(funcs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "template: :"))
	}
	templates.Store(text, t)
	return t, nil
}

// Render renders a patch template over the variables; what it renders
// past MaxRender is an error.
func Render(text string, vars map[string]any) (string, error) {
	t, err := ParseTemplate(text)
	if err != nil {
		return "", err
	}
	var b boundedBuffer
	if err := t.Execute(&b, vars); err != nil {
		return "", fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "template: :"))
	}
	return b.String(), nil
}

// boundedBuffer is a buffer that refuses to grow past MaxRender.
type boundedBuffer struct{ bytes.Buffer }

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > MaxRender {
		return 0, fmt.Errorf("the template renders more than %d bytes", MaxRender)
	}
	return b.Buffer.Write(p)
}

// Lookup reads a variable by name or by a path into an object
// variable (proxy.httpProxy, builtin.cluster.name, disks[0].size); ok is
// false when the variable, or a field on the way, is not set.
func Lookup(vars map[string]any, path string) (v any, ok bool, err error) {
	var cur any = vars
	for _, part := range splitVarPath(path) {
		switch c := cur.(type) {
		case map[string]any:
			cur, ok = c[part]
			if !ok {
				return nil, false, nil
			}
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 {
				return nil, false, fmt.Errorf("%q: %q is not a list index", path, part)
			}
			if i >= len(c) {
				return nil, false, nil
			}
			cur = c[i]
		default:
			return nil, false, fmt.Errorf("%q: cannot read %q from %s", path, part, typeName(cur))
		}
	}
	return cur, true, nil
}

// splitVarPath splits a.b[0].c into a, b, 0, c.
func splitVarPath(path string) []string {
	path = strings.ReplaceAll(strings.ReplaceAll(path, "[", "."), "]", "")
	return strings.Split(path, ".")
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	}
	return "a number"
}

// Pointer is a parsed JSON pointer into a machine template.
type Pointer []string

// ParsePointer parses an RFC 6901 pointer; it must start at /spec or be
// /provider.
func ParsePointer(s string) (Pointer, error) {
	if !strings.HasPrefix(s, "/") {
		return nil, fmt.Errorf("%q is not a JSON pointer: start it with /, like /spec/cpus", s)
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		if err := checkEscapes(s, p); err != nil {
			return nil, err
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	switch {
	case parts[0] == "provider" && len(parts) == 1:
	case len(parts) > 2 && parts[0] == "spec" && parts[1] == "template" && parts[2] == "spec":
		return nil, fmt.Errorf("%q is Cluster API's path into an infrastructure template: gitfleet patches the machine template {provider, spec}, so write /spec/%s", s, strings.Join(parts[3:], "/"))
	case parts[0] == "spec":
	default:
		return nil, fmt.Errorf("%q is not in a machine template: gitfleet patches {provider, spec}, so write /spec/<field> (Cluster API's /spec/template/spec/<field> is /spec/<field> here) or /provider", s)
	}
	return Pointer(parts), nil
}

// checkEscapes refuses a ~ in segment p of pointer s that is not ~0 or ~1,
// the only escapes RFC 6901 has: read as written, ~2 would name a field
// "~2" that nobody meant.
func checkEscapes(s, p string) error {
	for i := strings.IndexByte(p, '~'); i >= 0; i = strings.IndexByte(p, '~') {
		switch {
		case i+1 == len(p):
			return fmt.Errorf("%q is not a JSON pointer: the ~ that ends %q escapes nothing; write ~0 for ~ and ~1 for /", s, p)
		case p[i+1] != '0' && p[i+1] != '1':
			_, n := utf8.DecodeRuneInString(p[i+1:])
			return fmt.Errorf("%q is not a JSON pointer: %s is no escape; write ~0 for ~ and ~1 for /", s, p[i:i+1+n])
		}
		p = p[i+2:]
	}
	return nil
}

// Dotted writes the pointer as a field path: spec.disks[0].size.
func (p Pointer) Dotted() string {
	var b strings.Builder
	for i, s := range p {
		if i > 0 && mayBeNumber(s) && isInt(s) || s == "-" {
			b.WriteString("[" + s + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// mayBeNumber is false for a segment strconv.Atoi would refuse at its
// first byte, which it would refuse with an allocated error: most
// segments are field names.
func mayBeNumber(s string) bool {
	return s != "" && (s[0] >= '0' && s[0] <= '9' || (s[0] == '+' || s[0] == '-') && len(s) > 1)
}

func isInt(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// apply performs op at p in doc. add creates missing objects on the way
// (as Cluster API does) and inserts into a list before an index, or at
// the end for "-"; replace and remove need the target to exist.
func (p Pointer) apply(doc map[string]any, op string, val any) error {
	switch op {
	case v1alpha1.PatchAdd, v1alpha1.PatchReplace, v1alpha1.PatchRemove:
	default:
		return fmt.Errorf("op %q is not add, replace or remove", op)
	}
	_, err := p.applyAt(doc, 0, op, val)
	return err
}

// applyAt applies the operation below node, p[depth] being its key, and
// returns node as it is now (a list may have grown or shrunk).
func (p Pointer) applyAt(node any, depth int, op string, val any) (any, error) {
	key := p[depth]
	last := depth == len(p)-1
	switch c := node.(type) {
	case map[string]any:
		cur, exists := c[key]
		if last {
			switch {
			case op == v1alpha1.PatchAdd:
				c[key] = val
			case !exists && op == v1alpha1.PatchReplace:
				return nil, fmt.Errorf("%s does not exist: use op add", p.prefix(depth+1))
			case !exists:
				return nil, fmt.Errorf("%s does not exist", p.prefix(depth+1))
			case op == v1alpha1.PatchReplace:
				c[key] = val
			default:
				delete(c, key)
			}
			return c, nil
		}
		if !exists || cur == nil {
			if op != v1alpha1.PatchAdd {
				return nil, fmt.Errorf("%s does not exist", p.prefix(depth+1))
			}
			cur = map[string]any{}
		}
		next, err := p.applyAt(cur, depth+1, op, val)
		if err != nil {
			return nil, err
		}
		c[key] = next
		return c, nil
	case []any:
		end := last && op == v1alpha1.PatchAdd
		i, err := index(c, key, end)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", p.prefix(depth+1), err)
		}
		if !last {
			next, err := p.applyAt(c[i], depth+1, op, val)
			if err != nil {
				return nil, err
			}
			c[i] = next
			return c, nil
		}
		switch op {
		case v1alpha1.PatchAdd:
			return slices.Insert(c, i, val), nil
		case v1alpha1.PatchReplace:
			c[i] = val
			return c, nil
		default:
			return slices.Delete(c, i, i+1), nil
		}
	}
	return nil, fmt.Errorf("%s is %s, not an object or a list", p.prefix(depth), typeName(node))
}

func (p Pointer) prefix(n int) string { return Pointer(p[:n]).Dotted() }

func index(list []any, key string, end bool) (int, error) {
	if key == "-" && end {
		return len(list), nil
	}
	i, err := strconv.Atoi(key)
	if err != nil || i < 0 || i >= len(list)+b2i(end) {
		return 0, fmt.Errorf("%q is not an index of a list of %d", key, len(list))
	}
	return i, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// plain turns what YAML decoding made (int, map[string]any, []any) into the
// values the fleet's decoder makes (int64, float64).
func plain(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case map[string]any:
		for k, e := range x {
			x[k] = plain(e)
		}
	case []any:
		for i, e := range x {
			x[i] = plain(e)
		}
	}
	return v
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

// MachineName renders a pool's machineNaming template ("" for the default,
// <cluster>-<pool>-<random>) for a machine of pool in cluster, with random
// as its random part. The name must be a DNS label of at most 63
// characters and use the random part.
func MachineName(tmpl, cluster, pool, random string) (string, error) {
	if tmpl == "" {
		return cluster + "-" + pool + "-" + random, nil
	}
	if !strings.Contains(tmpl, ".random") {
		return "", fmt.Errorf("uses no {{ .random }}: every machine of the pool would get the same name")
	}
	name, err := Render(tmpl, map[string]any{
		"cluster":           map[string]any{"name": cluster},
		"machineDeployment": map[string]any{"name": pool},
		"machineSet":        map[string]any{"name": cluster + "-" + pool},
		"random":            random,
	})
	if err != nil {
		return "", err
	}
	if !dnsLabel.MatchString(name) || len(name) > 63 {
		return "", fmt.Errorf("makes %q, which is not a DNS label of at most 63 characters (lowercase letters, digits and '-', starting and ending with a letter or digit)", name)
	}
	return name, nil
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
