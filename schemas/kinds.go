package schemas

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"gopkg.in/yaml.v3"
)

// A value of a kind its place does not take — a map where a list goes, a
// string where a map of fields goes, nothing at all — is the commonest
// slip in YAML (a "- " or a colon forgotten, a line indented wrongly, a
// key left empty), and CUE words it as a conflict between the schema's
// whole definition at that place and the value: a dump of the schema no
// user should read. Such a value is told here instead, in YAML's words,
// with its fix: "is a map, but a list is expected: start each item with
// "- "". The kinds a place takes come from the schema's shape (shape.go).

// at is the shape of the place p selects in data, whose shape is sh; nil
// when the schema's shape there is not known.
func (s *shapes) at(sh *shape, data any, p cue.Path) *shape {
	for _, sel := range p.Selectors() {
		if sh == nil {
			return nil
		}
		switch sel.Type() {
		case cue.IndexLabel:
			sh = sh.elem
			l, _ := data.([]any)
			if i := sel.Index(); i >= 0 && i < len(l) {
				data = l[i]
			} else {
				data = nil
			}
		case cue.StringLabel:
			name := sel.Unquoted()
			m, _ := data.(map[string]any)
			f, named := sh.fields[name]
			switch {
			case sh.template && name == "spec":
				prov, _ := m["provider"].(string)
				if f = s.providers[prov]; f == nil {
					f = unknownSpec // #MachineTemplate's spec?: {...}
				}
			case !named:
				f = sh.pattern
			}
			sh = f
			data = m[name]
		default:
			return nil
		}
	}
	return sh
}

// unknownSpec is the shape of the spec of a provider gitfleet does not
// know: any map.
var unknownSpec = &shape{kind: cue.StructKind, open: true, optional: true, fields: map[string]*shape{}}

// kindOf is the kind of a plain value, as CUE names it; cue.BottomKind
// for a type a document does not hold.
func kindOf(x any) cue.Kind {
	switch x.(type) {
	case nil:
		return cue.NullKind
	case bool:
		return cue.BoolKind
	case int64, int:
		return cue.IntKind
	case float64:
		return cue.FloatKind
	case string:
		return cue.StringKind
	case map[string]any:
		return cue.StructKind
	case []any:
		return cue.ListKind
	}
	return cue.BottomKind
}

// kindMismatch reports whether x is of a kind that want (its place's
// shape) does not take, and is worth the words of this file: always for
// nothing, a map or a list, and where a map or a list is expected; for a
// scalar where another scalar is expected (a number where a string goes)
// only when the schema has no @help for the place (hasHelp), whose text
// then says it, or for a decimal number where a whole number is expected,
// which help texts do not say.
func kindMismatch(want *shape, x any, hasHelp bool) bool {
	if want == nil {
		return false
	}
	got := kindOf(x)
	if got == cue.NullKind {
		// Nothing written where CUE finds something wrong: the nothing
		// is what is wrong, even at a place that names no kind (a
		// validator such as net.IPCIDR takes any kind, to refuse it).
		return true
	}
	if got == cue.BottomKind || want.kind&got != 0 {
		return false
	}
	const containers = cue.StructKind | cue.ListKind
	if !hasHelp || got&containers != 0 || want.kind&containers != 0 {
		return true
	}
	return got == cue.FloatKind && wholeOnly(want.kind)
}

// wholeOnly reports whether the only number k takes is a whole one and
// it takes no string (a count or a percentage's help says it).
func wholeOnly(k cue.Kind) bool {
	return k&cue.NumberKind == cue.IntKind && k&cue.StringKind == 0
}

// kindMessage says what x is, what want takes, and, when it can, how to
// write it: `is the string "standard", but a map of fields is expected:
// write classRef: {name: standard}`. key is the field's name ("" for a
// list element); n is the value's YAML node (nil when the value was not
// written as YAML, as a patch's).
func kindMessage(want *shape, key string, x any, n *yaml.Node) string {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	found := foundWords(x, n)
	if want.kind&cue.ListKind != 0 && want.kind&cue.StructKind == 0 && kindOf(x)&(cue.StructKind|cue.NullKind) == 0 {
		found = "a single value"
	}
	msg := "is " + found
	if want.kind&^cue.NullKind != cue.TopKind&^cue.NullKind {
		msg += ", but " + expectedWords(want) + " is expected"
	}
	if fix := kindFix(want, key, x, n); fix != "" {
		msg += ": " + fix
	}
	return msg
}

// foundWords names x: empty, a map, a list, the string "x", the number 3.
func foundWords(x any, n *yaml.Node) string {
	switch v := x.(type) {
	case nil:
		if n != nil && n.Value != "" {
			return "null" // null or ~, written
		}
		return "empty"
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	case string:
		return "the string " + strconv.Quote(clip(v))
	case bool:
		return "the boolean " + scalarText(x, n)
	}
	return "the number " + scalarText(x, n)
}

// expectedWords names the kinds want takes: a map of fields, a list, a
// string, a whole number or a string, ...
func expectedWords(want *shape) string {
	var ws []string
	k := want.kind
	if k&cue.StructKind != 0 {
		if len(want.names) > 0 {
			ws = append(ws, "a map of fields")
		} else {
			ws = append(ws, "a map")
		}
	}
	if k&cue.ListKind != 0 {
		ws = append(ws, "a list")
	}
	switch k & cue.NumberKind {
	case cue.IntKind:
		ws = append(ws, "a whole number")
	case cue.FloatKind, cue.NumberKind:
		ws = append(ws, "a number")
	}
	if k&cue.StringKind != 0 {
		ws = append(ws, "a string")
	}
	if k&cue.BoolKind != 0 {
		ws = append(ws, "true or false")
	}
	switch {
	case k&^cue.NullKind == cue.TopKind&^cue.NullKind:
		return "a value"
	case len(ws) == 0:
		return "another value"
	case len(ws) == 1:
		return ws[0]
	}
	return strings.Join(ws[:len(ws)-1], ", ") + " or " + ws[len(ws)-1]
}

var (
	// "replicas:1": YAML reads a colon without a space after it as part of a string.
	noSpaceRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*):(\S.*)$`)
	// "replicas 1": the colon forgotten.
	noColonRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*)\s+([^:]+)$`)
)

// kindFix says how to write x as want takes it, or "".
func kindFix(want *shape, key string, x any, n *yaml.Node) string {
	orRemove := ""
	if want.optional {
		orRemove = ", or remove the line"
	}
	// A place that takes any kind (a validator such as net.IPCIDR) wants
	// a value written as a scalar's.
	top := want.kind&^cue.NullKind == cue.TopKind&^cue.NullKind
	switch {
	case top:
	case want.kind&cue.StructKind != 0:
		fields := "write its fields under it, indented (" + fieldHint(want) + ")"
		switch v := x.(type) {
		case nil:
			return fields + orRemove
		case string:
			if m := noSpaceRE.FindStringSubmatch(v); m != nil {
				return fmt.Sprintf("write %q, with a space after the colon", m[1]+": "+m[2])
			}
			if m := noColonRE.FindStringSubmatch(v); m != nil && want.fields[m[1]] != nil {
				return fmt.Sprintf("write %q, with a colon and a space after %s", m[1]+": "+m[2], m[1])
			}
			if fix := oneField(want, key, v, n); fix != "" {
				return fix
			}
		case []any:
			if allMaps(v) {
				return `remove the "- " in front of its fields`
			}
			if s, ok := oneString(v); ok {
				if fix := oneField(want, key, s, nil); fix != "" {
					return fix
				}
			}
		}
		return fields
	case want.kind&cue.ListKind != 0:
		switch x.(type) {
		case nil:
			return `write its items under it, each starting with "- "` + orRemove
		case map[string]any:
			return `start each item with "- "`
		}
		return "write [" + listText(x, n) + "]"
	}
	// A scalar is expected, or any value.
	switch v := x.(type) {
	case nil:
		if key == "" {
			return `write a value after "- "`
		}
		return fmt.Sprintf("write a value after %q", key+":") + orRemove
	case map[string]any:
		switch {
		case key == "":
			return "write a single value, not fields"
		case n != nil && n.Style&yaml.FlowStyle != 0:
			return fmt.Sprintf("write a single value after %q", key+":")
		}
		return fmt.Sprintf("write a single value after %q, or indent the lines under it less", key+":")
	case []any:
		if len(v) == 1 && kindOf(v[0])&(cue.StructKind|cue.ListKind|cue.NullKind) == 0 && key != "" {
			return "write " + key + ": " + flowText(v[0], nil)
		}
		return `write a single value, without "- " or [ ]`
	case float64:
		if wholeOnly(want.kind) && v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return "write " + strconv.FormatInt(int64(v), 10)
		}
		if want.kind&cue.StringKind != 0 {
			return "write " + strconv.Quote(scalarText(x, n)) + ", in quotes"
		}
	case int64, bool:
		if want.kind&cue.StringKind != 0 {
			return "write " + strconv.Quote(scalarText(x, n)) + ", in quotes"
		}
	case string:
		if want.kind == cue.BoolKind {
			return "write true or false"
		}
	}
	return ""
}

// oneField is the fix of a string s written where a map of one required
// field, a string, goes (classRef: standard): write classRef: {name:
// standard}; "" for a map of other fields, or a string that is not one
// value.
func oneField(want *shape, key, s string, n *yaml.Node) string {
	r := required(want)
	if len(r) != 1 || want.fields[r[0]].kind&cue.StringKind == 0 || strings.ContainsAny(s, ": \t\n") {
		return ""
	}
	inner := "{" + r[0] + ": " + flowText(s, n) + "}"
	if key != "" {
		return "write " + key + ": " + inner
	}
	return "write " + inner
}

// oneString is the string of a list of one string.
func oneString(l []any) (string, bool) {
	if len(l) != 1 {
		return "", false
	}
	s, ok := l[0].(string)
	return s, ok
}

// fieldHint names the fields want needs (topology: ...), or those it
// takes when none is required.
func fieldHint(want *shape) string {
	if len(want.names) == 0 {
		return "key: value"
	}
	if len(want.names) == 1 {
		return want.names[0] + ": ..."
	}
	if r := required(want); len(r) > 0 {
		return strings.Join(r, ": ..., ") + ": ..."
	}
	names := want.names
	if len(names) > 5 {
		names = append(names[:5:5], "...")
	}
	return "one of " + strings.Join(names, ", ")
}

// required is want's fields that may not be left out, in the schema's order.
func required(want *shape) []string {
	var out []string
	for _, name := range want.names {
		if !want.fields[name].optional {
			out = append(out, name)
		}
	}
	return out
}

func allMaps(l []any) bool {
	for _, x := range l {
		if _, ok := x.(map[string]any); !ok {
			return false
		}
	}
	return len(l) > 0
}

// scalarText is a scalar as written: 2.0, 1e3, true.
func scalarText(x any, n *yaml.Node) string {
	if n != nil && n.Kind == yaml.ScalarNode {
		return clip(n.Value)
	}
	switch v := x.(type) {
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return clip(v)
	}
	return fmt.Sprint(x)
}

// flowText is a scalar as it can be written inside { } or [ ]: quoted
// when it was, or when it would not read back as itself there.
func flowText(x any, n *yaml.Node) string {
	s := scalarText(x, n)
	quoted := n != nil && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0
	if _, ok := x.(string); ok && (quoted || s == "" || strings.ContainsAny(s, ",[]{}#&*!|>'\"%@`\n") || strings.Contains(s, ": ")) {
		return strconv.Quote(s)
	}
	return s
}

// listText is a single value written where a list is expected, as the
// items of a flow list: commas that the user wrote between values stay
// separators.
func listText(x any, n *yaml.Node) string {
	s := scalarText(x, n)
	if _, ok := x.(string); ok && !strings.ContainsAny(s, "[]{}#\n") && !strings.Contains(s, ": ") &&
		(n == nil || n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0) {
		return s
	}
	return flowText(x, n)
}

// clip shortens a long value for a message.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= 60 {
		return s
	}
	r := []rune(s)
	return string(r[:57]) + "..."
}
