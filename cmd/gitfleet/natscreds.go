package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/gitfleet/gitfleet/internal/privfile"
	"github.com/gitfleet/gitfleet/providers/natsbus"
)

func init() {
	register(&command{
		name:    "nats-creds",
		usage:   "nats-creds --worker NAME [--data-dir DIR] [-o FILE]",
		summary: "make the NATS credentials of worker NAME (for gitfleet worker --nats-creds), from the daemon's keys under DIR/nats-auth",
		run:     runNATSCreds,
	})
}

// runNATSCreds mints a worker credential: a user that publishes events
// and inventories in NAME's name only (docs/operations.md, "Who may do
// what"). The file is a secret: -o writes it readable by its owner only;
// without -o it goes to standard output, for a secret store's command.
func runNATSCreds(_ context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("nats-creds", env)
	dataDir := fs.String("data-dir", ".gitfleet/data", "the daemon's data dir: its credentials are kept in DATA-DIR/nats-auth")
	worker := fs.String("worker", "", "the credential's `name`: the workers NAME and NAME_<anything> run with it (letters, digits and '-')")
	out := fs.String("o", "", "write the credentials to `file` (mode 0600) instead of standard output")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *worker == "" {
		return &exitError{code: exitUsage, err: fmt.Errorf("--worker is required: the name of the worker (or of the workers NAME_<anything>) the credentials are for")}
	}
	a, err := natsbus.LoadExistingAuth(filepath.Join(*dataDir, natsbus.AuthDirName))
	if err != nil {
		return err
	}
	creds, err := a.WorkerCreds(*worker)
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--worker: %w", err)}
	}
	if *out != "" {
		return privfile.Write(*out, creds)
	}
	_, err = env.stdout.Write(creds)
	return err
}
