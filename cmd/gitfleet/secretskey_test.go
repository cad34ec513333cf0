package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestSecretsKey: serve makes the clusters' PKI under its secrets key; a
// restart under another key stops at once with an error that says what to
// do, and changes nothing; the documented rotation (new key, old key as
// --secrets-previous-key-file) reseals it, after which the new key alone
// runs the daemon and opens the same CAs, and the old one no longer does.
func TestSecretsKey(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon four times")
	}
	srv := natstest.StartProcess(t)
	repo := filepath.Join(t.TempDir(), "fleet")
	if code, _, stderr := runCmd(t, "init", repo); code != 0 {
		t.Fatalf("init: %s", stderr)
	}
	dir := t.TempDir()
	keyA, keyB := filepath.Join(dir, "a.key"), filepath.Join(dir, "b.key")
	for _, k := range []string{keyA, keyB} {
		if err := pki.NewKeyFile(k); err != nil {
			t.Fatal(err)
		}
	}
	_, js := natstest.Connect(t, srv.URL())
	sealed := func(key string) []byte {
		kv, err := js.KeyValue(t.Context(), wire.BucketPKI)
		if err != nil {
			return nil
		}
		e, err := kv.Get(t.Context(), key)
		if err != nil {
			return nil
		}
		return e.Value()
	}
	// serve runs the daemon until it is past the key check and both
	// clusters have their PKI, or until it exits on its own; it returns
	// the exit code (-1: it was stopped) and stderr.
	serve := func(keys ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var stderr syncBuffer
		done := make(chan int, 1)
		args := []string{"serve", "--repo", repo, "--nats", srv.URL(), "--data-dir", t.TempDir(), "--listen", "",
			"--log-format", "json", "--secrets-key-file", keys[0]}
		if len(keys) > 1 {
			args = append(args, "--secrets-previous-key-file", keys[1])
		}
		go func() { done <- run(ctx, args, &cmdEnv{stdout: io.Discard, stderr: &stderr}) }()
		deadline := time.After(time.Minute)
		for {
			select {
			case code := <-done:
				return code, stderr.String()
			case <-deadline:
				t.Fatal("the clusters' PKI was not made within a minute")
			case <-time.After(100 * time.Millisecond):
			}
			// Past the key check ("gitfleet daemon started" comes after
			// it), and the clusters' PKI made.
			if strings.Contains(stderr.String(), "gitfleet daemon started") && sealed("ca.dev-1") != nil && sealed("ca.prod-1") != nil {
				cancel()
				<-done
				return -1, ""
			}
		}
	}
	if code, _ := serve(keyA); code != -1 {
		t.Fatalf("serve under key A exited %d", code)
	}
	before := sealed("ca.dev-1")
	keysA, _ := pki.LoadKeyring(keyA)
	storeA, _, _ := pki.OpenStore(t.Context(), js, keysA)
	ca, _, err := storeA.HasCluster(t.Context(), "dev-1")
	if err != nil {
		t.Fatal(err)
	}

	code, stderr := serve(keyB)
	if code <= 0 || !strings.Contains(stderr, "--secrets-previous-key-file") || !strings.Contains(stderr, keysA.ID()) {
		t.Fatalf("serve under key B: exit %d, want an error naming key A (%s) and the rotation flag:\n%s", code, keysA.ID(), stderr)
	}
	if !bytes.Equal(sealed("ca.dev-1"), before) {
		t.Fatal("a start under the wrong key changed dev-1's PKI")
	}
	if code, _ := serve(keyA); code != -1 {
		t.Fatalf("serve under key A after the refused start exited %d", code)
	}

	if code, stderr := serve(keyB, keyA); code != -1 {
		t.Fatalf("serve rotating from A to B exited %d:\n%s", code, stderr)
	}
	if code, stderr := serve(keyB); code != -1 {
		t.Fatalf("serve under key B after the rotation exited %d:\n%s", code, stderr)
	}
	keysB, _ := pki.LoadKeyring(keyB)
	storeB, _, err := pki.OpenStore(t.Context(), js, keysB)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, err := storeB.HasCluster(t.Context(), "dev-1"); err != nil || !ok || got.CA.Cert != ca.CA.Cert || got.CA.Key != ca.CA.Key {
		t.Errorf("dev-1's CA after the rotation: found %v, %v; want the same CA", ok, err)
	}
	if code, _ := serve(keyA); code <= 0 {
		t.Errorf("the old key still runs the daemon after the rotation (exit %d)", code)
	}
}
