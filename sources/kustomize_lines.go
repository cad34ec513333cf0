package sources

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/patch"
)

// sourceLines maps errors found in kustomize output back to the source file
// the object came from: kustomize rewrites the YAML (sorted keys, prefixes,
// labels), so a line in the output is not a line the user wrote. An error's
// field path is looked up in the source file instead; when it is not there
// (a field kustomize added), the line is left out rather than made up.
type sourceLines struct {
	origins  map[string][]byte   // source path → its text
	renders  map[string][][]byte // source path → kustomize's outputs of it (one an overlay)
	by       map[string][]*kustomized
	docs     map[string][]*yaml.Node
	rendered map[string][][]*yaml.Node
}

// newSourceLines keeps the rendered inputs' texts; each is parsed only
// when an error names its path (fix), so a revision without errors in
// rendered files parses none.
func newSourceLines(ins []input) *sourceLines {
	sl := &sourceLines{origins: map[string][]byte{}, renders: map[string][][]byte{}, by: map[string][]*kustomized{}}
	for _, in := range ins {
		if in.render == nil {
			continue
		}
		sl.origins[in.Path] = in.render.source
		sl.renders[in.Path] = append(sl.renders[in.Path], in.Data)
		sl.by[in.Path] = append(sl.by[in.Path], in.render.by)
	}
	return sl
}

// parsed parses path's source and renderings, once.
func (sl *sourceLines) parsed(path string) {
	if sl.docs == nil {
		sl.docs, sl.rendered = map[string][]*yaml.Node{}, map[string][][]*yaml.Node{}
	}
	if _, done := sl.docs[path]; done {
		return
	}
	sl.docs[path] = yamlDocs(sl.origins[path])
	for _, r := range sl.renders[path] {
		sl.rendered[path] = append(sl.rendered[path], yamlDocs(r))
	}
}

// yamlDocs are the documents of data, none when it does not parse.
func yamlDocs(data []byte) []*yaml.Node {
	var docs []*yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if !errors.Is(err, io.EOF) {
				return nil
			}
			return docs
		}
		docs = append(docs, &n)
	}
}

// sourceDocs are the source documents an error at line of the rendered
// output, about field, may be about: the one of the same kind and name as
// the rendered document at that line (kustomize may have added a prefix
// or suffix to the name), else every document of the file. A file two
// overlays render has two outputs, and an error does not say which: the
// outputs whose document at that line has field there (or starts there)
// are asked, and the document is known when they agree.
func (sl *sourceLines) sourceDocs(path string, line int, field string) []*yaml.Node {
	docs := sl.docs[path]
	var found, fallback []*yaml.Node
	for _, rendered := range sl.rendered[path] {
		at := docAt(rendered, line)
		if at == nil {
			continue
		}
		kind, name := identity(at)
		d := docsOf(docs, kind, name)
		if len(d) != 1 {
			return docs
		}
		if n := lookupField(at, field); at.Line != line && (n == nil || n.Line != line) {
			fallback = d // this output has nothing at that line: maybe not the error's
			continue
		}
		if found != nil && found[0] != d[0] {
			return docs
		}
		found = d
	}
	switch {
	case found != nil:
		return found
	case fallback != nil && len(sl.rendered[path]) == 1:
		return fallback
	}
	return docs
}

// docAt is the last of docs that starts at or before line; nil: none.
func docAt(docs []*yaml.Node, line int) *yaml.Node {
	var at *yaml.Node
	for _, d := range docs {
		if d.Line <= line {
			at = d
		}
	}
	return at
}

// docsOf are the documents of a rendered file's source that are the
// object kustomize rendered as kind and name: the one of that name, else
// the one with the longest name found in it (kustomize may add a prefix or
// suffix: prod-edge2 is edge2, not edge), else all of them.
func docsOf(docs []*yaml.Node, kind, name string) []*yaml.Node {
	var best []*yaml.Node
	longest := 0
	for _, d := range docs {
		k, n := identity(d)
		if k != kind || n == "" || !strings.Contains(name, n) {
			continue
		}
		switch {
		case len(n) > longest:
			best, longest = []*yaml.Node{d}, len(n)
		case len(n) == longest:
			best = append(best, d)
		}
	}
	if len(best) == 1 {
		return best
	}
	return docs
}

// identity is a document's kind and metadata.name.
func identity(d *yaml.Node) (kind, name string) {
	if n := lookupField(d, "kind"); n != nil {
		kind = n.Value
	}
	if n := lookupField(d, "metadata.name"); n != nil {
		name = n.Value
	}
	return kind, name
}

// fix rewrites the line and column of errors in rendered files.
func (sl *sourceLines) fix(errs schemas.Errors) {
	if len(sl.origins) == 0 {
		return
	}
	for i, e := range errs {
		if _, ok := sl.origins[e.Path]; !ok {
			continue
		}
		sl.parsed(e.Path)
		errs[i].Line, errs[i].Col = 0, 0
		var written *yaml.Node
		for _, d := range sl.sourceDocs(e.Path, e.Line, e.Field) {
			if n := lookupField(d, e.Field); n != nil {
				errs[i].Line, errs[i].Col = n.Line, n.Column
				written = n
				break
			}
		}
		if v, by := sl.renderedValue(e.Path, e.Line, e.Field, e.Message); v != nil && !sameValue(e.Field, written, v) {
			sl.setBy(&errs[i], by, v)
		}
	}
}

// renderedValue is the scalar at field of the rendered document an error
// at line of path's output is about, and the rendering it is in; nil when
// no output has a scalar field there at that line. Of two overlays' outputs
// with the field at that line, the one whose value the message quotes.
func (sl *sourceLines) renderedValue(path string, line int, field, msg string) (*yaml.Node, *kustomized) {
	var first *yaml.Node
	var firstBy *kustomized
	for i, rendered := range sl.rendered[path] {
		at := docAt(rendered, line)
		if at == nil {
			continue
		}
		n := lookupField(at, field)
		if n == nil || n.Kind != yaml.ScalarNode || n.Line != line {
			continue
		}
		if strings.Contains(msg, n.Value) {
			return n, sl.by[path][i]
		}
		if first == nil {
			first, firstBy = n, sl.by[path][i]
		}
	}
	return first, firstBy
}

// sameValue reports whether the scalar v of the rendering is the value
// written in the source (src, nil when not written there): a value a
// kustomization sets is not. A name may have gained a namePrefix or
// nameSuffix.
func sameValue(field string, src, v *yaml.Node) bool {
	switch {
	case src == nil:
		return false
	case src.Kind != yaml.ScalarNode:
		return true // the error is about a whole mapping or list, written there
	case field == "metadata.name":
		return strings.Contains(v.Value, src.Value)
	}
	return src.Value == v.Value
}

// setBy places an error about a value v that a kustomization's rendering
// by sets, not the source file: at the patch that writes it, or, when no
// patch says it as written, at no line of the source, saying where the
// value comes from. An error moved to the patch keeps the object's file
// as its Source: it is still that object's (a cluster's history).
func (sl *sourceLines) setBy(e *schemas.Error, by *kustomized, v *yaml.Node) {
	src := e.Path
	if p, n := by.writes(e.Field, v.Value); n != nil {
		e.Path, e.Line, e.Col, e.Source = p, n.Line, n.Column, src
		e.Message += fmt.Sprintf(" (a kustomize patch sets it on %s)", src)
		return
	}
	e.Line, e.Col = 0, 0
	e.Message += fmt.Sprintf(" (kustomize's rendering of %s sets the value; it is not written in this file)", by.file)
}

// writes finds where one of the kustomization's files (its own and its
// bases', the patch files they name) writes value at field: a strategic
// merge patch that has it, or a JSON 6902 operation on its path, in a
// file or inline in a kustomization (a literal block, patch: |). The
// node has the line and column in that file.
func (k *kustomized) writes(field, value string) (string, *yaml.Node) {
	paths := make([]string, 0, len(k.texts))
	for p := range k.texts {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		data := k.texts[p]
		if n := patchWrites(yamlDocs(data), field, value); n != nil {
			return p, n
		}
		if !isKustomization(path.Base(p)) {
			continue
		}
		// Inline patches: each literal block is a patch of its own.
		lines := strings.Split(string(data), "\n")
		var found *yaml.Node
		for _, d := range yamlDocs(data) {
			walkNodes(d, func(b *yaml.Node) {
				if found != nil || b.Kind != yaml.ScalarNode || b.Style != yaml.LiteralStyle || b.Line >= len(lines) {
					return
				}
				n := patchWrites(yamlDocs([]byte(b.Value)), field, value)
				if n == nil {
					return
				}
				// The block's text starts on the next line, indented.
				first := lines[b.Line] // the line after b.Line (1-based)
				indent := len(first) - len(strings.TrimLeft(first, " "))
				found = &yaml.Node{Kind: n.Kind, Value: n.Value, Line: b.Line + n.Line, Column: indent + n.Column}
			})
		}
		if found != nil {
			return p, found
		}
	}
	return "", nil
}

// patchWrites is the node of docs (a patch's documents) that writes value
// at field: the field of a strategic merge patch, or the value of a JSON
// 6902 operation whose path is the field or holds it.
func patchWrites(docs []*yaml.Node, field, value string) *yaml.Node {
	for _, d := range docs {
		root := d
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
		if root.Kind == yaml.SequenceNode {
			for _, op := range root.Content {
				p, v := mappingValue(op, "path"), mappingValue(op, "value")
				if p == nil || v == nil || !strings.HasPrefix(p.Value, "/") {
					continue
				}
				at := patch.Pointer(strings.Split(p.Value[1:], "/")).Dotted()
				var n *yaml.Node
				switch {
				case at == field:
					n = v
				case strings.HasPrefix(field, at+"."):
					n = lookupField(v, field[len(at)+1:])
				}
				if n != nil && n.Kind == yaml.ScalarNode && n.Value == value {
					return n
				}
			}
			continue
		}
		if n := lookupField(d, field); n != nil && n.Kind == yaml.ScalarNode && n.Value == value {
			return n
		}
	}
	return nil
}

// walkNodes calls fn on n and every node below it.
func walkNodes(n *yaml.Node, fn func(*yaml.Node)) {
	fn(n)
	for _, c := range n.Content {
		walkNodes(c, fn)
	}
}

// lookupField finds a dotted field path like spec.workers[0].class in a
// YAML document; "" is the document itself.
func lookupField(doc *yaml.Node, field string) *yaml.Node {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if field == "" {
		return n
	}
	for _, part := range strings.Split(field, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			n = mappingValue(n, name)
		}
		for rest != "" && n != nil {
			idx, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(idx)
			if !ok || err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return nil
			}
			n = n.Content[i]
			rest = strings.TrimPrefix(after, "[")
		}
		if n == nil {
			return nil
		}
	}
	return n
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
