package privfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWrite: the file holds the data, only its owner may read it, a second
// write replaces it, and nothing else is left in the folder; a folder that
// does not exist is an error and creates nothing.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cache")
	for _, data := range []string{"first", "second, longer"} {
		if err := Write(p, []byte(data)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != data {
			t.Fatalf("read %q, %v; want %q", got, err, data)
		}
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the folder, want only the written one", len(entries))
	}
	if err := Write(filepath.Join(dir, "missing", "cache"), []byte("x")); err == nil {
		t.Error("writing into a folder that does not exist succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the folder after a failed write, want 1", len(entries))
	}
}

// TestCreate: the file holds the data, only its owner may read it, a
// second Create fails as fs.ErrExist and leaves the first's content, and
// nothing else is left in the folder.
func TestCreate(t *testing.T) { createTwice(t) }

// TestCreateWithoutHardLinks is TestCreate on a file system that refuses
// hard links (link answers EPERM, as FAT and some network file systems
// do): Create writes in place, still never over another file.
func TestCreateWithoutHardLinks(t *testing.T) {
	t.Cleanup(func() { link = os.Link })
	link = func(oldname, newname string) error {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EPERM}
	}
	createTwice(t)
}

func createTwice(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "key")
	if err := Create(p, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := Create(p, []byte("second")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a second Create: %v, want fs.ErrExist", err)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != "first" {
		t.Errorf("read %q, %v; want the first's content", got, err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the folder, want only the created one", len(entries))
	}
}
