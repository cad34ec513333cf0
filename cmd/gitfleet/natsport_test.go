package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// TestNATSPortFileIsNeverSeenHalfWritten: the daemon writes its embedded
// server's port at every start, while gitfleet kubeconfig (or a test)
// may read it; a reader sees the old port or the new one, never an empty
// file (an end-to-end run once read "" and dialled nats://127.0.0.1:).
func TestNATSPortFileIsNeverSeenHalfWritten(t *testing.T) {
	dir := t.TempDir()
	if err := rememberPort(dir, 4222); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := rememberPort(dir, 4222+i%2); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 5000 {
		p, err := readNATSPort(dir)
		if err != nil || (p != 4222 && p != 4223) {
			t.Errorf("read %d, %v while the port was rewritten; want 4222 or 4223", p, err)
			break
		}
	}
	close(stop)
	wg.Wait()
	if fi, err := os.Stat(filepath.Join(dir, natsPortFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("port file: %v %v; want mode 0600", fi, err)
	}
}

// TestNATSPortFileDamaged: a port file that holds no port is refused with
// its path and what to do, and the next start does not take it as a port.
func TestNATSPortFileDamaged(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, natsPortFile)
	if err := os.WriteFile(file, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := readNATSPort(dir)
	if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "restart the daemon") {
		t.Errorf("readNATSPort of an empty file: %v; want an error naming %s and the fix", err, file)
	}
	var logged bytes.Buffer
	if p := stickyPort(dir, 0, zerolog.New(&logged)); p != 0 {
		t.Errorf("stickyPort of an empty file: %d, want 0 (any free port)", p)
	}
	if !strings.Contains(logged.String(), `"level":"warn"`) || !strings.Contains(logged.String(), file) {
		t.Errorf("stickyPort of an empty file logged %q; want a warning naming %s", logged.String(), file)
	}
	logged.Reset()
	if p := stickyPort(t.TempDir(), 0, zerolog.New(&logged)); p != 0 || logged.Len() != 0 {
		t.Errorf("stickyPort of a first start: port %d, logged %q; want 0 and nothing", p, logged.String())
	}
	if p := stickyPort(dir, 5000, zerolog.Nop()); p != 5000 {
		t.Errorf("stickyPort with --nats-port 5000: %d", p)
	}
}
