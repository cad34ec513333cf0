package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
)

// TestNATSConfigOnlyReads: gitfleet nats-config on the daemon's data dir,
// which docs/operations.md has operators run as root (sudo, > /etc/nats/…),
// writes nothing there: it rewrote daemon.creds, and revoked and removed
// an earlier version's worker.creds, leaving root's 0600 files that
// stopped the daemon's next start ("permission denied"). The configuration
// it prints still revokes that worker.creds' user, and the daemon's next
// start revokes and removes it. A key missing beside account.nk is an
// error that names it, not a new one no server trusts.
func TestNATSConfigOnlyReads(t *testing.T) {
	dataDir := t.TempDir()
	authDir := filepath.Join(dataDir, natsbus.AuthDirName)
	if _, err := natsbus.LoadAuth(authDir); err != nil { // as the daemon's first start does
		t.Fatal(err)
	}
	account := readSeed(t, filepath.Join(authDir, "account.nk"))
	accountPub, _ := account.PublicKey()
	// The worker.creds of an earlier version: signed by the account's own
	// key, events and inventories of any worker.
	legacy, legacyClaims := natstest.LegacyWorkerCreds(t, authDir)
	legacyFile := filepath.Join(authDir, natsbus.LegacyWorkerCredsFile)
	kept := filepath.Join(t.TempDir(), "copy-on-a-worker-host.creds")
	if err := os.WriteFile(kept, legacy, 0o600); err != nil {
		t.Fatal(err)
	}

	before := folder(t, authDir)
	code, conf, msg := natsConfig(t, dataDir)
	if code != 0 {
		t.Fatalf("nats-config: exit %d: %s", code, msg)
	}
	if c := changed(before, folder(t, authDir)); len(c) > 0 {
		t.Errorf("nats-config wrote in the daemon's folder: %s", strings.Join(c, ", "))
	}
	// The account's JWT it prints revokes the legacy user.
	var accountJWT string
	for _, line := range strings.Split(conf, "\n") {
		if j, ok := strings.CutPrefix(strings.TrimSpace(line), accountPub+": "); ok {
			accountJWT = j
		}
	}
	ac, err := jwt.DecodeAccountClaims(accountJWT)
	if err != nil {
		t.Fatalf("the configuration holds no JWT of account %s: %v\n%s", accountPub, err, conf)
	}
	if !ac.IsClaimRevoked(legacyClaims) {
		t.Error("the configuration nats-config printed lets the legacy worker.creds' user in")
	}

	// A key missing beside account.nk: refused, naming it, and nothing made.
	for _, f := range []string{"operator.nk", "system.nk", natsbus.NodeSignerFile} {
		path := filepath.Join(authDir, f)
		data, _ := os.ReadFile(path)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		want := folder(t, authDir)
		if code, _, msg := natsConfig(t, dataDir); code == 0 || !strings.Contains(msg, "no "+f) {
			t.Errorf("nats-config without %s: exit %d, %q; want it refused, naming it", f, code, msg)
		}
		if c := changed(want, folder(t, authDir)); len(c) > 0 {
			t.Errorf("nats-config without %s wrote in the daemon's folder: %s", f, strings.Join(c, ", "))
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The daemon's next start revokes the user and removes the file.
	bus, err := natsbus.Open(t.Context(), natsbus.Options{URL: natsbus.Embedded, DataDir: dataDir}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	if _, err := os.Stat(legacyFile); !os.IsNotExist(err) {
		t.Errorf("%s after the daemon's start: %v; want it removed", legacyFile, err)
	}
	if revoked, _ := os.ReadFile(filepath.Join(authDir, natsbus.RevokedFile)); !strings.Contains(string(revoked), legacyClaims.Subject) {
		t.Errorf("%s after the daemon's start: %q; want the legacy user", natsbus.RevokedFile, revoked)
	}
	if nc, err := nats.Connect(bus.URL, nats.UserCredentials(kept)); err == nil {
		nc.Close()
		t.Error("the legacy worker.creds connects to the daemon's server")
	}

	// A data dir without keys gets them, as the usage says.
	empty := t.TempDir()
	if code, conf, msg := natsConfig(t, empty); code != 0 || !strings.Contains(conf, "resolver_preload") {
		t.Errorf("nats-config on a data dir without keys: exit %d, %q, %s", code, conf, msg)
	}
	if _, err := os.Stat(filepath.Join(empty, natsbus.AuthDirName, "account.nk")); err != nil {
		t.Errorf("nats-config made no keys in a data dir without them: %v", err)
	}
}

// natsConfig runs gitfleet nats-config on dataDir: its exit code, output
// and errors.
func natsConfig(t *testing.T, dataDir string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"nats-config", "--data-dir", dataDir}, &cmdEnv{stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

// folder is dir's files by name, each with its mode, time and content.
func folder(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		data := []byte{}
		if !d.IsDir() {
			if data, err = os.ReadFile(path); err != nil {
				return err
			}
		}
		rel, _ := filepath.Rel(dir, path)
		out[rel] = fi.Mode().String() + " " + fi.ModTime().String() + "\n" + string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// changed names the files of before and after that differ (secrets are
// not printed).
func changed(before, after map[string]string) []string {
	var out []string
	for name, was := range before {
		if now, ok := after[name]; !ok {
			out = append(out, name+" removed")
		} else if now != was {
			out = append(out, name+" changed")
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			out = append(out, name+" made")
		}
	}
	slices.Sort(out)
	return out
}

func readSeed(t *testing.T, path string) nkeys.KeyPair {
	t.Helper()
	seed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := nkeys.FromSeed(bytes.TrimSpace(seed))
	if err != nil {
		t.Fatal(err)
	}
	return kp
}
