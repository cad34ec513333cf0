package schemas

import (
	"crypto/sha256"
	"slices"
	"strings"
	"sync"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"

	"github.com/gitfleet/gitfleet/internal/valuekey"
)

// A policy's verdict on a document depends only on the places of the
// document the policy names: the fields it declares (a regular field
// constrains the document's value there) and the fields its expressions
// refer to (a comprehension's condition, a bound taken from another field).
// An open struct says nothing of the fields it does not name, so two
// documents that agree at those places get the same verdict from CUE. The
// footprint is those places, read from the policy's syntax; a document's
// projection on it (its values there, and whether each is written) keys the
// verdicts remembered, and a fleet's documents, which mostly agree where a
// policy looks, are unified with the policy once per projection, not once
// each (most of a cold validation's CUE time at 10,000 clusters went to
// encoding documents and unifying them with policies).
//
// Only acceptance is remembered: a document the policy rejects is unified
// whole, so its messages are CUE's as before. A kind whose policy uses
// something the reading does not follow (a definition or hidden field inside
// the kind's struct, an alias, a pattern or ellipsis in a struct the document
// fills, an embedded value, a kind's policy that is not a struct) has no
// footprint, and each document of it is unified whole. The
// file's own fields (#definitions, lets, another kind's policy) are the
// policy's values, which no document reaches.
// TestPolicyProjectionKeepsTheVerdict and FuzzPolicyProjection hold a
// document's projection to the document's verdict.
type footprint struct {
	whole bool                  // the document's value here counts whole
	kids  map[string]*footprint // the fields named inside; nil: none
	names []string              // kids' names, sorted
}

// policyFootprints reads a policy file and returns the footprint of each kind
// it constrains whose policy the reading follows.
func policyFootprints(path string, data []byte) map[string]*footprint {
	f, err := parser.ParseFile(path, data)
	if err != nil {
		return nil
	}
	r := &footReader{scopes: map[ast.Node][]string{}, internal: map[ast.Node]bool{}, locals: map[ast.Node]bool{}}
	roots := map[string]*footprint{}
	refused := map[string]bool{}
	for _, d := range f.Decls {
		switch x := d.(type) {
		case *ast.Package, *ast.ImportDecl, *ast.CommentGroup, *ast.Attribute, *ast.LetClause:
		case *ast.Field:
			name, ok := plainLabel(x.Label)
			if !ok {
				if _, isIdent := x.Label.(*ast.Ident); isIdent {
					continue // a definition or hidden field: a helper
				}
				return nil // a label computed or aliased: which kinds it names is CUE's to say
			}
			if _, ok := kindDefs[name]; !ok {
				continue // not a kind: policyKinds reports it
			}
			if refused[name] {
				continue
			}
			lit, isStruct := x.Value.(*ast.StructLit)
			if x.Alias != nil || x.Constraint != 0 || !isStruct {
				refused[name] = true
				continue
			}
			if roots[name] == nil {
				roots[name] = &footprint{}
			}
			r.ok, r.root = true, roots[name]
			r.structural(lit, nil)
			if !r.ok {
				refused[name] = true
			}
		default:
			return nil // a top-level embedding or comprehension may add to any kind
		}
	}
	out := map[string]*footprint{}
	for kind, fp := range roots {
		if !refused[kind] {
			fp.sortNames()
			out[kind] = fp
		}
	}
	return out
}

type footReader struct {
	scopes   map[ast.Node][]string // a struct the document fills, by its path
	internal map[ast.Node]bool     // a struct inside an expression
	locals   map[ast.Node]bool     // what for and let clauses declare
	root     *footprint
	ok       bool
}

// plainLabel is a field's name when it is a regular field's, written as an
// identifier or a string.
func plainLabel(l ast.Label) (string, bool) {
	switch x := l.(type) {
	case *ast.Ident:
		if strings.HasPrefix(x.Name, "#") || strings.HasPrefix(x.Name, "_") {
			return "", false
		}
		return x.Name, true
	case *ast.BasicLit:
		s, err := literal.Unquote(x.Value)
		return s, err == nil && strings.HasPrefix(x.Value, `"`)
	}
	return "", false
}

func (r *footReader) at(path []string) *footprint {
	n := r.root
	for _, p := range path {
		if n.kids == nil {
			n.kids = map[string]*footprint{}
		}
		k := n.kids[p]
		if k == nil {
			k = &footprint{}
			n.kids[p] = k
		}
		n = k
	}
	return n
}

func (fp *footprint) sortNames() {
	fp.names = fp.names[:0]
	for name, k := range fp.kids {
		fp.names = append(fp.names, name)
		k.sortNames()
	}
	slices.Sort(fp.names)
}

// structural reads a struct whose fields are the document's at path.
func (r *footReader) structural(lit *ast.StructLit, path []string) {
	r.scopes[lit] = path
	r.at(path)
	for _, e := range lit.Elts {
		if !r.ok {
			return
		}
		switch x := e.(type) {
		case *ast.Field:
			name, ok := plainLabel(x.Label)
			if !ok || x.Alias != nil {
				r.ok = false
				return
			}
			p := append(path[:len(path):len(path)], name)
			if v, isStruct := x.Value.(*ast.StructLit); isStruct {
				r.structural(v, p)
				continue
			}
			r.at(p).whole = true
			r.expr(x.Value)
		case *ast.Comprehension:
			body, isStruct := x.Value.(*ast.StructLit)
			if x.Fallback != nil || !isStruct {
				r.ok = false
				return
			}
			r.clauses(x.Clauses)
			r.structural(body, path) // its fields join the struct's
		case *ast.LetClause:
			r.expr(x.Expr)
			r.locals[x] = true
		case *ast.Attribute, *ast.CommentGroup:
		default:
			// An embedding, an ellipsis or a pattern: the struct's
			// other fields would count.
			r.ok = false
			return
		}
	}
}

func (r *footReader) clauses(cs []ast.Clause) {
	for _, c := range cs {
		switch x := c.(type) {
		case *ast.IfClause:
			r.expr(x.Condition)
		case *ast.ForClause:
			r.expr(x.Source)
			if x.Key != nil {
				r.locals[x.Key] = true
			}
			r.locals[x.Value] = true
		case *ast.LetClause:
			r.expr(x.Expr)
			r.locals[x.Ident] = true
		default:
			r.ok = false
		}
	}
}

// builtinNames are the predeclared identifiers an expression may use. A
// builtin sees only its arguments, whose references count whole; a name not
// listed (self, which is the struct it is written in, or one a later CUE
// adds) leaves the kind without a footprint.
var builtinNames = map[string]bool{
	"close": true, "matchN": true, "matchIf": true,
	"_": true, "int": true, "string": true, "bool": true, "number": true, "float": true, "bytes": true,
	"len": true, "and": true, "or": true, "div": true, "mod": true, "quo": true, "rem": true,
	"uint": true, "int8": true, "int16": true, "int32": true, "int64": true, "int128": true,
	"uint8": true, "uint16": true, "uint32": true, "uint64": true, "uint128": true,
	"float32": true, "float64": true, "rune": true,
}

// expr reads an expression: the document's values it refers to count whole.
func (r *footReader) expr(e ast.Expr) {
	if !r.ok {
		return
	}
	switch x := e.(type) {
	case nil, *ast.BasicLit, *ast.BottomLit:
	case *ast.Ident:
		r.ref(x, nil)
	case *ast.SelectorExpr:
		var sels []string
		var base ast.Expr = x
		for {
			s, isSel := base.(*ast.SelectorExpr)
			if !isSel {
				break
			}
			name, ok := plainLabel(s.Sel)
			if !ok {
				r.ok = false // a definition or hidden field of a value
				return
			}
			sels = append(sels, name)
			base = s.X
		}
		slices.Reverse(sels)
		if id, isIdent := base.(*ast.Ident); isIdent {
			r.ref(id, sels)
		} else {
			r.expr(base)
		}
	case *ast.IndexExpr:
		r.expr(x.X)
		r.expr(x.Index)
	case *ast.SliceExpr:
		r.expr(x.X)
		r.expr(x.Low)
		r.expr(x.High)
	case *ast.CallExpr:
		r.expr(x.Fun)
		for _, a := range x.Args {
			r.expr(a)
		}
	case *ast.UnaryExpr:
		r.expr(x.X)
	case *ast.BinaryExpr:
		r.expr(x.X)
		r.expr(x.Y)
	case *ast.ParenExpr:
		r.expr(x.X)
	case *ast.Interpolation:
		for _, el := range x.Elts {
			r.expr(el)
		}
	case *ast.ListLit:
		for _, el := range x.Elts {
			r.expr(el)
		}
	case *ast.Ellipsis:
		r.expr(x.Type)
	case *ast.Comprehension:
		if x.Fallback != nil {
			r.ok = false
			return
		}
		r.clauses(x.Clauses)
		r.expr(x.Value)
	case *ast.StructLit:
		// A struct inside an expression constrains a value the
		// footprint keeps whole; only its references count.
		r.internal[x] = true
		for _, el := range x.Elts {
			switch f := el.(type) {
			case *ast.Field:
				if f.Alias != nil {
					r.ok = false
					return
				}
				switch l := f.Label.(type) {
				case *ast.Ident, *ast.BasicLit:
				case *ast.ListLit: // a pattern
					if len(l.Elts) != 1 {
						r.ok = false
						return
					}
					if _, aliased := l.Elts[0].(*ast.Alias); aliased {
						r.ok = false
						return
					}
					r.expr(l.Elts[0])
				default:
					r.ok = false
					return
				}
				r.expr(f.Value)
			case *ast.Comprehension:
				r.expr(f)
			case *ast.EmbedDecl:
				r.expr(f.Expr)
			case *ast.Ellipsis:
				r.expr(f.Type)
			case *ast.LetClause:
				r.expr(f.Expr)
				r.locals[f] = true
			case *ast.Attribute, *ast.CommentGroup:
			default:
				r.ok = false
				return
			}
		}
	default:
		r.ok = false
	}
}

// ref reads a reference with the field names selected from it. A field of
// the file itself (a definition, a hidden field, another kind's policy) is
// the policy's own value, which the document does not reach: unifying a
// kind's policy with a document re-evaluates the kind's struct alone.
func (r *footReader) ref(id *ast.Ident, sels []string) {
	if id.Node == nil || id.IsPredeclared() {
		if !builtinNames[id.Name] {
			r.ok = false
		}
		return
	}
	if _, isImport := id.Node.(*ast.ImportSpec); isImport {
		return // a package's function or value
	}
	if _, isFile := id.Scope.(*ast.File); isFile || r.locals[id.Node] || r.internal[id.Scope] {
		// The file's own field; a for or let clause's name, whose
		// value counts where it is written; a field of a struct inside
		// an expression, which constrains a value kept whole.
		return
	}
	path, ok := r.scopes[id.Scope]
	if !ok || strings.HasPrefix(id.Name, "#") || strings.HasPrefix(id.Name, "_") {
		r.ok = false // an alias, or a helper inside the kind's struct
		return
	}
	p := append(append(path[:len(path):len(path)], id.Name), sels...)
	r.at(p).whole = true
}

// maxProjectionKey bounds a remembered projection's size: a policy that
// keeps large values whole is unified with each document, as before.
const maxProjectionKey = 4 << 10

// key appends the projection of x, encoded so that two projections have the
// same bytes exactly when they are equal values, and reports false for a
// value the encoding does not know or a key over maxProjectionKey.
func (fp *footprint) key(b []byte, x any) ([]byte, bool) {
	if fp.whole {
		return canonical(b, x)
	}
	m, ok := x.(map[string]any)
	if !ok {
		return canonical(append(b, 'x'), x) // not a struct where the policy has one
	}
	b = append(b, 'p')
	for _, name := range fp.names {
		v, ok := m[name]
		if !ok {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		if b, ok = fp.kids[name].key(b, v); !ok {
			return b, false
		}
	}
	return b, len(b) <= maxProjectionKey
}

// canonical is the key of a whole value (internal/valuekey), up to
// maxProjectionKey.
func canonical(b []byte, x any) ([]byte, bool) {
	return valuekey.Append(b, x, maxProjectionKey)
}

// policyAccepts remembers the projections a policy accepted, by the policy's
// content, its kind and the projection's key; it is cleared when it holds
// maxPolicyAccepts keys or maxPolicyAcceptBytes of them, so memory stays
// bounded whatever the fleet.
var policyAccepts struct {
	sync.RWMutex
	m     map[string]struct{}
	bytes int
}

const (
	maxPolicyAccepts     = 1 << 14
	maxPolicyAcceptBytes = 4 << 20
)

// acceptKey is the key under which policy (by its digest) accepting a kind's
// projection is remembered.
func acceptKey(b []byte, digest *[sha256.Size]byte, kind string) []byte {
	b = append(b, digest[:]...)
	return append(append(b, kind...), 0)
}

func accepted(key []byte) bool {
	policyAccepts.RLock()
	_, ok := policyAccepts.m[string(key)]
	policyAccepts.RUnlock()
	return ok
}

func rememberAccepted(key []byte) {
	policyAccepts.Lock()
	if policyAccepts.m == nil || len(policyAccepts.m) >= maxPolicyAccepts || policyAccepts.bytes+len(key) > maxPolicyAcceptBytes {
		policyAccepts.m = make(map[string]struct{}, 64)
		policyAccepts.bytes = 0
	}
	if _, ok := policyAccepts.m[string(key)]; !ok {
		policyAccepts.m[string(key)] = struct{}{}
		policyAccepts.bytes += len(key)
	}
	policyAccepts.Unlock()
}
