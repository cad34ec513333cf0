package schemas

import (
	"sync"
)

// rotateAfter is how many values (documents, policy files and the objects
// unified with them, the precheck's scalars) one cue.Context builds before
// it is dropped: a context keeps every value built in it, so a long-lived
// one grows without bound (measured: memory grows with every document).
// Compiling the schema takes ~1 ms, so a short life costs little and keeps
// memory flat. A document the precheck and the policies' remembered
// verdicts answer for builds nothing and does not count: a cold validation
// of 10,000 clusters compiled the schema 40 times when every document
// counted.
const rotateAfter = 250

// validators hands each goroutine a compiled schema of its own; a cue.Context
// is not safe for concurrent use, and sync.Pool keeps one per P.
var validators = sync.Pool{New: func() any {
	c, err := compileSchema()
	if err != nil {
		// The schema is embedded and covered by tests: failing to compile it
		// is a build defect, not a user error.
		panic(err)
	}
	return c
}}

func getValidator() *compiled { return validators.Get().(*compiled) }

func putValidator(c *compiled) {
	if c.used >= rotateAfter {
		return // let the context and everything built in it be collected
	}
	validators.Put(c)
}

// allowedShapes is the allowed-field tree, built once from the schema.
var allowedShapes = sync.OnceValue(func() *shapes {
	c, err := compileSchema()
	if err != nil {
		panic(err) // see validators.New
	}
	return buildShapes(c.root)
})

// knownProviders lists the providers that ship a machine-spec schema.
func knownProviders() []string { return keys(allowedShapes().providers) }
