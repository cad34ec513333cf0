package status

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"
)

func putBlob(t *testing.T, s storer.EncodedObjectStorer, data []byte) plumbing.Hash {
	t.Helper()
	o := s.NewEncodedObject()
	o.SetType(plumbing.BlobObject)
	w, _ := o.Writer()
	_, _ = w.Write(data)
	_ = w.Close()
	h, err := s.SetEncodedObject(o)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestReadBlobOnDisk: blobs read from loose files, from a pack and from
// memory have their content; a loose file whose content does not match
// its name is an error, not a status file.
func TestReadBlobOnDisk(t *testing.T) {
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if objectsDir(repo.Storer) != filepath.Join(dir, "objects") {
		t.Fatalf("objects folder of a repository on disk: %q", objectsDir(repo.Storer))
	}
	contents := [][]byte{nil, []byte("a"), bytes.Repeat([]byte("name: c1\nphase: Ready\n"), 500)}
	var hashes []plumbing.Hash
	for _, c := range contents {
		hashes = append(hashes, putBlob(t, repo.Storer, c))
	}
	check := func(how string) {
		t.Helper()
		for i, h := range hashes {
			got, err := readBlob(repo.Storer, h)
			if err != nil || !bytes.Equal(got, contents[i]) {
				t.Errorf("%s blob %d: %d bytes, %v; want %d bytes", how, i, len(got), err, len(contents[i]))
			}
		}
	}
	check("loose")

	// A loose file with another blob's content under this one's name.
	other := putBlob(t, memory.NewStorage(), []byte("b"))
	from := filepath.Join(dir, "objects", hashes[1].String()[:2], hashes[1].String()[2:])
	to := filepath.Join(dir, "objects", other.String()[:2], other.String()[2:])
	_ = os.MkdirAll(filepath.Dir(to), 0o755)
	data, _ := os.ReadFile(from)
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readBlob(repo.Storer, other); err == nil || !strings.Contains(err.Error(), other.String()) {
		t.Errorf("a loose file that does not hold its object: %v", err)
	}
	_ = os.Remove(to)

	// Packed: no loose files left.
	if _, err := exec.LookPath("git"); err == nil {
		for _, h := range hashes {
			_ = exec.Command("git", "-C", dir, "update-ref", "refs/keep/"+h.String(), h.String()).Run()
		}
		if out, err := exec.Command("git", "-C", dir, "repack", "-a", "-d").CombinedOutput(); err != nil {
			t.Fatalf("git repack: %v\n%s", err, out)
		}
		exec.Command("git", "-C", dir, "prune-packed").Run()
		if _, err := os.Stat(from); !os.IsNotExist(err) {
			t.Fatalf("still loose after repack: %v", err)
		}
		repo, err = git.PlainOpen(dir)
		if err != nil {
			t.Fatal(err)
		}
		check("packed")
	}

	mem := memory.NewStorage()
	if objectsDir(mem) != "" {
		t.Error("a storage in memory has an objects folder")
	}
	h := putBlob(t, mem, contents[2])
	if got, err := readBlob(mem, h); err != nil || !bytes.Equal(got, contents[2]) {
		t.Errorf("blob in memory: %v", err)
	}
}
