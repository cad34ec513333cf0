package schemas

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"sync/atomic"
	"unicode"
	"unsafe"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
)

// A policy file is CUE whose top-level fields are kinds: the value of
// `Cluster: {...}` is unified with every valid Cluster (as written, before
// defaults), `ClusterClass: {...}` with every class, and so on. Definitions
// (#Name) and hidden fields (_name) may hold helpers. A conflict is an error
// at the object's field, naming the policy's file and line; a policy field's
// @help attribute replaces CUE's message.
func applyPolicies(objs []Object, policies []File) []Error {
	good, errs := compilePolicies(policies)
	if len(good) == 0 {
		return errs
	}
	// Check the objects in chunks, in parallel, each chunk in a pooled
	// context with the policies compiled into it. Objects of kinds no
	// policy names are not even encoded.
	chunks := chunk(objs, rotateAfter)
	results := make([][]Error, len(chunks))
	parallel(len(chunks), func(i int) {
		c := getValidator()
		defer putValidator(c)
		for j := range chunks[i] {
			o := &chunks[i][j]
			if o.Invalid || o.Raw == nil || !c.policiesApply(good, o.Kind) {
				continue
			}
			results[i] = append(results[i], c.policyErrors(good, o, cue.Value{})...)
		}
	})
	for _, r := range results {
		errs = append(errs, r...)
	}
	return errs
}

// compilePolicies reports the policy files' own errors and returns the
// files that compile.
func compilePolicies(policies []File) (good []File, errs []Error) {
	if len(policies) == 0 {
		return nil, nil
	}
	c := getValidator()
	defer putValidator(c)
	for _, f := range policies {
		var es []Error
		c.used++
		err := safely(func() error {
			pv := c.ctx.CompileBytes(f.Data, cue.Filename(f.Path))
			if err := pv.Err(); err != nil {
				es = policyFileErrors(f.Path, pv, err)
				return nil
			}
			_, es = policyKinds(f.Path, pv)
			good = append(good, f)
			return nil
		})
		if err != nil {
			es = append(es, Error{Path: f.Path, Message: "not a valid policy: " + err.Error()})
		}
		errs = append(errs, es...)
	}
	return good, errs
}

// safely runs f and turns a panic inside CUE into an error, so one odd
// policy or constraint cannot crash the daemon.
func safely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("CUE failed on it: %v", r)
		}
	}()
	return f()
}

// policyErrors checks one valid object against every policy. data is the
// object encoded in c's context, or the zero value: it is encoded when a
// policy must see it whole.
func (c *compiled) policyErrors(policies []File, o *Object, data cue.Value) []Error {
	var errs []Error
	var key []byte
	for _, f := range policies {
		e := c.policy(f)
		p, ok := e.kinds[o.Kind]
		if !ok {
			continue
		}
		// A projection the policy accepted before answers for the
		// object without CUE.
		remember := false
		if fp := e.feet[o.Kind]; fp != nil {
			key, remember = fp.key(acceptKey(key[:0], &e.digest, o.Kind), o.Raw)
			if remember && accepted(key) {
				continue
			}
		}
		policyUnifications.Add(1)
		c.used++
		err := safely(func() error {
			if !data.Exists() {
				data = c.ctx.Encode(o.Raw)
			}
			u := p.Unify(data)
			if err := u.Validate(cue.Concrete(true)); err != nil {
				errs = append(errs, policyViolations(f, o, u, err)...)
				remember = false
			}
			return nil
		})
		if err != nil {
			c.used = rotateAfter // do not reuse a context CUE panicked in
			errs = append(errs, objectError(o, "", fmt.Sprintf("policy %s could not be evaluated: %v", f.Path, err)))
			continue
		}
		if remember {
			rememberAccepted(key)
		}
	}
	return errs
}

// policyUnifications counts the objects unified with a policy, for tests.
var policyUnifications atomic.Int64

// policiesApply reports whether a policy of policies constrains kind.
func (c *compiled) policiesApply(policies []File, kind string) bool {
	for _, f := range policies {
		if _, ok := c.policy(f).kinds[kind]; ok {
			return true
		}
	}
	return false
}

// policyKey identifies a policy file without hashing it: the files of one
// Load or Check keep their Data. The entry keeps a copy of the content it
// was compiled from, so a file whose memory is reused holds no stale entry.
type policyKey struct {
	path string
	data *byte
	n    int
}

// policyEntry is a policy file compiled into a context.
type policyEntry struct {
	data   string
	digest [sha256.Size]byte
	kinds  map[string]cue.Value  // the policy's value for each kind
	feet   map[string]*footprint // the places of a document each kind's policy sees, where known
}

// policy compiles a policy file into c's context once.
func (c *compiled) policy(f File) *policyEntry {
	key := policyKey{f.Path, unsafe.SliceData(f.Data), len(f.Data)}
	if e, ok := c.policies[key]; ok && e.data == string(f.Data) {
		return e
	}
	if c.policies == nil {
		c.policies = map[policyKey]*policyEntry{}
	}
	e := &policyEntry{data: string(f.Data), digest: sha256.Sum256(f.Data)}
	c.used++ // the policy is built in the context, as a document is
	e.kinds, _ = policyKinds(f.Path, c.ctx.CompileBytes(f.Data, cue.Filename(f.Path)))
	e.feet = policyFootprints(f.Path, f.Data)
	c.policies[key] = e
	return e
}

func chunk[T any](s []T, n int) [][]T {
	var out [][]T
	for len(s) > n {
		out = append(out, s[:n:n])
		s = s[n:]
	}
	if len(s) > 0 {
		out = append(out, s)
	}
	return out
}

// policyKinds returns the policy's value for each kind it constrains.
func policyKinds(path string, pv cue.Value) (map[string]cue.Value, []Error) {
	kinds := map[string]cue.Value{}
	var errs []Error
	it, err := pv.Fields()
	if err != nil {
		return nil, policyFileErrors(path, pv, err)
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		if _, ok := kindDefs[name]; ok {
			kinds[name] = it.Value()
			continue
		}
		pos := it.Value().Pos()
		msg := fmt.Sprintf("%q is not a kind: a policy's top-level fields are kinds (%s); put helpers in #definitions", name, strings.Join(kindNames, ", "))
		if s := suggest(name, kindNames); s != "" {
			msg = fmt.Sprintf("%q is not a kind; did you mean %q?", name, s)
		}
		errs = append(errs, Error{Path: path, Line: pos.Line(), Col: pos.Column(), Message: msg})
	}
	return kinds, errs
}

// policyFileErrors are the errors err of the policy file at path, compiled
// into pv. CUE gives some (a structural cycle) a field but no position:
// those are placed at the field in pv.
func policyFileErrors(path string, pv cue.Value, err error) []Error {
	var out []Error
	for _, e := range cueerrors.Errors(err) {
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		pos := e.Position()
		var field string
		if !pos.IsValid() {
			var at cue.Value
			field, at = policyField(pv, e.Path())
			pos = at.Pos()
		}
		if msg == "structural cycle" {
			msg += ": the value refers back to a field that holds it, so it would contain itself without end; refer to a field outside it, or remove the reference"
		}
		out = append(out, Error{Path: path, Line: pos.Line(), Col: pos.Column(), Field: field, Message: "not a valid policy: " + msg})
	}
	return out
}

// policyField is the field of a policy at the labels of a CUE error's
// path, as written (Cluster.spec.l[0]), and its value; the value does not
// exist when the labels cannot be followed.
func policyField(pv cue.Value, labels []string) (string, cue.Value) {
	sels := make([]cue.Selector, 0, len(labels))
	v := pv
	for _, l := range labels {
		sel, ok := policySelector(v, l)
		if !ok {
			return strings.Join(labels, "."), cue.Value{}
		}
		sels = append(sels, sel)
		v = v.LookupPath(cue.MakePath(sel))
	}
	if len(sels) == 0 {
		return "", cue.Value{}
	}
	return cue.MakePath(sels...).String(), v
}

// policySelector is the selector of v's field labelled l in a CUE error's
// path. A hidden field's is found among v's fields: it is scoped by the
// file's package, which its label does not say.
func policySelector(v cue.Value, l string) (cue.Selector, bool) {
	if !strings.HasPrefix(l, "_") {
		p := cue.ParsePath(l)
		if p.Err() != nil || len(p.Selectors()) != 1 {
			return cue.Selector{}, false
		}
		return p.Selectors()[0], true
	}
	it, err := v.Fields(cue.Hidden(true), cue.Definitions(true))
	if err != nil {
		return cue.Selector{}, false
	}
	for it.Next() {
		if it.Selector().String() == l {
			return it.Selector(), true
		}
	}
	return cue.Selector{}, false
}

// policyViolations reports each conflict at the object's field, naming the
// policy's line.
func policyViolations(f File, o *Object, u cue.Value, err error) []Error {
	policyPath := f.Path
	var out []Error
	for _, g := range groupErrors(err, o.Raw, 1) {
		msg := g.msg
		raw, written := lookupRaw(o.Raw, g.path)
		help, hasHelp := helpFor(u, g.path, nil)
		var at token.Pos
		if written {
			// With several constraints on the field, the one the value
			// breaks names the line and the help (the first @help found
			// may be another's, which the value meets).
			if c, ok := brokenConstraint(policyPath, u, g.path, raw); ok {
				at = c.Pos()
				if a := c.Attribute("help"); a.Err() == nil {
					help, _ = a.String(0)
					hasHelp = true
				} else if s := fmt.Sprint(c); len(s) <= 80 && !strings.Contains(s, "\n") {
					help, hasHelp = "does not satisfy "+s, true
				} else {
					hasHelp = false // CUE's own words, at the constraint's line
				}
			}
		}
		name, undefined := strings.CutPrefix(g.msg, "undefined field: ")
		switch {
		case undefined && len(g.path.Selectors()) == 0:
			// A condition or a reference reads a field this object leaves
			// out: the policy cannot be decided for it.
			ref := name
			if at := policyPos(policyPath, g.first, cue.Value{}); at.IsValid() {
				ref = referenceAt(f.Data, at.Line(), name)
			}
			msg = fmt.Sprintf("it reads %s, which this %s does not set: guard the reference, as in if %s != _|_ if %s == …", ref, o.Kind, ref, ref)
		case !written && hasHelp:
			msg = "is not set; it " + help
		case !written:
			msg = "is not set; the policy requires it"
		case hasHelp:
			msg = describe(raw) + " " + help
		}
		where := policyPath
		if !at.IsValid() {
			at = policyPos(policyPath, g.first, u.LookupPath(g.path))
		}
		if at.IsValid() {
			where = fmt.Sprintf("%s:%d", policyPath, at.Line())
		}
		out = append(out, objectError(o, g.field, fmt.Sprintf("violates policy %s: %s", where, msg)))
	}
	return out
}

// referenceAt is the first dotted reference on a policy's line that ends
// with the field name (spec.topology.version for version); name alone
// when none does.
func referenceAt(data []byte, line int, name string) string {
	lines := strings.Split(string(data), "\n")
	if line < 1 || line > len(lines) {
		return name
	}
	isRef := func(r rune) bool {
		return r == '.' || r == '_' || r == '#' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r)
	}
	for _, r := range strings.FieldsFunc(lines[line-1], func(r rune) bool { return !isRef(r) }) {
		if r == name || strings.HasSuffix(r, "."+name) {
			return r
		}
	}
	return name
}

// brokenConstraint is the constraint of the policy file at p that the
// value written there breaks on its own, when the field has several
// (a unification of conjuncts, some maybe the object's own). A constraint
// that cannot be decided alone (it refers to other fields) is not
// blamed; none: ok is false.
func brokenConstraint(policyPath string, u cue.Value, p cue.Path, raw any) (cue.Value, bool) {
	op, conjuncts := u.LookupPath(p).Expr()
	if op != cue.AndOp {
		return cue.Value{}, false
	}
	val := u.Context().Encode(raw)
	for _, c := range conjuncts {
		if pos := c.Pos(); !pos.IsValid() || pos.Filename() != policyPath {
			continue
		}
		if c.Unify(val).Validate() != nil {
			return c, true
		}
	}
	return cue.Value{}, false
}

// policyPos is the first position of the error, or of the value it is
// about, that is in the policy file.
func policyPos(path string, e cueerrors.Error, at cue.Value) token.Pos {
	for _, p := range append([]token.Pos{e.Position(), at.Pos()}, e.InputPositions()...) {
		if p.IsValid() && p.Filename() == path {
			return p
		}
	}
	return token.NoPos
}

// lookupRaw returns the plain value at p and whether it is written.
func lookupRaw(v any, p cue.Path) (any, bool) {
	for _, s := range p.Selectors() {
		switch x := v.(type) {
		case map[string]any:
			if s.Type() != cue.StringLabel {
				return nil, false
			}
			var ok bool
			if v, ok = x[s.Unquoted()]; !ok {
				return nil, false
			}
		case []any:
			if s.Type() != cue.IndexLabel {
				return nil, false
			}
			i := s.Index()
			if i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}
