package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// maxNodes bounds how many YAML nodes one document may expand to, so a
// "billion laughs" of nested aliases is an error instead of an OOM.
const maxNodes = 200_000

// doc is one YAML document decoded to plain Go values (map[string]any,
// []any, string, int64, float64, bool, nil), with the position and the
// YAML node of every field path, for error messages.
type doc struct {
	line  int // first line of the document
	value any
	lines Lines          // where each field is written (the key, for fields)
	pos   map[string]Pos // lines while the document is converted
	root  *yaml.Node
	vals  map[string]*yaml.Node // field path -> the value node; built by valueNodes on the first error
	errs  []Error               // duplicate keys, alias bombs, odd keys
}

// posMaps are the maps documents record positions in while they are
// converted, reused: each document's positions end up in its Lines.
var posMaps sync.Pool

func getPosMap(hint int) map[string]Pos {
	if m, ok := posMaps.Get().(map[string]Pos); ok {
		return m
	}
	return make(map[string]Pos, hint)
}

func putPosMap(m map[string]Pos) {
	if len(m) > 1024 {
		return // a huge document's map would keep its size
	}
	clear(m)
	posMaps.Put(m)
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): `)

// splitYAML decodes every document of a file. A syntax error ends the file:
// the documents before it are returned with the error.
func splitYAML(path string, data []byte) ([]*doc, *Error) {
	// A field or list element per line is typical: size the maps once.
	hint := min(bytes.Count(data, []byte{'\n'})+8, 64)
	var docs []*doc
	add := func(root *yaml.Node) {
		if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
			return // an empty document: only comments, or a stray ---
		}
		d := &doc{line: root.Line, root: root, pos: getPosMap(hint)}
		b := &docBuilder{path: path, d: d}
		d.value = b.value(root, "", nil)
		d.lines = newLines(d.pos)
		putPosMap(d.pos)
		d.pos = nil
		docs = append(docs, d)
	}
	if roots, ok := fastYAML(data); ok {
		for _, root := range roots {
			add(root)
		}
		return docs, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, yamlSyntaxError(path, err, data)
		}
		if len(n.Content) > 0 {
			add(n.Content[0])
		}
	}
}

// valueNodes maps each field path to its YAML value node, for messages that
// show a value as written. Only documents with errors need it, so it is
// built on first use by converting the document again.
func (d *doc) valueNodes() map[string]*yaml.Node {
	if d.vals == nil {
		again := &doc{line: d.line, root: d.root, pos: map[string]Pos{}, vals: map[string]*yaml.Node{}}
		(&docBuilder{d: again}).value(d.root, "", nil)
		d.vals = again.vals
	}
	return d.vals
}

// yamlSyntaxError is the YAML parser's error with its line, and what the
// parser's words leave out: where a character YAML cannot read is (a byte
// that is not UTF-8, a control character: the parser gives no line for
// them), and the usual cause of a message (a tab that indents, a
// non-breaking space copied from a web page).
func yamlSyntaxError(path string, err error, data []byte) *Error {
	msg := err.Error()
	e := &Error{Path: path}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	e.Message = "not valid YAML: " + msg
	lines := strings.Split(string(data), "\n")
	switch {
	case strings.Contains(msg, "UTF-8"):
		for i, l := range lines {
			if !utf8.ValidString(l) {
				e.Line = i + 1
				e.Message = "not valid YAML: this line has bytes that are not UTF-8: save the file as UTF-8"
				return e
			}
		}
	case strings.Contains(msg, "control characters"):
		for i, l := range lines {
			// YAML allows tab, CR and NEL among the C0 and C1 controls.
			if at := strings.IndexFunc(l, func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\r' && r != '\u0085' }); at >= 0 {
				r, _ := utf8.DecodeRuneInString(l[at:])
				e.Line, e.Col = i+1, utf8.RuneCountInString(l[:at])+1
				e.Message = fmt.Sprintf("not valid YAML: a control character (U+%04X) YAML does not allow: remove it", r)
				return e
			}
		}
	}
	if strings.Contains(msg, "did not find expected key") {
		e.Message += ": a key below this line is indented differently from the keys beside it (keys of one map start in the same column)"
		return e
	}
	// Near the line the parser names (it often names the next one):
	for _, n := range []int{e.Line, e.Line - 1} {
		if n < 1 || n > len(lines) {
			continue
		}
		l := lines[n-1]
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t\u00a0"))]
		switch {
		case strings.Contains(indent, "\t"):
			e.Line = n
			e.Message += ": a tab indents line " + strconv.Itoa(n) + "; YAML indents with spaces only"
			return e
		case strings.Contains(indent, "\u00a0"):
			e.Line = n
			e.Message += ": line " + strconv.Itoa(n) + " has a non-breaking space (U+00A0, often pasted from a web page); write a plain space"
			return e
		}
	}
	return e
}

type docBuilder struct {
	path  string
	d     *doc
	count int
	stop  bool
}

func (b *docBuilder) errorf(n *yaml.Node, field, format string, args ...any) {
	b.d.errs = append(b.d.errs, Error{Path: b.path, Line: n.Line, Col: n.Column, Field: field, Message: fmt.Sprintf(format, args...)})
}

// value converts n, recording positions under path p. seen guards against
// alias cycles.
func (b *docBuilder) value(n *yaml.Node, p string, seen []*yaml.Node) any {
	b.count++
	if b.count > maxNodes {
		if !b.stop {
			b.stop = true
			b.errorf(n, p, "document expands to more than %d values (nested aliases?)", maxNodes)
		}
		return nil
	}
	if b.d.vals != nil {
		if _, ok := b.d.vals[p]; !ok {
			b.d.vals[p] = n
		}
	}
	if _, ok := b.d.pos[p]; !ok {
		b.d.pos[p] = Pos{n.Line, n.Column}
	}
	if appTag(n) {
		b.errorf(n, p, "YAML tag %s is not resolved: gitfleet reads values as written, so write the literal value here; secrets never go in Git (no fleet field takes one: docs/security.md)", n.Tag)
		return nil
	}
	switch n.Kind {
	case yaml.AliasNode:
		for _, s := range seen {
			if s == n.Alias {
				b.errorf(n, p, "alias *%s refers to itself", n.Value)
				return nil
			}
		}
		return b.value(n.Alias, p, append(seen, n.Alias))
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return b.value(n.Content[0], p, seen)
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, c := range n.Content {
			out[i] = b.value(c, internPath(p, "", i), seen)
		}
		return out
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		b.mapping(n, p, out, seen, false)
		return out
	default:
		return scalar(n)
	}
}

// appTag: n has an application's tag (!vault, !Ref, !e!name), not YAML's
// own (!!str, !!int). gitfleet resolves none: the node would be read as
// written, its tag dropped.
func appTag(n *yaml.Node) bool {
	return n.Tag != "" && !strings.HasPrefix(n.Tag, "!!")
}

// mapping adds n's fields to out. Merge keys (<<: *base) add the base's
// fields unless set explicitly.
func (b *docBuilder) mapping(n *yaml.Node, p string, out map[string]any, seen []*yaml.Node, merging bool) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			b.errorf(k, p, "a key must be a plain string")
			continue
		}
		fp := internPath(p, k.Value, -1)
		if appTag(k) {
			b.errorf(k, fp, "YAML tag %s on the key is not resolved: gitfleet reads keys as written, so remove the tag and write the plain key %s", k.Tag, k.Value)
		}
		if _, dup := out[k.Value]; dup {
			if !merging {
				b.errorf(k, fp, "duplicate key %q: remove one", k.Value)
			}
			continue
		}
		if _, ok := b.d.pos[fp]; !ok || !merging {
			b.d.pos[fp] = Pos{k.Line, k.Column}
		}
		out[k.Value] = b.value(v, fp, seen)
	}
	for _, m := range merges {
		b.merge(m, p, out, seen)
	}
}

func (b *docBuilder) merge(v *yaml.Node, p string, out map[string]any, seen []*yaml.Node) {
	for v.Kind == yaml.AliasNode {
		for _, s := range seen {
			if s == v.Alias {
				b.errorf(v, p, "alias *%s refers to itself", v.Value)
				return
			}
		}
		seen = append(seen, v.Alias)
		v = v.Alias
	}
	switch v.Kind {
	case yaml.MappingNode:
		b.mergeMissing(v, p, out, seen)
	case yaml.SequenceNode:
		for _, c := range v.Content {
			b.merge(c, p, out, seen)
		}
	default:
		b.errorf(v, p, "a merge key (<<) takes a mapping or a list of mappings")
	}
}

// mergeMissing adds the base's fields that out lacks: explicit keys win.
func (b *docBuilder) mergeMissing(v *yaml.Node, p string, out map[string]any, seen []*yaml.Node) {
	tmp := make(map[string]any)
	b.mapping(v, p, tmp, seen, true)
	for k, x := range tmp {
		if _, ok := out[k]; !ok {
			out[k] = x
		}
	}
}

// scalar converts a scalar node by its resolved tag; strconv first (most
// values), yaml.v3's own decoding for the rare forms it does not read.
func scalar(n *yaml.Node) any {
	switch n.Tag {
	case "!!null":
		return nil
	case "!!bool":
		switch n.Value {
		case "true", "True", "TRUE":
			return true
		case "false", "False", "FALSE":
			return false
		}
		var v bool
		if n.Decode(&v) == nil {
			return v
		}
	case "!!int":
		if v, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			return v
		}
		var v int64
		if n.Decode(&v) == nil {
			return v
		}
		var f float64
		if n.Decode(&f) == nil {
			return f
		}
	case "!!float":
		if v, err := strconv.ParseFloat(n.Value, 64); err == nil && !math.IsInf(v, 0) && !math.IsNaN(v) {
			return v
		}
		var v float64
		if n.Decode(&v) == nil && !math.IsInf(v, 0) && !math.IsNaN(v) {
			return v
		}
	}
	return n.Value
}

// isNumber reports whether a scalar was written as a YAML number.
func isNumber(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float")
}

// joinField appends a map key to a dotted field path.
func joinField(p, key string) string {
	if p == "" {
		return key
	}
	return p + "." + key
}

// interned holds field paths shared by many documents (spec.topology.classRef.name),
// keyed by parent path and key or index, so 10,000 clusters' Lines maps
// share one copy of each path and a hit builds no string.
var (
	interned     sync.Map // pathKey -> string
	internedSize atomic.Int64
)

const maxInterned = 1 << 16

type pathKey struct {
	parent, key string
	index       int // -1 for a map key
}

// internPath returns parent.key (index < 0) or parent[index].
func internPath(parent, key string, index int) string {
	k := pathKey{parent, key, index}
	if v, ok := interned.Load(k); ok {
		return v.(string)
	}
	s := joinField(parent, key)
	if index >= 0 {
		s = parent + "[" + strconv.Itoa(index) + "]"
	}
	if internedSize.Load() >= maxInterned || len(s) > 256 {
		return s
	}
	v, loaded := interned.LoadOrStore(k, s)
	if !loaded {
		internedSize.Add(1)
	}
	return v.(string)
}
