package schemas

import (
	"fmt"
	"strings"

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
func applyPolicies(v *compiled, objs []Object, policies []File) []Error {
	var errs []Error
	for _, f := range policies {
		pv := v.ctx.CompileBytes(f.Data, cue.Filename(f.Path))
		if err := pv.Err(); err != nil {
			errs = append(errs, policyFileErrors(f.Path, err)...)
			continue
		}
		kinds, es := policyKinds(f.Path, pv)
		errs = append(errs, es...)
		for i := range objs {
			o := &objs[i]
			p, ok := kinds[o.Kind]
			if !ok || o.Invalid {
				continue
			}
			u := p.Unify(v.ctx.Encode(o.Raw))
			if err := u.Validate(cue.Concrete(true)); err != nil {
				errs = append(errs, policyViolations(f.Path, o, u, err)...)
			}
		}
	}
	return errs
}

// policyKinds returns the policy's value for each kind it constrains.
func policyKinds(path string, pv cue.Value) (map[string]cue.Value, []Error) {
	kinds := map[string]cue.Value{}
	var errs []Error
	it, err := pv.Fields()
	if err != nil {
		return nil, policyFileErrors(path, err)
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

func policyFileErrors(path string, err error) []Error {
	var out []Error
	for _, e := range cueerrors.Errors(err) {
		format, args := e.Msg()
		pos := e.Position()
		out = append(out, Error{Path: path, Line: pos.Line(), Col: pos.Column(), Message: "not a valid policy: " + fmt.Sprintf(format, args...)})
	}
	return out
}

// policyViolations reports each conflict at the object's field, naming the
// policy's line.
func policyViolations(policyPath string, o *Object, u cue.Value, err error) []Error {
	var out []Error
	seen := map[string]bool{}
	for _, e := range cueerrors.Errors(err) {
		sels := e.Path()
		if len(sels) > 0 {
			sels = sels[1:] // the policy's kind field
		}
		field, cpath := fieldPath(o.Raw, sels)
		if seen[field] {
			continue
		}
		seen[field] = true
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		raw, written := lookupRaw(o.Raw, cpath)
		help, hasHelp := helpFor(u, cpath, nil)
		switch {
		case !written && hasHelp:
			msg = "is not set; it " + help
		case !written:
			msg = "is not set; the policy requires it"
		case hasHelp:
			msg = describe(raw) + " " + help
		}
		where := policyPath
		if pos := policyPos(policyPath, e, u.LookupPath(cpath)); pos.IsValid() {
			where = fmt.Sprintf("%s:%d", policyPath, pos.Line())
		}
		out = append(out, objectError(o, field, fmt.Sprintf("violates policy %s: %s", where, msg)))
	}
	return out
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
