package sources

import (
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// Places says where the fields of a validated revision's objects are
// written. An error found after validation names a document (its path and
// first line, as v1alpha1.Source does) and a field — the planner's
// problems do —, and At gives that field's line and column, the way
// validation errors have them, instead of the document's first line.
//
// It keeps the revision's parse results (shared with the parse cache, so
// a daemon's revision costs a slice of pointers) and, for files rendered
// by kustomize, the text of their source files, whose lines errors point
// at (parsed only when asked).
type Places struct {
	results []*parsed
	origins map[string][]byte // a rendered file's source text, by path

	once   sync.Once
	byPath map[string][]int // indexes of results, by path

	mu       sync.Mutex
	rendered map[string][]*yaml.Node // origins parsed, by path
}

func newPlaces(results []*parsed, ins []input) *Places {
	p := &Places{results: results}
	for _, in := range ins {
		if in.render == nil {
			continue
		}
		if p.origins == nil {
			p.origins = map[string][]byte{}
		}
		if _, ok := p.origins[in.Path]; !ok {
			p.origins[in.Path] = in.render.source
		}
	}
	return p
}

// At returns the line and column where field (dotted, as
// spec.topology.workers.machineDeployments[0].replicas) of the object
// whose document starts at src is written, or where its nearest written
// parent is; ok is false when p holds no such object (nil p: none). For a
// file rendered by kustomize the field is looked up in its source file,
// as validation errors are, and ok is false when it is not written there.
func (p *Places) At(src v1alpha1.Source, field string) (line, col int, ok bool) {
	if p == nil {
		return 0, 0, false
	}
	o := p.object(src)
	if data, rendered := p.origins[src.Path]; rendered {
		kind, name := "", ""
		if o != nil {
			kind, name = o.Kind, o.Name
		}
		return p.inSource(src.Path, data, kind, name, field)
	}
	if o == nil {
		return 0, 0, false
	}
	e := o.ErrorAt(field, "")
	return e.Line, e.Col, true
}

// object is the object whose document starts at src, nil when p holds none.
func (p *Places) object(src v1alpha1.Source) *schemas.Object {
	p.once.Do(func() {
		p.byPath = make(map[string][]int, len(p.results))
		for i, r := range p.results {
			if r == nil || len(r.objs) == 0 {
				continue
			}
			path := r.objs[0].Source.Path
			p.byPath[path] = append(p.byPath[path], i)
		}
	})
	for _, i := range p.byPath[src.Path] {
		objs := p.results[i].objs
		for j := range objs {
			if o := &objs[j]; o.Source == src {
				return o
			}
		}
	}
	return nil
}

// inSource finds field, or its nearest parent, in the document of a
// rendered file's source text that is the object kind and name (docsOf).
func (p *Places) inSource(path string, data []byte, kind, name, field string) (int, int, bool) {
	p.mu.Lock()
	docs, parsed := p.rendered[path]
	if !parsed {
		docs = yamlDocs(data)
		if p.rendered == nil {
			p.rendered = map[string][]*yaml.Node{}
		}
		p.rendered[path] = docs
	}
	p.mu.Unlock()
	if kind != "" {
		docs = docsOf(docs, kind, name)
	}
	for f := field; f != ""; f = parentField(f) {
		for _, d := range docs {
			if n := lookupField(d, f); n != nil {
				return n.Line, n.Column, true
			}
		}
	}
	return 0, 0, false
}

// parentField drops the last element of a field path: a.b[0].c -> a.b[0]
// -> a.b -> a -> "".
func parentField(f string) string {
	i := strings.LastIndexAny(f, ".[")
	if i < 0 {
		return ""
	}
	return f[:i]
}
