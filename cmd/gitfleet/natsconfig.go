package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/gitfleet/gitfleet/providers/natsbus"
)

func init() {
	register(&command{
		name:    "nats-config",
		usage:   "nats-config [--data-dir DIR]",
		summary: "print the nats-server configuration that trusts gitfleet's generated NATS credentials (made under DIR/nats-auth if missing)",
		run:     runNATSConfig,
	})
}

// runNATSConfig prints the configuration an external nats-server needs to
// trust the credentials under --data-dir (docs/operations.md). On a data
// dir that holds the keys it only reads (natsbus.ConfigAuth): run as root
// on the daemon's, it leaves no file the daemon cannot read.
func runNATSConfig(_ context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("nats-config", env)
	dataDir := fs.String("data-dir", ".gitfleet/data", "the daemon's data dir: credentials are kept in DATA-DIR/nats-auth")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	a, err := natsbus.ConfigAuth(filepath.Join(*dataDir, natsbus.AuthDirName))
	if err != nil {
		return err
	}
	conf, err := a.ServerConfig()
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(env.stdout, conf)
	return err
}
