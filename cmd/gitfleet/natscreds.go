package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gitfleet/gitfleet/internal/privfile"
	"github.com/gitfleet/gitfleet/providers/docker"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/local"
	"github.com/gitfleet/gitfleet/providers/natsbus"
)

func init() {
	register(&command{
		name:    "nats-creds",
		usage:   "nats-creds --worker NAME --provider inmemory|local|docker [--data-dir DIR] [-o FILE]",
		summary: "make the NATS credentials of worker NAME (for gitfleet worker --nats-creds), from the daemon's keys under DIR/nats-auth",
		run:     runNATSCreds,
	})
}

// runNATSCreds mints a worker credential: a user that publishes events
// in NAME's name only, and inventories of one provider in NAME's name only
// (docs/operations.md, "Who may do what"). It only reads the daemon's keys: a data dir without them is an
// error, and nothing of the daemon's is written. The file is a secret: -o
// writes it readable by its owner only, never over a file that exists nor
// in the daemon's own folder; without -o it goes to standard output, for a
// secret store's command.
func runNATSCreds(_ context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("nats-creds", env)
	dataDir := fs.String("data-dir", ".gitfleet/data", "the daemon's data dir: its credentials are kept in DATA-DIR/nats-auth")
	worker := fs.String("worker", "", "the credential's `name`: the workers NAME and NAME_<anything> run with it (letters, digits and '-')")
	provider := fs.String("provider", "", "the provider the workers run (inmemory, local or docker): the credentials report its machines only")
	out := fs.String("o", "", "write the credentials to `file` (mode 0600), which must not exist, instead of standard output")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *worker == "" {
		return &exitError{code: exitUsage, err: fmt.Errorf("--worker is required: the name of the worker (or of the workers NAME_<anything>) the credentials are for")}
	}
	switch *provider {
	case inmemory.Name, local.Name, docker.Name:
	case "":
		return &exitError{code: exitUsage, err: fmt.Errorf("--provider is required: the provider the workers run (inmemory, local or docker); their credentials report that provider's machines only")}
	default:
		return &exitError{code: exitUsage, err: fmt.Errorf("--provider %q: unknown provider (want inmemory, local or docker)", *provider)}
	}
	authDir := filepath.Join(*dataDir, natsbus.AuthDirName)
	if *out != "" && sameDir(filepath.Dir(*out), authDir) {
		return &exitError{code: exitUsage, err: fmt.Errorf("-o %s: that is the daemon's own folder, whose files are its own (a worker.creds there is revoked at its next start): write the credentials elsewhere", *out)}
	}
	a, err := natsbus.ReadAuth(authDir)
	if err != nil {
		return err
	}
	creds, err := a.WorkerCreds(*worker, *provider)
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--worker: %w", err)}
	}
	if *out != "" {
		err := privfile.Create(*out, creds)
		if errors.Is(err, os.ErrExist) {
			return &exitError{code: exitUsage, err: fmt.Errorf("-o %s exists: remove it first to make new credentials in its place", *out)}
		}
		return err
	}
	_, err = env.stdout.Write(creds)
	return err
}

// sameDir reports whether the folders a and b are one, through symbolic
// links too.
func sameDir(a, b string) bool {
	abs := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		if r, err := filepath.Abs(p); err == nil {
			p = r
		}
		return filepath.Clean(p)
	}
	return abs(a) == abs(b)
}
