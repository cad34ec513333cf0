package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gitfleet/gitfleet/reconciler/history"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/sources"
)

func init() {
	register(&command{
		name:    "history",
		usage:   "history [CLUSTER] [--machine NAME] [--repo DIR] [--branch B] [-o text|json]",
		summary: "the audit trail from Git: spec commits (author, date, what changed, what was refused) and the status they led to",
		run:     runHistory,
	})
}

func runHistory(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("history", env)
	repoDir := fs.String("repo", ".", "fleet repository (a local clone)")
	branch := fs.String("branch", "", "spec branch (default: the branch HEAD is on)")
	statusBranch := fs.String("status-branch", "", "status branch (default: gitfleet.yaml's spec.statusBranch, else "+v1alpha1.DefaultStatusBranch+")")
	machine := fs.String("machine", "", "the life of one machine: when it came and went, and why")
	output := fs.String("o", "text", "output format: text or json")
	fs.StringVar(output, "format", "text", "same as -o")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 1:
		return &exitError{code: exitUsage, err: fmt.Errorf("one cluster at most, got %q", pos)}
	case *output != "text" && *output != "json":
		return &exitError{code: exitUsage, err: fmt.Errorf("-o %q: use text or json", *output)}
	}
	g, err := openGit(*repoDir)
	if err != nil {
		return err
	}
	if *machine != "" {
		life, err := history.Machine(g, *statusBranch, *machine)
		if err != nil {
			return err
		}
		return writeOutput(env.stdout, *output, life, life.WriteText)
	}
	o := history.Options{Branch: *branch, StatusBranch: *statusBranch}
	if len(pos) == 1 {
		o.Cluster = pos[0]
	}
	src, err := sources.Open(ctx, sources.Options{Location: *repoDir})
	if err != nil {
		return fmt.Errorf("open %s: %w", *repoDir, err)
	}
	defer src.Close()
	log, err := history.Read(ctx, g, src, o)
	if err != nil {
		return err
	}
	return writeOutput(env.stdout, *output, log, log.WriteText)
}

// writeOutput writes v as indented JSON, or as text.
func writeOutput(w io.Writer, format string, v any, text func(io.Writer) error) error {
	if format == "json" {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(v)
	}
	return text(w)
}
