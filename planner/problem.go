package planner

import (
	"fmt"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// Problem is a rule of the planner a fleet breaks: where (file, line), which
// field, and what is wrong with the fix. It formats like schemas.Error.
type Problem struct {
	Source  v1alpha1.Source `json:"source"`
	Field   string          `json:"field,omitempty"`
	Message string          `json:"message"`
}

// Error formats as path:line: field: message.
func (p Problem) Error() string {
	if p.Field == "" {
		return fmt.Sprintf("%s: %s", p.Source, p.Message)
	}
	return fmt.Sprintf("%s: %s: %s", p.Source, p.Field, p.Message)
}

func problemf(src v1alpha1.Source, field, format string, args ...any) Problem {
	return Problem{Source: src, Field: field, Message: fmt.Sprintf(format, args...)}
}
