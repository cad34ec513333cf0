package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/local"
)

func init() {
	register(&command{
		name:    "up",
		usage:   "up [--repo DIR]",
		summary: "all in one: daemon + embedded NATS + local and inmemory workers",
		run:     runUp,
	})
}

func runUp(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("up", env)
	var o daemonOptions
	o.bindFlags(fs, "127.0.0.1:8080")
	o.nats.URL = "embedded"
	json := fs.Bool("json", false, "same as --log-format json")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 1 && o.repo == "." {
		o.repo = pos[0]
	} else if len(pos) > 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("unexpected argument %q", pos[0])}
	}
	if !strings.Contains(o.repo, "://") {
		if _, err := os.Stat(o.repo); err != nil {
			return fmt.Errorf("--repo %s: %w (make one with: gitfleet init %s)", o.repo, err, o.repo)
		}
	}
	o.workers = []string{local.Name, inmemory.Name}
	if *json {
		o.log.format = logFormatJSON
	}
	return runDaemon(ctx, env, o)
}
