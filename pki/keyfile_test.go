package pki

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestNewKeyFileIsWhole: while the daemon makes the secrets key on its
// first start, a worker that reads it (the same data dir) finds no file
// or the whole key, never half of one; and of two processes making it at
// once, both go on with the one key left on disk.
func TestNewKeyFileIsWhole(t *testing.T) {
	for round := range 300 {
		path := filepath.Join(t.TempDir(), "secrets.key")
		var wg sync.WaitGroup
		done := make(chan struct{})
		var seen string
		wg.Go(func() {
			for {
				k, err := LoadKeyring(path)
				switch {
				case err == nil:
					seen = k.ID()
					return
				case !errors.Is(err, fs.ErrNotExist):
					t.Errorf("round %d: a reader while the key was made: %v", round, err)
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
		var made sync.WaitGroup
		for range 2 {
			made.Go(func() {
				if err := NewKeyFile(path); err != nil {
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		made.Wait()
		close(done)
		wg.Wait()
		k, err := LoadKeyring(path)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if seen != "" && seen != k.ID() {
			t.Fatalf("round %d: a reader saw key %s, the file holds %s", round, seen, k.ID())
		}
		if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
			t.Fatalf("round %d: %d files beside the key", round, len(entries)-1)
		}
		if t.Failed() {
			return
		}
	}
}
