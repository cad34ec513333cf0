package schemas

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
)

// The precheck spares CUE's unification of a document the schema accepts:
// most of a cold validation's time at 10,000 clusters (~0.2 ms a file) went to
// unifying valid files with their kind's definition. It walks the document
// beside a tree of the definition's structs and lists, built once from the
// compiled schema, and leaves each scalar to CUE itself: the scalar is unified
// with the schema's constraint at that place (regular expressions, bounds,
// validators such as net.IPCIDR), and the verdict is remembered by place and
// value, since a fleet's files repeat their values (versions, counts, class
// names, CIDR blocks) and differ mostly in names.
//
// It only ever accepts: a document it does not accept whole (a type
// mismatch, a required field missing, a field the schema does not have, a
// machine template of a provider gitfleet does not know) goes to CUE as before,
// which words every error. So the precheck may be incomplete but must never
// accept what CUE would reject: TestPrecheckNeverAcceptsWhatCUERejects and
// FuzzPrecheck hold it to that, and TestPrecheckSchemaAssumptions fails when
// the schema gains a construct the walk does not understand (a comprehension
// outside the machine template, a builtin other than the scalar validators,
// a reference to a field, a pattern other than [string]).
type pnode struct {
	fields  map[string]pfield // a struct's fields; nil: not a struct
	pattern *pnode            // a struct's [string]: T
	open    bool              // a struct allows fields it does not name (and says nothing of them)
	elem    *pnode            // a list's [...T]; nil: not a list
	leaf    int               // a scalar place: index into prechecks.leaves; -1: none
	every   valueKinds        // a leaf that accepts every value of these kinds (string, int, _)
	opaque  bool              // CUE checks documents with a value here
	// A machine template's spec schemas by provider: #MachineTemplate
	// picks spec's schema with a comprehension on provider, which the
	// walk mirrors (TestPrecheckSchemaAssumptions holds the definition to
	// the form mirrored).
	providers map[string]*pnode
}

type pfield struct {
	n        *pnode
	optional bool
}

// valueKinds are the kinds of a decoded YAML value.
type valueKinds uint8

const (
	vNull valueKinds = 1 << iota
	vBool
	vInt
	vFloat
	vString
	vMap
	vList
	vAll = vNull | vBool | vInt | vFloat | vString | vMap | vList
)

func kindOfValue(x any) valueKinds {
	switch x.(type) {
	case nil:
		return vNull
	case bool:
		return vBool
	case int64:
		return vInt
	case float64:
		return vFloat
	case string:
		return vString
	case map[string]any:
		return vMap
	case []any:
		return vList
	}
	return 0
}

// everyOf maps the printed form of a scalar constraint to the value kinds it
// accepts whole; any other constraint is CUE's to judge.
var everyOf = map[string]valueKinds{
	"_":      vAll,
	"string": vString,
	"bool":   vBool,
	"int":    vInt,
	"number": vInt | vFloat,
}

// pstep is one step of a leaf's path from its kind's definition.
type pstep struct {
	name     string
	optional bool
	sel      int // 0: field name; 1: any field ([string]); 2: any element ([...]); 3: a definition
}

type pleaf struct {
	kind   string // "": the path is from the schema's root
	path   []pstep
	native *nativeLeaf // the constraint, checked in Go, for a string; nil: CUE checks it
}

type prechecks struct {
	kinds     map[string]*pnode
	providers map[string]*pnode // #providers' specs
	template  *pnode            // #MachineTemplate, for a patched template alone
	leaves    []pleaf
}

// leafVerdicts remembers CUE's verdict on a scalar at a leaf; it is cleared
// when it holds maxLeafVerdicts, so memory stays bounded whatever the fleet.
var leafVerdicts struct {
	sync.RWMutex
	m map[leafKey]bool
}

const maxLeafVerdicts = 1 << 16

// maxLeafText is the longest value whose verdict is kept (a name is at most
// 253 characters).
const maxLeafText = 256

type leafKey struct {
	leaf int
	kind valueKinds
	text string
}

var allPrechecks = sync.OnceValue(func() *prechecks {
	c, err := compileSchema()
	if err != nil {
		panic(err) // see validators.New
	}
	return buildPrechecks(c.root)
})

func buildPrechecks(root cue.Value) *prechecks {
	p := &prechecks{kinds: map[string]*pnode{}, providers: map[string]*pnode{}}
	it, err := root.LookupPath(cue.MakePath(cue.Def("#providers"))).Fields()
	for err == nil && it.Next() {
		name := it.Selector().Unquoted()
		p.providers[name] = p.build("", it.Value(), []pstep{{name: "#providers", sel: 3}, {name: name}}, 0)
	}
	for kind, def := range kindDefs {
		p.kinds[kind] = p.build(kind, root.LookupPath(cue.ParsePath(def)), nil, 0)
	}
	p.template = p.build("", root.LookupPath(cue.MakePath(cue.Def("#MachineTemplate"))), []pstep{{name: "#MachineTemplate", sel: 3}}, 0)
	return p
}

func (p *prechecks) build(kind string, v cue.Value, path []pstep, depth int) *pnode {
	n := &pnode{leaf: -1}
	if depth > 32 || v.Err() != nil {
		n.opaque = true
		return n
	}
	switch k := v.IncompleteKind(); k {
	case cue.StructKind:
		if isChoice(v) {
			n.opaque = true // a choice of structs: which one applies is CUE's to find
			return n
		}
		it, err := v.Fields(cue.Optional(true))
		if err != nil {
			n.opaque = true
			return n
		}
		n.fields = map[string]pfield{}
		for it.Next() {
			sel := it.Selector()
			if sel.IsDefinition() || sel.PkgPath() != "" {
				continue
			}
			name := sel.Unquoted()
			n.fields[name] = pfield{n: p.build(kind, it.Value(), step(path, pstep{name: name, optional: it.IsOptional()}), depth+1), optional: it.IsOptional()}
		}
		if _, ok := n.fields["provider"]; ok {
			// #MachineTemplate: spec's schema is #providers[provider].
			n.providers = p.providers
			return n
		}
		if pv := v.LookupPath(cue.MakePath(cue.AnyString)); pv.Exists() {
			n.pattern = p.build(kind, pv, step(path, pstep{sel: 1}), depth+1)
		}
		n.open = v.Allows(cue.AnyString)
	case cue.ListKind:
		if isChoice(v) || v.LookupPath(cue.MakePath(cue.Index(0))).Exists() {
			n.opaque = true // a choice of lists, or a list with fixed elements
			return n
		}
		ev := v.LookupPath(cue.MakePath(cue.AnyIndex))
		if !ev.Exists() {
			n.opaque = true
			return n
		}
		n.elem = p.build(kind, ev, step(path, pstep{sel: 2}), depth+1)
	default:
		// A scalar, or a value of several kinds (net.IPCIDR is `_` to
		// IncompleteKind): CUE judges each scalar written here.
		n.every = everyOf[fmt.Sprint(v)]
		n.leaf = len(p.leaves)
		p.leaves = append(p.leaves, pleaf{kind: kind, path: path, native: nativeCheck(v)})
	}
	return n
}

// isChoice reports whether v is a disjunction. CUE shows one in different
// views of a value: a field that refers to a definition shows the reference
// as its expression, and a choice of lists shows as one list once
// evaluated; a disjunction in any view is one.
func isChoice(v cue.Value) bool {
	d, _ := v.Default()
	for _, w := range []cue.Value{v, v.Eval(), d} {
		if op, _ := w.Expr(); op == cue.OrOp {
			return true
		}
	}
	return false
}

func step(path []pstep, s pstep) []pstep {
	return append(path[:len(path):len(path)], s)
}

// precheck reports whether CUE would find nothing wrong with m as a kind;
// false says only that CUE must look.
func (c *compiled) precheck(kind string, m map[string]any) bool {
	p := allPrechecks()
	n := p.kinds[kind]
	return n != nil && c.accepts(p, n, m)
}

// precheckTemplate is precheck for a machine template alone
// ({provider, spec}, as #MachineTemplate): a class's patched template.
func (c *compiled) precheckTemplate(m map[string]any) bool {
	p := allPrechecks()
	return p.template.providers != nil && c.accepts(p, p.template, m)
}

func (c *compiled) accepts(p *prechecks, n *pnode, x any) bool {
	if n.opaque {
		return false
	}
	vk := kindOfValue(x)
	if n.every&vk != 0 {
		return true
	}
	switch {
	case n.providers != nil:
		return c.acceptsTemplate(p, n, x)
	case n.fields != nil:
		m, ok := x.(map[string]any)
		if !ok {
			return false
		}
		for name, f := range n.fields {
			if _, ok := m[name]; !ok && !f.optional {
				return false // CUE says whether the schema fills it in
			}
		}
		for k, v := range m {
			f, named := n.fields[k]
			if named && !c.accepts(p, f.n, v) {
				return false
			}
			switch {
			case n.pattern != nil:
				if !c.accepts(p, n.pattern, v) {
					return false
				}
			case !named && !n.open:
				return false // an unknown field: CUE words the document's errors
			}
		}
		return true
	case n.elem != nil:
		l, ok := x.([]any)
		if !ok {
			return false
		}
		for _, v := range l {
			if !c.accepts(p, n.elem, v) {
				return false
			}
		}
		return true
	case n.leaf >= 0:
		return c.leafAccepts(p, n.leaf, vk, x)
	}
	return false
}

// acceptsTemplate mirrors #MachineTemplate: provider is a string, and
// spec, optional, is #providers[provider]'s when gitfleet knows the
// provider (an unknown one goes to CUE, as does any other field).
func (c *compiled) acceptsTemplate(p *prechecks, n *pnode, x any) bool {
	m, ok := x.(map[string]any)
	if !ok {
		return false
	}
	prov, ok := m["provider"].(string)
	if !ok || !c.accepts(p, n.fields["provider"].n, prov) {
		return false
	}
	spec := n.providers[prov]
	if spec == nil {
		return false
	}
	for k, v := range m {
		switch k {
		case "provider":
		case "spec":
			if !c.accepts(p, spec, v) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// leafAccepts is CUE's verdict on the scalar x at leaf, remembered.
func (c *compiled) leafAccepts(p *prechecks, leaf int, vk valueKinds, x any) bool {
	if n := p.leaves[leaf].native; n != nil {
		if s, ok := x.(string); ok {
			return n.accepts(s)
		}
	}
	var text string
	switch v := x.(type) {
	case nil:
	case bool:
		text = strconv.FormatBool(v)
	case int64:
		text = strconv.FormatInt(v, 10)
	case float64:
		text = strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		text = v
	default:
		return false // a map or a list where the schema has a scalar
	}
	key := leafKey{leaf: leaf, kind: vk, text: text}
	leafVerdicts.RLock()
	ok, found := leafVerdicts.m[key]
	leafVerdicts.RUnlock()
	if found {
		return ok
	}
	lv := c.leafValue(p, leaf)
	c.used++
	ok = lv.Exists() && lv.Unify(c.ctx.Encode(x)).Validate(cue.Concrete(true)) == nil
	if len(text) > maxLeafText {
		return ok // not kept: the memory would follow the values' sizes
	}
	leafVerdicts.Lock()
	if leafVerdicts.m == nil || len(leafVerdicts.m) >= maxLeafVerdicts {
		leafVerdicts.m = make(map[leafKey]bool, 1024)
	}
	leafVerdicts.m[key] = ok
	leafVerdicts.Unlock()
	return ok
}

// leafValue is leaf's constraint in c's context, looked up on first use.
func (c *compiled) leafValue(p *prechecks, leaf int) cue.Value {
	if c.leaves == nil {
		c.leaves = make([]cue.Value, len(p.leaves))
	}
	lv := c.leaves[leaf]
	if !lv.Exists() {
		l := p.leaves[leaf]
		sels := make([]cue.Selector, len(l.path))
		for i, s := range l.path {
			switch s.sel {
			case 0:
				sels[i] = cue.Str(s.name)
				if s.optional {
					sels[i] = sels[i].Optional()
				}
			case 1:
				sels[i] = cue.AnyString
			case 2:
				sels[i] = cue.AnyIndex
			default:
				sels[i] = cue.Def(s.name)
			}
		}
		base := c.root
		if l.kind != "" {
			base = c.kinds[l.kind]
		}
		lv = base.LookupPath(cue.MakePath(sels...))
		c.leaves[leaf] = lv
	}
	return lv
}

// nativeLeaf is a string constraint made only of regular expressions and
// rune counts (a name's, a label's, a version's), checked in Go: a fleet's
// names are all different, so remembering CUE's verdicts on them spared
// nothing, and unifying each with its constraint was the most of a cold
// validation's precheck. CUE matches =~ and !~ with Go's regexp and counts
// strings.MinRunes and MaxRunes in runes, as this does;
// TestNativeLeavesAreCUEs and FuzzNativeLeaves hold each such leaf to CUE's
// verdict.
type nativeLeaf struct {
	match, noMatch     []*regexp.Regexp
	minRunes, maxRunes int // -1: no bound
}

func (n *nativeLeaf) accepts(s string) bool {
	if n.minRunes >= 0 || n.maxRunes >= 0 {
		r := utf8.RuneCountInString(s)
		if (n.minRunes >= 0 && r < n.minRunes) || (n.maxRunes >= 0 && r > n.maxRunes) {
			return false
		}
	}
	for _, re := range n.match {
		if !re.MatchString(s) {
			return false
		}
	}
	for _, re := range n.noMatch {
		if re.MatchString(s) {
			return false
		}
	}
	return true
}

// nativeCheck reads v's constraint as CUE prints it and returns it when it is
// a conjunction of string, =~ and !~ with a literal, and strings.MinRunes
// or strings.MaxRunes of an integer; nil for any other.
func nativeCheck(v cue.Value) *nativeLeaf {
	e, err := parser.ParseExpr("leaf", fmt.Sprint(v))
	if err != nil {
		return nil
	}
	n := &nativeLeaf{minRunes: -1, maxRunes: -1}
	var read func(e ast.Expr) bool
	read = func(e ast.Expr) bool {
		switch x := e.(type) {
		case *ast.BinaryExpr:
			return x.Op == token.AND && read(x.X) && read(x.Y)
		case *ast.Ident:
			return x.Name == "string"
		case *ast.UnaryExpr:
			lit, ok := x.X.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || (x.Op != token.MAT && x.Op != token.NMAT) {
				return false
			}
			pat, err := literal.Unquote(lit.Value)
			if err != nil {
				return false
			}
			re, err := regexp.Compile(pat)
			if err != nil {
				return false
			}
			if x.Op == token.MAT {
				n.match = append(n.match, re)
			} else {
				n.noMatch = append(n.noMatch, re)
			}
			return true
		case *ast.CallExpr:
			sel, ok := x.Fun.(*ast.SelectorExpr)
			if !ok || len(x.Args) != 1 {
				return false
			}
			pkg, ok := sel.X.(*ast.Ident)
			lit, isLit := x.Args[0].(*ast.BasicLit)
			if !ok || pkg.Name != "strings" || !isLit || lit.Kind != token.INT {
				return false
			}
			k, err := strconv.Atoi(lit.Value)
			if err != nil || k < 0 {
				return false
			}
			switch name, _, _ := ast.LabelName(sel.Sel); name {
			case "MinRunes":
				n.minRunes = max(n.minRunes, k)
			case "MaxRunes":
				if n.maxRunes < 0 || k < n.maxRunes {
					n.maxRunes = k
				}
			default:
				return false
			}
			return true
		}
		return false
	}
	if !read(e) || len(n.match)+len(n.noMatch) == 0 && n.minRunes < 0 && n.maxRunes < 0 {
		return nil
	}
	return n
}
