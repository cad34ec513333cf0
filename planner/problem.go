package planner

import (
	"fmt"
	"strconv"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// Problem is a rule of the planner a fleet breaks: where (file, line), which
// field, and what is wrong with the fix. It formats like schemas.Error.
type Problem struct {
	Source  v1alpha1.Source `json:"source"`
	Field   string          `json:"field,omitempty"`
	Message string          `json:"message"`
	// Line and Col are where Field is written, once a caller that knows
	// the files placed the problem (Place); 0: not placed, and the problem
	// names its document's first line (Source).
	Line int `json:"line,omitempty"`
	Col  int `json:"col,omitempty"`
}

// Error formats as path:line:col: field: message, or path:line: field:
// message with the document's first line when the problem is not placed.
func (p Problem) Error() string {
	at := p.Source.String()
	if p.Line > 0 {
		at = p.Source.Path + ":" + strconv.Itoa(p.Line)
		if p.Col > 0 {
			at += ":" + strconv.Itoa(p.Col)
		}
	}
	if p.Field == "" {
		return fmt.Sprintf("%s: %s", at, p.Message)
	}
	return fmt.Sprintf("%s: %s: %s", at, p.Field, p.Message)
}

// Locator says where field of the object whose document starts at src is
// written: its line and column in src.Path, and false when it cannot tell.
// The planner reads no files: its caller gives one (sources.Places.At), so
// that problems found after validation point at their field as validation
// errors do.
type Locator func(src v1alpha1.Source, field string) (line, col int, ok bool)

// Place returns p at its field's line and column as loc says; p as it is
// when loc is nil or cannot tell.
func (p Problem) Place(loc Locator) Problem {
	if loc == nil {
		return p
	}
	if line, col, ok := loc(p.Source, p.Field); ok && line > 0 {
		p.Line, p.Col = line, col
	}
	return p
}

func problemf(src v1alpha1.Source, field, format string, args ...any) Problem {
	return Problem{Source: src, Field: field, Message: fmt.Sprintf(format, args...)}
}
