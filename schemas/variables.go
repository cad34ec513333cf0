package schemas

import (
	"fmt"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// variables compiles each class variable's CUE constraint once per
// context; the context rotates every rotateAfter checks so a large fleet
// does not keep every checked value alive.
type variables struct {
	v        *compiled
	ctx      *cue.Context
	compiled map[string]*compiledVar // class/index
	// specs caches the verdict on patched machine templates, by their
	// JSON (templates.go).
	specs map[string][]specViolation
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
}

func (vs *variables) close() { putValidator(vs.v) }

type compiledVar struct {
	ctx        *cue.Context
	constraint cue.Value
}

func (vs *variables) compile(cl *v1alpha1.ClusterClass, i int) (*compiledVar, error) {
	if vs.v.used++; vs.v.used >= rotateAfter {
		vs.rotate()
	}
	key := fmt.Sprintf("%s/%d", cl.Metadata.Name, i)
	if cv, ok := vs.compiled[key]; ok {
		if cv == nil {
			return nil, errBadConstraint
		}
		return cv, nil
	}
	src := strings.TrimSpace(cl.Spec.Variables[i].Constraint)
	if src == "" {
		src = "_"
	}
	var v cue.Value
	err := safely(func() error {
		v = vs.ctx.CompileString(src, cue.Filename(cl.Source.Path))
		if err := v.Err(); err != nil {
			return fmt.Errorf("%s", cueMessage(err))
		}
		return nil
	})
	if err != nil {
		vs.compiled[key] = nil
		return nil, err
	}
	cv := &compiledVar{ctx: vs.ctx, constraint: v}
	vs.compiled[key] = cv
	return cv, nil
}

var errBadConstraint = fmt.Errorf("constraint does not compile")

// check returns "" when value satisfies the constraint, else why not.
func (cv *compiledVar) check(value any) (msg string) {
	err := safely(func() error {
		u := cv.constraint.Unify(cv.ctx.Encode(value))
		if err := u.Validate(cue.Concrete(true)); err != nil {
			msg = cueMessage(err)
		}
		return nil
	})
	if err != nil {
		return err.Error()
	}
	return msg
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
