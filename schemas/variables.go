package schemas

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/encoding/jsonschema"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// variables compiles each class variable's CUE constraint once per
// context; the context rotates every rotateAfter checks so a large fleet
// does not keep every checked value alive.
type variables struct {
	v        *compiled
	ctx      *cue.Context
	compiled map[string]*compiledVar // class/index
	failed   map[string]error        // why a class/index did not compile
	// specs caches the verdict on patched machine templates, by their
	// JSON (templates.go).
	specs map[string][]specViolation
	// verdicts remembers check's answer by constraint and value (valueKey):
	// a fleet's clusters mostly set the same few values, and unifying one
	// with CUE costs tens of microseconds. It survives rotation.
	verdicts map[string]string
}

func newVariables() *variables {
	vs := &variables{}
	vs.rotate()
	return vs
}

func (vs *variables) rotate() {
	if vs.v != nil {
		putValidator(vs.v)
	}
	vs.v = getValidator()
	vs.ctx = vs.v.ctx
	vs.compiled = map[string]*compiledVar{}
	vs.failed = map[string]error{}
}

func (vs *variables) close() { putValidator(vs.v) }

type compiledVar struct {
	owner      *compiled // counts the values check builds in ctx
	ctx        *cue.Context
	constraint cue.Value
	src        string
	verdicts   map[string]string
}

// maxVerdicts bounds variables.verdicts; past it the map starts over.
const maxVerdicts = 1 << 14

func (vs *variables) compile(cl *v1alpha1.ClusterClass, i int) (*compiledVar, error) {
	// Only CUE work counts towards rotation: a constraint compiled before
	// and a verdict remembered build nothing in the context, and most of a
	// fleet's clusters find both.
	if vs.v.used >= rotateAfter {
		vs.rotate()
	}
	key := fmt.Sprintf("%s/%d", cl.Metadata.Name, i)
	if cv, ok := vs.compiled[key]; ok {
		if cv == nil {
			return nil, vs.failed[key]
		}
		return cv, nil
	}
	vs.v.used++
	decl := cl.Spec.Variables[i]
	src := strings.TrimSpace(decl.Constraint)
	if src == "" {
		src = "_"
	}
	var v cue.Value
	err := safely(func() error {
		v = vs.ctx.CompileString(src, cue.Filename(cl.Source.Path))
		if err := v.Err(); err != nil {
			return fmt.Errorf("%s", cueMessage(err))
		}
		if decl.Schema == nil {
			return nil
		}
		f, err := jsonschema.Extract(vs.ctx.Encode(decl.Schema.OpenAPIV3Schema),
			&jsonschema.Config{DefaultVersion: jsonschema.VersionKubernetesAPI})
		if err != nil {
			return &schemaError{fmt.Errorf("%s", cueMessage(err))}
		}
		sv := vs.ctx.BuildFile(f)
		if err := sv.Err(); err != nil {
			return &schemaError{fmt.Errorf("%s", cueMessage(err))}
		}
		v = v.Unify(sv)
		return nil
	})
	if err != nil {
		vs.compiled[key] = nil
		vs.failed[key] = err
		return nil, err
	}
	if vs.verdicts == nil || len(vs.verdicts) >= maxVerdicts {
		vs.verdicts = map[string]string{}
	}
	if decl.Schema != nil {
		js, _ := json.Marshal(decl.Schema.OpenAPIV3Schema)
		src += "\x00" + string(js)
	}
	cv := &compiledVar{owner: vs.v, ctx: vs.ctx, constraint: v, src: src, verdicts: vs.verdicts}
	vs.compiled[key] = cv
	return cv, nil
}

// schemaError is a variable's schema.openAPIV3Schema that CUE cannot read
// (its constraint compiled).
type schemaError struct{ err error }

func (e *schemaError) Error() string { return e.err.Error() }

// check returns "" when value satisfies the constraint, else why not.
func (cv *compiledVar) check(value any) (msg string) {
	var b strings.Builder
	b.WriteString(cv.src)
	b.WriteByte(0)
	key := ""
	if valueKey(&b, value) {
		key = b.String()
		if m, ok := cv.verdicts[key]; ok {
			return m
		}
		defer func() { cv.verdicts[key] = msg }()
	}
	cv.owner.used++
	err := safely(func() error {
		u := cv.constraint.Unify(cv.ctx.Encode(value))
		if err := u.Validate(cue.Concrete(true)); err != nil {
			msg = cueMessage(err)
			if es := cueerrors.Errors(err); len(es) > 0 && len(es[0].Path()) > 0 {
				msg = strings.Join(es[0].Path(), ".") + ": " + msg // inside an object variable
			}
		}
		return nil
	})
	if err != nil {
		return err.Error()
	}
	return msg
}

// valueKey writes v with its types, so that values CUE tells apart (the
// integer 1 and the float 1.0) get different keys, and reports false for a
// value of a type it does not know.
func valueKey(b *strings.Builder, v any) bool {
	switch v := v.(type) {
	case nil:
		b.WriteString("n")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int:
		b.WriteString("i" + strconv.Itoa(v))
	case int64:
		b.WriteString("i" + strconv.FormatInt(v, 10))
	case uint64:
		b.WriteString("i" + strconv.FormatUint(v, 10))
	case float64:
		b.WriteString("f" + strconv.FormatFloat(v, 'g', -1, 64))
	case string:
		b.WriteString(strconv.Quote(v))
	case []any:
		b.WriteByte('[')
		for _, e := range v {
			if !valueKey(b, e) {
				return false
			}
			b.WriteByte(',')
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('{')
		for _, k := range slices.Sorted(maps.Keys(v)) {
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			if !valueKey(b, v[k]) {
				return false
			}
			b.WriteByte(',')
		}
		b.WriteByte('}')
	default:
		return false
	}
	return true
}

// cueMessage is the first of CUE's messages, without its path.
func cueMessage(err error) string {
	es := cueerrors.Errors(err)
	if len(es) == 0 {
		return err.Error()
	}
	format, args := es[0].Msg()
	return fmt.Sprintf(format, args...)
}
