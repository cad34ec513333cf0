package schemas

import (
	"strings"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// ParseKnownGood decodes a file whose content an earlier ParseFile, of the
// same gitfleet build, found free of errors: it returns the same objects
// without running the schema, provider and semantic checks again, which
// are most of ParseFile's cost. Callers key that knowledge by the content's
// hash (sources keeps it across revisions and, for the CLI, on disk). Any
// surprise — a document that no longer decodes — falls back to ParseFile,
// so a wrong key costs time, never a missed error.
func ParseKnownGood(f File) ([]Object, Errors) {
	objs, _, errs := ParseKnownGoodDocs(f)
	return objs, errs
}

// KnownDoc is what ParseKnownGood decoded one object from: a cache that
// keeps it gives the same object again without the file (DecodeKnown).
type KnownDoc struct {
	Kind, Name string
	Line       int    // the document's first line
	Encoded    string // the decoded Go value, in the value codec's bytes (codec.go)
	Lines      Lines
}

// newKnownDoc keeps obj, decoded from the document at line; ok is false
// when its value cannot be encoded.
func newKnownDoc(obj *Object, line int) (KnownDoc, bool) {
	enc, err := encodeValue(nil, obj.Value)
	if err != nil {
		return KnownDoc{}, false
	}
	return KnownDoc{Kind: obj.Kind, Name: obj.Name, Line: line, Encoded: string(enc), Lines: obj.Lines}, true
}

// ParseKnownGoodDocs is ParseKnownGood that also returns each object's
// KnownDoc; docs is nil when the file had to be parsed in full.
func ParseKnownGoodDocs(f File) (objs []Object, docs []KnownDoc, errs Errors) {
	split, synErr := splitYAML(f.Path, f.Data)
	if synErr != nil {
		objs, errs = ParseFile(f)
		return objs, nil, errs
	}
	objs = make([]Object, 0, len(split))
	docs = make([]KnownDoc, 0, len(split))
	for _, d := range split {
		m, ok := d.value.(map[string]any)
		if !ok || len(d.errs) > 0 {
			objs, errs = ParseFile(f)
			return objs, nil, errs
		}
		kind, err := typeMeta(f.Path, d, m)
		if err != nil {
			objs, errs = ParseFile(f)
			return objs, nil, errs
		}
		value, _, derr := decodeTyped(f.Path, d, kind, m)
		if derr != nil {
			objs, errs = ParseFile(f)
			return objs, nil, errs
		}
		obj := newObject(f.Path, d, kind, m)
		obj.Invalid = false
		obj.Value = value
		objs = append(objs, *obj)
		if docs != nil {
			if kd, ok := newKnownDoc(obj, d.line); ok {
				docs = append(docs, kd)
			} else {
				docs = nil // not kept: the file is parsed next time
			}
		}
	}
	return objs, docs, nil
}

// DecodeKnown returns the objects of file path from the KnownDocs
// ParseKnownGoodDocs gave for its content: the same objects, their values
// read back from the value codec's bytes, with Raw nil. ok is false when a
// document does not decode; the caller then parses the file.
// Their strings may be slices of docs' (see DecodeKnownCopy).
func DecodeKnown(path string, docs []KnownDoc) (objs []Object, ok bool) {
	return decodeKnown(path, docs, false)
}

// DecodeKnownCopy is DecodeKnown for objects that outlive docs' bytes: no
// string of theirs is a slice of docs' (a daemon keeps its objects for its
// life, and a slice of a cache file's entry would keep the whole file).
func DecodeKnownCopy(path string, docs []KnownDoc) (objs []Object, ok bool) {
	return decodeKnown(path, docs, true)
}

func decodeKnown(path string, docs []KnownDoc, copied bool) (objs []Object, ok bool) {
	objs = make([]Object, len(docs))
	for i, kd := range docs {
		v := newKindValue(kd.Kind, v1alpha1.Source{Path: path, Line: kd.Line})
		if v == nil || decode(v, kd.Encoded, copied) != nil {
			return nil, false
		}
		obj := Object{Kind: kd.Kind, Name: kd.Name, Source: v1alpha1.Source{Path: path, Line: kd.Line}, Value: v, Lines: kd.Lines}
		if copied {
			obj.Kind, obj.Name, obj.Lines.enc = strings.Clone(obj.Kind), strings.Clone(obj.Name), strings.Clone(obj.Lines.enc)
		}
		objs[i] = obj
	}
	return objs, true
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
	objs, _, errs := ParseFileCheckedDocs(f, policies)
	return objs, errs
}

// ParseFileCheckedDocs is ParseFileChecked that also returns each object's
// KnownDoc when the file has no errors (nil otherwise), as
// ParseKnownGoodDocs does.
func ParseFileCheckedDocs(f File, policies []File) ([]Object, []KnownDoc, Errors) {
	if policies == nil {
		policies = []File{}
	}
	return parseFile(f, policies, true)
}
