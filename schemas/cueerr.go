package schemas

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"gopkg.in/yaml.v3"
)

// validateCUE unifies the document with its kind's schema in c's context
// and turns every violation into an Error at the user's line. It returns
// the document encoded in c's context when it encoded it (policies use it),
// else the zero value: a document the precheck accepts is not unified, or
// encoded, since CUE would find nothing.
func validateCUE(c *compiled, path string, d *doc, kind string, m map[string]any) (cue.Value, []Error) {
	if c.precheck(kind, m) {
		return cue.Value{}, nil
	}
	c.used++
	data := c.ctx.Encode(m)
	v := c.kinds[kind].Unify(data)
	err := v.Validate(cue.Concrete(true), cue.All())
	if err == nil {
		return data, nil
	}
	var out []Error
	missing := map[string]bool{}
	shapes := allowedShapes()
	for _, g := range groupErrors(err, m, 1) {
		if strings.Contains(g.msg, "field not allowed") {
			continue // unknown fields come from shapes, all of them
		}
		vals := d.valueNodes()
		if _, written := vals[g.field]; !written {
			// Report the outermost field that is missing: "spec: is
			// required", not each field inside it.
			f := g.field
			for p := parentField(f); p != ""; p = parentField(p) {
				if _, ok := vals[p]; ok {
					break
				}
				f = p
			}
			if !missing[f] {
				missing[f] = true
				out = append(out, d.errorAt(path, f, "is required"))
			}
			continue
		}
		x, _ := lookupRaw(m, g.path)
		want := shapes.at(shapes.kinds[kind], m, g.path)
		out = append(out, d.errorAt(path, g.field, message(v, g.path, d, g.field, g.msg, want, x)))
	}
	return data, out
}

// cueError is CUE's verdict on one field.
type cueError struct {
	field string   // dotted, list elements as [i]
	path  cue.Path // into the unified value
	msg   string
	first cueerrors.Error
}

var disjunctionRE = regexp.MustCompile(`^\d+ errors in empty disjunction:?$`)

// groupErrors gives one message per field, in CUE's order. skip drops the
// leading selectors that are not part of the document (#Cluster, or the
// policy's kind field). "N errors in empty disjunction" is replaced by the
// reasons that follow it.
func groupErrors(err error, data any, skip int) []cueError {
	var out []cueError
	index := map[string]int{}
	for _, e := range cueerrors.Errors(err) {
		sels := e.Path()
		sels = sels[min(skip, len(sels)):]
		field, cpath := fieldPath(data, sels)
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		i, ok := index[field]
		if !ok {
			index[field] = len(out)
			out = append(out, cueError{field: field, path: cpath, msg: msg, first: e})
			continue
		}
		g := &out[i]
		switch {
		case disjunctionRE.MatchString(g.msg):
			g.msg = msg
		case strings.Contains(g.msg, msg):
		default:
			if len(g.msg) < 300 {
				g.msg += "; " + msg
			}
		}
	}
	return out
}

// fieldPath turns CUE's path selectors into the dotted form used in errors
// (list elements as [i]) and a cue.Path into the unified value.
func fieldPath(data any, sels []string) (string, cue.Path) {
	var b strings.Builder
	var cs []cue.Selector
	for _, s := range sels {
		if list, ok := data.([]any); ok {
			if i, err := strconv.Atoi(s); err == nil {
				fmt.Fprintf(&b, "[%d]", i)
				cs = append(cs, cue.Index(i))
				if i >= 0 && i < len(list) {
					data = list[i]
				} else {
					data = nil
				}
				continue
			}
		}
		if u, err := strconv.Unquote(s); err == nil {
			s = u
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
		cs = append(cs, cue.Str(s))
		if m, ok := data.(map[string]any); ok {
			data = m[s]
		} else {
			data = nil
		}
	}
	return b.String(), cue.MakePath(cs...)
}

// message says what is wrong with the value x written at field, whose
// place in the schema has the shape want (nil when not known): a number
// written as a string, a value of a kind the place does not take
// (kinds.go), the schema's @help text after the value as written, or
// CUE's own message.
func message(v cue.Value, p cue.Path, d *doc, field, raw string, want *shape, x any) string {
	n := d.valueNodes()[field]
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && strings.Contains(raw, "mismatched types") && strings.Contains(raw, "string") &&
		(want == nil || want.kind&cue.NumberKind != 0) {
		if _, err := strconv.ParseFloat(n.Value, 64); err == nil {
			return stringNotNumber(n)
		}
	}
	help, hasHelp := helpFor(v, p, n)
	if kindMismatch(want, x, hasHelp) {
		return kindMessage(want, lastKey(p), x, n)
	}
	if hasHelp {
		return shown(n) + " " + help
	}
	return raw
}

// stringNotNumber says that a number was written as a string, and what
// made it one: quotes, a !!str tag or a block scalar.
func stringNotNumber(n *yaml.Node) string {
	switch {
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
		return strconv.Quote(n.Value) + " is a string, not a number: remove the quotes"
	case n.Style&yaml.TaggedStyle != 0:
		return "!!str " + n.Value + " is a string, not a number: remove the !!str tag"
	}
	return strconv.Quote(n.Value) + " is a string, not a number: write it as a plain number after the colon"
}

// lastKey is the name of the field p ends with; "" for a list element.
func lastKey(p cue.Path) string {
	sels := p.Selectors()
	if len(sels) == 0 || sels[len(sels)-1].Type() != cue.StringLabel {
		return ""
	}
	return sels[len(sels)-1].Unquoted()
}

// helpFor finds the @help attribute of the field at p, or of its parent
// when p is a list element or a map entry.
func helpFor(v cue.Value, p cue.Path, n *yaml.Node) (string, bool) {
	sels := p.Selectors()
	for i := 0; i < 2 && len(sels) > 0; i++ {
		a := v.LookupPath(cue.MakePath(sels...)).Attribute("help")
		if a.Err() == nil {
			if isNumber(n) {
				if s, ok, _ := a.Lookup(1, "number"); ok {
					return s, true
				}
			}
			if s, err := a.String(0); err == nil {
				return s, true
			}
		}
		last := sels[len(sels)-1]
		if last.Type() != cue.IndexLabel && last.Type() != cue.StringLabel {
			break
		}
		sels = sels[:len(sels)-1]
	}
	return "", false
}

// shown shows a value as the user wrote it: strings quoted, numbers and
// booleans as written, mappings and lists by name.
func shown(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "*" + n.Value
	}
	if n.Tag == "!!str" {
		return strconv.Quote(n.Value)
	}
	return n.Value
}
