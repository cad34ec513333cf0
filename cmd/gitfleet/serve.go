package main

import (
	"context"
	"fmt"
)

func init() {
	register(&command{
		name:         "serve",
		usage:        "serve [--repo PATH|URL] [--branch B] [--nats embedded|URL] [--listen ADDR] ...",
		summary:      "run the daemon: follow the repo, plan, publish tasks, commit status",
		run:          runServe,
		untilStopped: always,
	})
}

func runServe(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("serve", env)
	var o daemonOptions
	o.bindFlags(fs, "127.0.0.1:8080")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("unexpected argument %q (the repository is --repo)", pos[0])}
	}
	return runDaemon(ctx, env, o)
}
