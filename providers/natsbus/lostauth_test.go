package natsbus_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers/natsbus"
)

// DATA-DIR/nats-auth lost while the store it made stays: new credentials
// are a new account, which sees none of the old one's streams. Before,
// the daemon made them and went on with an empty store: every record, the
// rollouts and the clusters' CAs out of reach, and every local node's
// credentials refused, so their heartbeats stopped. It stops instead,
// saying what to restore, at this start and the next; a store moved away
// starts anew.
func TestLostCredentialsWithTheirStoreAreRefused(t *testing.T) {
	dir := t.TempDir()
	bus := openEmbedded(t, dir)
	if err := natsbus.Ensure(ctx(t), bus.JS); err != nil {
		t.Fatal(err)
	}
	bus.Close()
	if err := os.RemoveAll(filepath.Join(dir, natsbus.AuthDirName)); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		b, err := natsbus.Open(ctx(t), natsbus.Options{URL: natsbus.Embedded, DataDir: dir}, zerolog.Nop())
		if err == nil {
			b.Close()
			t.Fatalf("start %d: the store of lost credentials was opened with new ones, empty", i+1)
		}
		if !strings.Contains(err.Error(), "restore") || !strings.Contains(err.Error(), natsbus.AuthDirName) {
			t.Errorf("start %d: %v; want what to restore", i+1, err)
		}
	}
	if err := os.Rename(filepath.Join(dir, "nats"), filepath.Join(dir, "nats.old")); err != nil {
		t.Fatal(err)
	}
	openEmbedded(t, dir).Close()
}
