package schemas

import (
	"cmp"
	"fmt"
	"slices"
)

// sortErrors orders errors by path, line, column, field and message, and
// drops exact repeats.
func sortErrors(es Errors) Errors {
	slices.SortFunc(es, compareErrors)
	return slices.Compact(es)
}

func compareErrors(a, b Error) int {
	return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Line, b.Line),
		cmp.Compare(a.Col, b.Col), cmp.Compare(a.Field, b.Field), cmp.Compare(a.Message, b.Message), cmp.Compare(a.Source, b.Source))
}

// AwaitUnread keeps the errors of a fleet in which some files could not be
// read at all (unread: their paths, e.g. YAML that does not parse), less
// the dangling references: those files may define what they name, and one
// broken class file would otherwise blame every cluster of the class. The
// first error of each unread file says how many references wait for it;
// they are checked again once the files parse.
func AwaitUnread(errs Errors, unread []string) Errors {
	if len(unread) == 0 {
		return errs
	}
	var kept Errors
	var first *Error
	waiting := 0
	for i, e := range errs {
		if !e.Dangling {
			kept = append(kept, e)
			continue
		}
		if first == nil || compareErrors(e, *first) < 0 {
			first = &errs[i] // the first in the order errors are printed
		}
		waiting++
	}
	if waiting == 0 {
		return errs
	}
	kept = sortErrors(kept)
	what := "1 reference to an object not found waits"
	if waiting > 1 {
		what = fmt.Sprintf("%d references to objects not found wait", waiting)
	}
	seen := map[string]bool{}
	for _, p := range unread {
		if seen[p] {
			continue
		}
		seen[p] = true
		for i := range kept {
			if kept[i].Path == p {
				kept[i].Message += fmt.Sprintf(" (%s for this file, which may define them: the first, %s)", what, first.Error())
				break
			}
		}
	}
	return kept
}
