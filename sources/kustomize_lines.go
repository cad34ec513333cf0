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
	docs map[string][]*yaml.Node // source path → its documents
}

func newSourceLines(ins []input) *sourceLines {
	sl := &sourceLines{docs: map[string][]*yaml.Node{}}
	for _, in := range ins {
		if in.origin == nil {
			continue
		}
		if _, done := sl.docs[in.Path]; done {
			continue
		}
		var docs []*yaml.Node
		dec := yaml.NewDecoder(bytes.NewReader(in.origin))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); err != nil {
				if !errors.Is(err, io.EOF) {
					docs = nil
				}
				break
			}
			docs = append(docs, &n)
		}
		sl.docs[in.Path] = docs
	}
	return sl
}

// fix rewrites the line and column of errors in rendered files.
func (sl *sourceLines) fix(errs schemas.Errors) {
	if len(sl.docs) == 0 {
		return
	}
	for i, e := range errs {
		docs, ok := sl.docs[e.Path]
		if !ok {
			continue
		}
		errs[i].Line, errs[i].Col = 0, 0
		for _, d := range docs {
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
