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
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/internal/varint"
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
	// Dangling marks a reference to an object the fleet lacks (a cluster's
	// ClusterClass, a MachineDeployment's cluster): a file that could not
	// be read may define it (AwaitUnread).
	Dangling bool
	// Source is the file of the object the error is about when Path names
	// another file, where the value is written: a kustomize overlay's
	// patch that sets it on the object of Source. "" when Path is the
	// object's file. Not printed; it says whose error it is (a cluster's
	// history keeps the errors of its own file, SourceFile).
	Source string
}

// SourceFile is the file of the object the error is about: Source when
// the error points at another file (a patch), else Path.
func (e Error) SourceFile() string {
	if e.Source != "" {
		return e.Source
	}
	return e.Path
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
// column. It is only read to place an error found after parsing, and a
// daemon holds one for each of 10,000 cluster files, so it is kept as one
// string: the fields sorted, each written as the length it shares with
// the one before and the rest (a document's paths share most of their
// length), then its line and column, all in varints. A 30-line cluster's
// positions take ~350 bytes, half of a list of them.
type Lines struct{ enc string }

// FieldPos is where one field is written.
type FieldPos struct {
	Field     string
	Line, Col int32
}

// NewLines returns the positions of fields (in any order; a field given
// twice keeps its first position).
func NewLines(fields []FieldPos) Lines {
	fields = slices.Clone(fields)
	slices.SortStableFunc(fields, func(a, b FieldPos) int { return strings.Compare(a.Field, b.Field) })
	fields = slices.CompactFunc(fields, func(a, b FieldPos) bool { return a.Field == b.Field })
	return encodeLines(fields)
}

// encodeLines is the Lines of fields sorted by field, each once.
func encodeLines(fields []FieldPos) Lines {
	b := make([]byte, 0, 16*len(fields))
	prev := ""
	for _, f := range fields {
		n := 0
		for n < len(prev) && n < len(f.Field) && prev[n] == f.Field[n] {
			n++
		}
		b = binary.AppendUvarint(b, uint64(n))
		b = binary.AppendUvarint(b, uint64(len(f.Field)-n))
		b = append(b, f.Field[n:]...)
		b = binary.AppendUvarint(b, uint64(max(f.Line, 0)))
		b = binary.AppendUvarint(b, uint64(max(f.Col, 0)))
		prev = f.Field
	}
	return Lines{enc: string(b)}
}

// Encoding is l as one string, for a cache to keep; LinesFromEncoding
// takes it back.
func (l Lines) Encoding() string { return l.enc }

// LinesFromEncoding returns the Lines whose Encoding is enc, and false when
// NewLines could not have written enc (a damaged cache): every varint
// whole, each field sharing with the one before exactly the prefix they
// have in common and sorting after it, lines and columns within int32,
// every varint in its shortest form.
func LinesFromEncoding(enc string) (Lines, bool) {
	// shortest reads a varint written by binary.AppendUvarint: its last
	// byte is not zero unless it is its only one.
	shortest := func(s string) (uint64, int) {
		v, n := varint.Uvarint(s)
		if n <= 0 || (n > 1 && s[n-1] == 0) {
			return 0, 0
		}
		return v, n
	}
	var buf [256]byte
	prev := buf[:0]
	for rest, first := enc, true; rest != ""; first = false {
		shared, n1 := shortest(rest)
		if n1 <= 0 {
			return Lines{}, false
		}
		n, n2 := shortest(rest[n1:])
		if n2 <= 0 || shared > uint64(len(prev)) || n > uint64(len(rest)-n1-n2) {
			return Lines{}, false
		}
		rest = rest[n1+n2:]
		suffix := rest[:n]
		rest = rest[n:]
		// Sorted, no field twice, the shared prefix the longest: the
		// field goes on from where it parts from the one before, with a
		// greater byte, or prolongs it.
		switch {
		case !first && suffix == "":
			return Lines{}, false
		case int(shared) < len(prev) && suffix[0] <= prev[shared]:
			return Lines{}, false
		}
		prev = append(prev[:shared], suffix...)
		for range 2 {
			v, m := shortest(rest)
			if m <= 0 || v > math.MaxInt32 {
				return Lines{}, false
			}
			rest = rest[m:]
		}
	}
	return Lines{enc: enc}, true
}

// All yields the fields in order with their positions.
func (l Lines) All() iter.Seq[FieldPos] {
	return func(yield func(FieldPos) bool) {
		var field []byte
		for rest := l.enc; rest != ""; {
			var f FieldPos
			field, f.Line, f.Col, rest = nextField(field, rest)
			f.Field = string(field)
			if !yield(f) {
				return
			}
		}
	}
}

// Equal reports whether l and o place the same fields at the same
// positions.
func (l Lines) Equal(o Lines) bool { return l.enc == o.enc }

// Len is how many fields l places.
func (l Lines) Len() int {
	n := 0
	for range l.All() {
		n++
	}
	return n
}

// At returns where field is written.
func (l Lines) At(field string) (Pos, bool) {
	// same is how much of field the entry before began with; each entry
	// shares a prefix with the one before, so the comparison goes on
	// from there without building the entry's field.
	same := 0
	for rest := l.enc; rest != ""; {
		shared, r := uvarint(rest)
		n, r := uvarint(r)
		suffix := r[:min(int(n), len(r))]
		r = r[len(suffix):]
		line, r := uvarint(r)
		col, r := uvarint(r)
		rest = r
		if int(shared) < same {
			return Pos{}, false // this entry differs from field earlier than the one before, and is greater
		}
		if int(shared) > same {
			continue // it differs from field where the one before did
		}
		i := 0
		for i < len(suffix) && same+i < len(field) && suffix[i] == field[same+i] {
			i++
		}
		switch {
		case i == len(suffix) && same+i == len(field):
			return Pos{int(line), int(col)}, true
		case i == len(suffix) || (same+i < len(field) && suffix[i] < field[same+i]):
			same += i // a lesser entry: go on
		default:
			return Pos{}, false // a greater entry: sorted, so field is not here
		}
	}
	return Pos{}, false
}

// nextField decodes the entry at the start of rest, whose field shares a prefix
// with prev (the entry before's): its field (built on prev's bytes), its
// position, and what follows it.
func nextField(prev []byte, rest string) (field []byte, line, col int32, after string) {
	shared, rest := uvarint(rest)
	n, rest := uvarint(rest)
	field = append(prev[:min(int(shared), len(prev))], rest[:min(int(n), len(rest))]...)
	rest = rest[min(int(n), len(rest)):]
	l, rest := uvarint(rest)
	c, rest := uvarint(rest)
	return field, int32(l), int32(c), rest
}

// uvarint reads the varint at the start of s and returns what follows it;
// a truncated one ends s (Lines are only ever written by NewLines).
func uvarint(s string) (uint64, string) {
	v, n := varint.Uvarint(s)
	if n <= 0 {
		return v, ""
	}
	return v, s[n:]
}

// newLines returns the positions a document's conversion recorded.
func newLines(m map[string]Pos) Lines {
	l := make([]FieldPos, 0, len(m))
	for f, p := range m {
		l = append(l, FieldPos{f, int32(p.Line), int32(p.Col)})
	}
	// A map's fields are each once: no stable sort, no copy, no compaction.
	slices.SortFunc(l, func(a, b FieldPos) int { return strings.Compare(a.Field, b.Field) })
	return encodeLines(l)
}
