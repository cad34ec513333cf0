package schemas

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
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

// parsedSchema holds the schema files parsed once; compiling them into a
// cue.Context is cheap compared with parsing, and each context compiles its own.
var parsedSchema = sync.OnceValues(func() ([]*ast.File, error) {
	var files []*ast.File
	err := fs.WalkDir(cueFS, "cue", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".cue" {
			return err
		}
		src, err := cueFS.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile("schemas/"+p, src, parser.ParseComments)
		if err != nil {
			return fmt.Errorf("schemas: parse %s: %w", p, err)
		}
		files = append(files, f)
		return nil
	})
	return files, err
})

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
}

func compileSchema() (*compiled, error) {
	files, err := parsedSchema()
	if err != nil {
		return nil, err
	}
	inst := build.NewContext().NewInstance("", nil)
	for _, f := range files {
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
