package sources

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/schemas"
)

// sourceLines maps errors found in kustomize output back to the source file
// the object came from: kustomize rewrites the YAML (sorted keys, prefixes,
// labels), so a line in the output is not a line the user wrote. An error's
// field path is looked up in the source file instead; when it is not there
// (a field kustomize added), the line is left out rather than made up.
type sourceLines struct {
	origins  map[string][]byte   // source path → its text
	renders  map[string][][]byte // source path → kustomize's outputs of it (one an overlay)
	docs     map[string][]*yaml.Node
	rendered map[string][][]*yaml.Node
}

// newSourceLines keeps the rendered inputs' texts; each is parsed only
// when an error names its path (fix), so a revision without errors in
// rendered files parses none.
func newSourceLines(ins []input) *sourceLines {
	sl := &sourceLines{origins: map[string][]byte{}, renders: map[string][][]byte{}}
	for _, in := range ins {
		if in.origin == nil {
			continue
		}
		sl.origins[in.Path] = in.origin
		sl.renders[in.Path] = append(sl.renders[in.Path], in.Data)
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
		var at *yaml.Node
		for _, r := range rendered {
			if r.Line <= line {
				at = r // the last document that starts at or before the line
			}
		}
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
		for _, d := range sl.sourceDocs(e.Path, e.Line, e.Field) {
			if n := lookupField(d, e.Field); n != nil {
				errs[i].Line, errs[i].Col = n.Line, n.Column
				break
			}
		}
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
