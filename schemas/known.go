package schemas

import "github.com/gitfleet/gitfleet/schemas/v1alpha1"

// ParseKnownGood decodes a file whose content an earlier ParseFile, of the
// same gitfleet build, found free of errors: it returns the same objects
// without running the schema, provider and semantic checks again, which
// are most of ParseFile's cost. Callers key that knowledge by the content's
// hash (sources keeps it across revisions and, for the CLI, on disk). Any
// surprise — a document that no longer decodes — falls back to ParseFile,
// so a wrong key costs time, never a missed error.
func ParseKnownGood(f File) ([]Object, Errors) {
	docs, synErr := splitYAML(f.Path, f.Data)
	if synErr != nil {
		return ParseFile(f)
	}
	objs := make([]Object, 0, len(docs))
	for _, d := range docs {
		m, ok := d.value.(map[string]any)
		if !ok || len(d.errs) > 0 {
			return ParseFile(f)
		}
		kind, err := typeMeta(f.Path, d, m)
		if err != nil {
			return ParseFile(f)
		}
		value, derr := decodeTyped(f.Path, d, kind, m)
		if derr != nil {
			return ParseFile(f)
		}
		obj := newObject(f.Path, d, kind, m)
		obj.Invalid = false
		obj.Value = value
		objs = append(objs, *obj)
	}
	return objs, nil
}

// CheckOptions let Check skip the policy evaluation of objects already
// known to satisfy the same policies.
type CheckOptions struct {
	// PolicyKnownGood reports whether o, as written, was checked against
	// the same policy files before without a violation; it is then not
	// evaluated again. Called from several goroutines.
	PolicyKnownGood func(o *Object) bool
	// PolicyGood is told, after the checks, of each object evaluated
	// against at least one policy without a violation.
	PolicyGood func(o *Object)
}

// CheckWith is Check with options.
func CheckWith(objs []Object, policies []File, opts CheckOptions) (*v1alpha1.Fleet, Errors) {
	return check(objs, policies, opts)
}
