package schemas

import (
	"cmp"
	"slices"
)

// sortErrors orders errors by path, line, column, field and message, and
// drops exact repeats.
func sortErrors(es Errors) Errors {
	slices.SortFunc(es, func(a, b Error) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Col, b.Col), cmp.Compare(a.Field, b.Field), cmp.Compare(a.Message, b.Message))
	})
	return slices.Compact(es)
}
