// Package schemas validates fleet repositories: the CUE schema of every kind
// (embedded), each provider's machine spec schema, cross-object checks and the
// fleet's own policies. Errors point at the user's file and line.
//
// The entry points are split so callers can cache per file:
//
//	objs, errs := schemas.ParseFile(f)         // one file: YAML + schema; cache by blob hash
//	fleet, errs := schemas.Check(objs, pols)   // cross-object rules and policies
//	fleet, errs := schemas.Load(files)         // both, for a whole tree
package schemas

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// File is one file of a fleet repository at some revision.
type File struct {
	Path string // repository-relative, slash-separated
	Data []byte
}

// Error is one problem in a user's file.
type Error struct {
	Path    string // file, repository-relative
	Line    int    // 1-based; 0 when unknown
	Col     int    // 1-based; 0 when unknown
	Field   string // dotted field path, e.g. spec.topology.version; may be empty
	Message string // what is wrong and, where obvious, the fix
}

// Error formats as path:line:col: field: message.
func (e Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Col > 0 {
			fmt.Fprintf(&b, ":%d", e.Col)
		}
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Errors is every problem found, sorted by path, line, column and field.
type Errors []Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Object is one validated document of a fleet repository.
type Object struct {
	Kind   string
	Name   string
	Source v1alpha1.Source
	// Value points at the decoded typed object (*v1alpha1.Cluster, ...).
	Value any
	// Lines says where each field is written, for errors found after
	// parsing.
	Lines Lines
	// Raw is the document as plain Go values (map[string]any, []any,
	// string, int64, float64, bool, nil), which policies are checked against.
	Raw map[string]any
	// Invalid is set when the document failed validation: Value is nil, and
	// the object is kept so that cross-object checks know the name exists
	// (no "class not found" after a class with a typo).
	Invalid bool
	// Key names the document's content for caches (sources sets it: the
	// file's content hash, path and the document's line); CheckKnown trusts
	// an earlier verdict only for objects with a key.
	Key string
}

// Pos is a line and column in a file.
type Pos struct{ Line, Col int }

// Lines says where a document's fields are written: each dotted field path
// (spec.topology.classRef.name, list elements as
// spec.topology.workers.machineDeployments[0].name) with its line and
// column, sorted by path. It is only read once the document is parsed, so
// it is a list rather than a map: a 30-line cluster's positions take under
// half of a map's memory, which counts when a daemon holds 10,000 clusters.
type Lines []FieldPos

// FieldPos is where one field is written.
type FieldPos struct {
	Field     string
	Line, Col int32
}

// At returns where field is written.
func (l Lines) At(field string) (Pos, bool) {
	i, ok := slices.BinarySearchFunc(l, field, func(e FieldPos, f string) int { return strings.Compare(e.Field, f) })
	if !ok {
		return Pos{}, false
	}
	return Pos{int(l[i].Line), int(l[i].Col)}, true
}

// newLines sorts the positions a document's conversion recorded.
func newLines(m map[string]Pos) Lines {
	l := make(Lines, 0, len(m))
	for f, p := range m {
		l = append(l, FieldPos{f, int32(p.Line), int32(p.Col)})
	}
	slices.SortFunc(l, func(a, b FieldPos) int { return strings.Compare(a.Field, b.Field) })
	return l
}
