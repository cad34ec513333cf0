package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/gitfleet/gitfleet/providers/docker"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/local"
	"github.com/gitfleet/gitfleet/sources"
)

func init() {
	register(&command{
		name:         "up",
		usage:        "up [--repo DIR] [--docker]",
		summary:      "all in one: daemon + embedded NATS + local and inmemory workers (and docker, with --docker)",
		run:          runUp,
		untilStopped: always,
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
	if err := localRepoExists(o.repo); err != nil {
		return err
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

// localRepoExists says, before anything starts, when repo is a folder of
// this machine that is not there, and how to make one; a URL or
// git@host:path is left to the source, which clones it.
func localRepoExists(repo string) error {
	if strings.Contains(repo, "://") || sources.IsRemote(repo) {
		return nil
	}
	_, err := os.Stat(repo)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("--repo %s: no such folder (make one with: gitfleet init %s)", repo, repo)
	case err != nil:
		return fmt.Errorf("--repo %s: %w", repo, err)
	}
	return nil
}
