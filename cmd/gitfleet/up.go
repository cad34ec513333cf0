package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/gitfleet/gitfleet/providers/docker"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/local"
)

func init() {
	register(&command{
		name:    "up",
		usage:   "up [--repo DIR] [--docker]",
		summary: "all in one: daemon + embedded NATS + local and inmemory workers (and docker, with --docker)",
		run:     runUp,
	})
}

func runUp(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("up", env)
	var o daemonOptions
	o.bindFlags(fs, "127.0.0.1:8080")
	o.nats.URL = "embedded"
	json := fs.Bool("json", false, "same as --log-format json")
	withDocker := fs.Bool("docker", false, "also run a docker worker (machines as containers of gitfleet-node:dev, make images); the embedded NATS server then listens on every interface, so containers reach it (its generated credentials are still required)")
	o.docker.bind(fs)
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
	if *withDocker {
		o.workers = append(o.workers, docker.Name)
		o.nats.Host = "0.0.0.0"
	}
	if *json {
		o.log.format = logFormatJSON
	}
	return runDaemon(ctx, env, o)
}
