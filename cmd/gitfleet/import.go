package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/gitfleet/gitfleet/capi"
)

func init() {
	register(&command{
		name:    "import",
		usage:   "import capi [--provider NAME] [-o DIR] FILE|DIR...",
		summary: "convert Cluster API YAML into fleet files, reporting every field dropped or changed",
		run:     runImport,
	})
}

func runImport(ctx context.Context, env *cmdEnv, args []string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		// capi is the one thing import converts: its help is import's.
		args = []string{"capi", "-h"}
	}
	if len(args) == 0 || args[0] != "capi" {
		return &exitError{code: exitUsage, err: errors.New("import what? gitfleet imports Cluster API YAML: gitfleet import capi FILE|DIR...")}
	}
	fs := newFlagSet("import capi", env)
	provider := fs.String("provider", "local", "the provider every machine template is made for")
	out := fs.String("o", ".", "the fleet folder to write classes/ and clusters/ into")
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return &exitError{code: exitUsage, err: errors.New("name the Cluster API files or folders to convert")}
	}
	inputs, err := capi.ReadInputs(pos)
	if err != nil {
		return err
	}
	res, err := capi.Import(inputs, capi.Options{Provider: *provider})
	if err != nil {
		return err
	}
	written, err := capi.Write(*out, res)
	if err != nil {
		return err
	}
	dropped, changed := 0, 0
	for _, f := range res.Findings {
		fmt.Fprintln(env.stdout, f)
		if f.What == "dropped" {
			dropped++
		} else {
			changed++
		}
	}
	for _, w := range written {
		fmt.Fprintf(env.stdout, "wrote %s\n", w)
	}
	fmt.Fprintf(env.stdout, "%d fields dropped, %d changed; run gitfleet validate %s\n", dropped, changed, *out)
	return nil
}
