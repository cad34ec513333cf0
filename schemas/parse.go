package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"cuelang.org/go/cue"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// ParseFile decodes every YAML document of f and validates each against the
// schema of its kind and its provider's machine spec. It returns one Object
// per document that has a kind and a name (Invalid when it has errors) and
// every error found, sorted. It is safe for concurrent use and depends only
// on f, so callers may cache its result by the content's hash.
func ParseFile(f File) ([]Object, Errors) {
	objs, _, errs := parseFile(f, nil, false)
	return objs, errs
}

// parseFile is ParseFile that also checks each valid document against
// policies when they are not nil, and then drops Object.Raw: Load's path,
// where each document is encoded once and 10,000 documents' raw values
// need not stay in memory together. With keep, a file without errors
// also gets each object's KnownDoc.
func parseFile(f File, policies []File, keep bool) ([]Object, []KnownDoc, Errors) {
	split, synErr := splitYAML(f.Path, f.Data)
	var errs Errors
	if synErr != nil {
		errs = append(errs, *synErr)
	}
	var objs []Object
	var docs []KnownDoc
	c := getValidator()
	defer putValidator(c)
	for _, d := range split {
		obj, _, es := parseDoc(c, f.Path, d, policies)
		errs = append(errs, es...)
		if obj != nil {
			objs = append(objs, *obj)
			if keep && len(errs) == 0 {
				if kd, ok := newKnownDoc(obj, d.line); ok {
					docs = append(docs, kd)
				} else {
					keep = false // not kept: the file is parsed next time
				}
			}
		}
	}
	if len(errs) > 0 || !keep {
		docs = nil
	}
	return objs, docs, sortErrors(errs)
}

var kindNames = []string{
	v1alpha1.KindClusterClass, v1alpha1.KindCluster, v1alpha1.KindMachineDeployment,
	v1alpha1.KindMachineHealthCheck, v1alpha1.KindFleetConfig,
}

// parseDoc returns the document's object, the JSON its value was decoded
// from, and its errors.
func parseDoc(c *compiled, path string, d *doc, policies []File) (*Object, []byte, []Error) {
	errs := d.errs
	m, ok := d.value.(map[string]any)
	if !ok {
		return nil, nil, append(errs, Error{Path: path, Line: d.line, Col: 1,
			Message: fmt.Sprintf("not a fleet document: found %s where a YAML mapping with apiVersion and kind was expected", describe(d.value))})
	}
	kind, err := typeMeta(path, d, m)
	if err != nil {
		return nil, nil, append(errs, *err)
	}
	if len(errs) > 0 {
		// Duplicate keys and alias errors make the value unreliable.
		return newObject(path, d, kind, m), nil, errs
	}
	errs = append(errs, allowedShapes().unknownFields(kind, m, d, path)...)
	var data cue.Value
	var cerrs []Error
	if err := safely(func() error {
		data, cerrs = validateCUE(c, path, d, kind, m)
		return nil
	}); err != nil {
		c.used = rotateAfter // do not reuse a context CUE panicked in
		cerrs = append(cerrs, d.errorAt(path, "", "cannot validate: "+err.Error()))
	}
	errs = append(errs, cerrs...)
	value, js, derr := decodeTyped(path, d, kind, m)
	if value != nil {
		errs = append(errs, unrelated(semanticChecks(path, d, value), errs)...)
	}
	if len(errs) == 0 && derr != nil {
		errs = append(errs, *derr)
	}
	obj := newObject(path, d, kind, m)
	if len(errs) > 0 {
		return obj, nil, errs
	}
	obj.Invalid = false
	obj.Value = value
	if policies != nil {
		perrs := c.policyErrors(policies, obj, data)
		obj.Raw = nil
		return obj, js, perrs
	}
	return obj, js, nil
}

// unrelated keeps the errors of more that are not about a field already
// reported (or one inside or around it): a semantic check on a document with
// schema errors must not repeat them.
func unrelated(more, reported []Error) []Error {
	var out []Error
next:
	for _, e := range more {
		for _, r := range reported {
			if e.Field == r.Field || strings.HasPrefix(e.Field, r.Field+".") || strings.HasPrefix(e.Field, r.Field+"[") ||
				strings.HasPrefix(r.Field, e.Field+".") || strings.HasPrefix(r.Field, e.Field+"[") {
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}

// typeMeta checks apiVersion and kind and returns the kind.
func typeMeta(path string, d *doc, m map[string]any) (string, *Error) {
	if av, ok := m["apiVersion"].(string); ok && isClusterAPI(av) {
		what := av
		if k, ok := m["kind"].(string); ok {
			what += " " + k
		}
		e := d.errorAt(path, "apiVersion", fmt.Sprintf("%s is Cluster API syntax, which gitfleet does not read as it is: convert the file with gitfleet import capi %s (docs/import.md)", what, path))
		return "", &e
	}
	kindV, hasKind := m["kind"]
	if !hasKind {
		e := d.errorAt(path, "", "document has no kind: add kind: one of "+strings.Join(kindNames, ", "))
		return "", &e
	}
	kind, _ := kindV.(string)
	if _, known := kindDefs[kind]; !known {
		msg := fmt.Sprintf("unknown kind %s", describe(kindV))
		if s := suggest(kind, kindNames); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		} else {
			msg += "; gitfleet reads " + strings.Join(kindNames, ", ")
		}
		e := d.errorAt(path, "kind", msg)
		return "", &e
	}
	av, hasAV := m["apiVersion"]
	if !hasAV {
		e := d.errorAt(path, "", "document has no apiVersion: add apiVersion: "+v1alpha1.APIVersion)
		return "", &e
	}
	if av != v1alpha1.APIVersion {
		e := d.errorAt(path, "apiVersion", fmt.Sprintf("unknown apiVersion %s for kind %s: use %s", describe(av), kind, v1alpha1.APIVersion))
		return "", &e
	}
	return kind, nil
}

// newObject is the document as an Object, Invalid until parseDoc has found
// no error.
func newObject(path string, d *doc, kind string, m map[string]any) *Object {
	name := ""
	if md, ok := m["metadata"].(map[string]any); ok {
		name, _ = md["name"].(string)
	}
	return &Object{
		Kind:    kind,
		Name:    name,
		Source:  v1alpha1.Source{Path: path, Line: d.line},
		Lines:   d.lines,
		Raw:     m,
		Invalid: true,
	}
}

// decodeTyped decodes a validated document into its Go type, directly when
// it can (decodeDirect), else through its JSON, which it returns.
func decodeTyped(path string, d *doc, kind string, m map[string]any) (any, []byte, *Error) {
	if v, ok := decodeDirect(path, d, kind, m); ok {
		return v, nil, nil
	}
	return decodeViaJSON(path, d, kind, m)
}

// decodeViaJSON is decodeTyped through the document's JSON.
func decodeViaJSON(path string, d *doc, kind string, m map[string]any) (any, []byte, *Error) {
	// The document goes through JSON: appendJSON's when it can write it,
	// and encoding/json's — keys sorted, so the first of several errors is
	// always the same one — when it cannot or the value does not decode.
	if b, ok := appendJSON(make([]byte, 0, 1024), m); ok {
		if v, err := decodeJSON(path, d, kind, b); err == nil {
			return v, b, nil
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		e := d.errorAt(path, "", "cannot decode: "+err.Error())
		return nil, nil, &e
	}
	v, err := decodeJSON(path, d, kind, b)
	if err != nil {
		// The value is decoded as far as it goes; callers with schema
		// errors still run the semantic checks on it.
		e := d.errorAt(path, "", "cannot decode: "+err.Error())
		return v, b, &e
	}
	return v, b, nil
}

// decodeJSON decodes b into a new value of kind's Go type.
func decodeJSON(path string, d *doc, kind string, b []byte) (any, error) {
	v := newKindValue(kind, v1alpha1.Source{Path: path, Line: d.line})
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	err := dec.Decode(v)
	fixNumbers(v)
	return v, err
}

// newKindValue is a pointer to a new value of kind's Go type, its Source
// set; nil for a kind that has none.
func newKindValue(kind string, src v1alpha1.Source) any {
	switch kind {
	case v1alpha1.KindFleetConfig:
		return &v1alpha1.FleetConfig{Source: src}
	case v1alpha1.KindClusterClass:
		return &v1alpha1.ClusterClass{Source: src}
	case v1alpha1.KindCluster:
		return &v1alpha1.Cluster{Source: src}
	case v1alpha1.KindMachineDeployment:
		return &v1alpha1.MachineDeployment{Source: src}
	case v1alpha1.KindMachineHealthCheck:
		return &v1alpha1.MachineHealthCheck{Source: src}
	}
	return nil
}

// describe names a decoded value for a message: "Clustr" quoted, a number as
// written, or its YAML type.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	default:
		return fmt.Sprint(x)
	}
}

// errorAt makes an error at field's position in d.
func (d *doc) errorAt(path, field, msg string) Error {
	return errorNear(path, d.line, d.lines, field, msg)
}

// errorNear makes an error at field's position, or its nearest written
// ancestor's, or the document's start.
func errorNear(path string, docLine int, lines Lines, field, msg string) Error {
	e := Error{Path: path, Line: docLine, Col: 1, Field: field, Message: msg}
	for p := field; p != ""; p = parentField(p) {
		if pos, ok := lines.At(p); ok {
			e.Line, e.Col = pos.Line, pos.Col
			break
		}
	}
	return e
}

// parentField drops the last element of a field path: a.b[0].c -> a.b[0] -> a.b -> a.
func parentField(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// isClusterAPI reports whether apiVersion is of a Cluster API group:
// cluster.x-k8s.io or one of its subgroups (infrastructure., bootstrap.,
// controlplane., ...).
func isClusterAPI(apiVersion string) bool {
	group, _, _ := strings.Cut(apiVersion, "/")
	return group == "cluster.x-k8s.io" || strings.HasSuffix(group, ".cluster.x-k8s.io")
}
