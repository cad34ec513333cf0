package schemas

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

// CompilePolicies reports the policy files' own errors and returns the
// files that compile, for ParseFileChecked.
func CompilePolicies(policies []File) ([]File, Errors) {
	good, errs := compilePolicies(policies)
	if good == nil {
		good = []File{}
	}
	return good, sortErrors(errs)
}

// ParseFileChecked is ParseFile that also checks each valid document
// against policies (from CompilePolicies) while it is encoded for the
// schema, and then drops its Raw value, as Load does: a caller then runs
// Check without policies. It depends only on f and policies.
func ParseFileChecked(f File, policies []File) ([]Object, Errors) {
	if policies == nil {
		policies = []File{}
	}
	return parseFile(f, policies)
}
