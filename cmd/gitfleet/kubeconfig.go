package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/providers/natsbus"
)

func init() {
	register(&command{
		name:    "kubeconfig",
		usage:   "kubeconfig CLUSTER [--data-dir D] [--nats URL] [--secrets-key-file F] [-o FILE]",
		summary: "write an admin kubeconfig for a cluster's control-plane endpoint, signed by the cluster's CA",
		run:     runKubeconfig,
	})
}

func runKubeconfig(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("kubeconfig", env)
	nopts := natsbus.Options{Name: "gitfleet-kubeconfig"}
	nopts.BindClientFlags(fs)
	fs.Lookup("nats").Usage = "NATS URL nats://host:port (comma-separated for a cluster); default: the running daemon's embedded server, found in --data-dir"
	dataDir := fs.String("data-dir", filepath.Join(".gitfleet", "data"), "the daemon's data dir: with no --nats, its embedded server's port and credentials are read there")
	keyFile := fs.String("secrets-key-file", "", "the daemon's secrets key (default DATA-DIR/secrets.key)")
	out := fs.String("o", "", "write the kubeconfig to this file (mode 600) instead of standard output")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &exitError{code: exitUsage, err: errors.New("name one cluster, e.g. gitfleet kubeconfig dev-1")}
	}
	if *keyFile == "" {
		*keyFile = filepath.Join(*dataDir, secretsKeyName)
	}
	keys, err := pki.LoadKeyring(*keyFile)
	if err != nil {
		return err
	}
	if nopts.URL == "" || nopts.URL == natsbus.Embedded {
		// The running daemon's embedded server, as the daemon itself.
		port, err := readNATSPort(*dataDir)
		if err != nil {
			return fmt.Errorf("no running daemon's NATS server in %s (give --data-dir, or --nats): %w", *dataDir, err)
		}
		nopts.URL = "nats://127.0.0.1:" + strconv.Itoa(port)
		if nopts.CredsFile == "" {
			if creds := filepath.Join(*dataDir, natsbus.AuthDirName, natsbus.DaemonCredsFile); fileExists(creds) {
				nopts.CredsFile = creds
			}
		}
	}
	nopts.ResolveCredentials()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	bus, err := natsbus.Open(cctx, nopts, zerolog.Nop())
	if err != nil {
		return err
	}
	defer bus.Close()
	store, err := pki.OpenStoreReadOnly(cctx, bus.JS, keys)
	if err != nil {
		return err
	}
	cluster := pos[0]
	c, found, err := store.HasCluster(cctx, cluster)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("cluster %s has no PKI yet: the daemon makes it when it first creates the cluster's machines", cluster)
	}
	kc, err := c.AdminKubeconfig(c.Endpoint, time.Now())
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = env.stdout.Write(kc)
		return err
	}
	return writeSecretFile(*out, kc)
}

// writeSecretFile writes data to path, which only its owner may read
// then, even when it existed with a wider mode (os.WriteFile would keep
// that mode): the mode is narrowed before the old content is cut and the
// new written. A symbolic link is written through, as kubectl's config
// often is one.
func writeSecretFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	err = f.Chmod(0o600)
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
