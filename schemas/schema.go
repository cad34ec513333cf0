package schemas

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/parser"
)

// The schemas of every kind and each provider's machine spec. Adding a
// provider is one file in cue/providers/ that adds #providers: <name>: {...}.
//
//go:embed cue/*.cue cue/providers/*.cue
var cueFS embed.FS

// schemaSources holds the embedded schema files, read once. Each context
// parses them again: compiling resolves identifiers in the AST in place, so
// an AST cannot be shared between contexts that compile concurrently.
var schemaSources = sync.OnceValues(func() (map[string][]byte, error) {
	srcs := map[string][]byte{}
	err := fs.WalkDir(cueFS, "cue", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".cue" {
			return err
		}
		srcs["schemas/"+p], err = cueFS.ReadFile(p)
		return err
	})
	return srcs, err
})

// silentProviders names the providers whose machines send no heartbeats:
// those whose schema under #providers carries @heartbeats(none). It is read
// from the schema's syntax, not its compiled value, because the
// cross-object checks ask on every validation and a warm `gitfleet plan`
// compiles nothing else (compiling is ~5 ms of its ~90). TestSilentProviders
// holds it to what the compiled schema's attributes say.
var silentProviders = sync.OnceValue(func() map[string]bool {
	srcs, err := schemaSources()
	if err != nil {
		panic(err) // embedded: see validators.New
	}
	silent := map[string]bool{}
	for _, name := range keys(srcs) {
		f, err := parser.ParseFile(name, srcs[name])
		if err != nil {
			panic(fmt.Errorf("schemas: parse %s: %w", name, err))
		}
		for _, d := range f.Decls {
			if p, ok := d.(*ast.Field); ok && fieldName(p) == "#providers" {
				if body, ok := p.Value.(*ast.StructLit); ok {
					for _, e := range body.Elts {
						if f, ok := e.(*ast.Field); ok && heartbeatsNone(f) {
							silent[fieldName(f)] = true
						}
					}
				}
			}
		}
	}
	return silent
})

func fieldName(f *ast.Field) string {
	name, _, _ := ast.LabelName(f.Label)
	return name
}

func heartbeatsNone(f *ast.Field) bool {
	for _, a := range f.Attrs {
		if key, body := a.Split(); key == "heartbeats" && strings.TrimSpace(body) == "none" {
			return true
		}
	}
	return false
}

// kindDefs maps each kind to its definition in the schema.
var kindDefs = map[string]string{
	"FleetConfig":        "#FleetConfig",
	"ClusterClass":       "#ClusterClass",
	"Cluster":            "#Cluster",
	"MachineDeployment":  "#MachineDeployment",
	"MachineHealthCheck": "#MachineHealthCheck",
}

// compiled is the schema built in one cue.Context.
type compiled struct {
	ctx   *cue.Context
	root  cue.Value
	kinds map[string]cue.Value
	used  int // documents validated in ctx
	// leaves are the precheck's scalar constraints in ctx, looked up on
	// first use
	leaves []cue.Value
	// policies compiled in ctx, by policy file path and content
	policies map[policyKey]*policyEntry
}

func compileSchema() (*compiled, error) {
	srcs, err := schemaSources()
	if err != nil {
		return nil, err
	}
	inst := build.NewContext().NewInstance("", nil)
	for _, name := range keys(srcs) {
		f, err := parser.ParseFile(name, srcs[name], parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("schemas: parse %s: %w", name, err)
		}
		if err := inst.AddSyntax(f); err != nil {
			return nil, fmt.Errorf("schemas: %w", err)
		}
	}
	ctx := cuecontext.New()
	v := ctx.BuildInstance(inst)
	if err := v.Err(); err != nil {
		return nil, fmt.Errorf("schemas: compile: %w", err)
	}
	c := &compiled{ctx: ctx, root: v, kinds: map[string]cue.Value{}}
	for kind, def := range kindDefs {
		c.kinds[kind] = v.LookupPath(cue.ParsePath(def))
	}
	return c, nil
}
