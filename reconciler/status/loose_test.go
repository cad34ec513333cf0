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
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/gitfleet/gitfleet/internal/loose"
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
	if loose.ObjectsDir(repo.Storer) != filepath.Join(dir, "objects") {
		t.Fatalf("objects folder of a repository on disk: %q", loose.ObjectsDir(repo.Storer))
	}
	contents := [][]byte{nil, []byte("a"), bytes.Repeat([]byte("name: c1\nphase: Ready\n"), 500)}
	var hashes []plumbing.Hash
	for _, c := range contents {
		hashes = append(hashes, putBlob(t, repo.Storer, c))
	}
	check := func(how string) {
		t.Helper()
		for i, h := range hashes {
			got, err := loose.ReadBlob(repo.Storer, h)
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
	if _, err := loose.ReadBlob(repo.Storer, other); err == nil || !strings.Contains(err.Error(), other.String()) {
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
	if loose.ObjectsDir(mem) != "" {
		t.Error("a storage in memory has an objects folder")
	}
	h := putBlob(t, mem, contents[2])
	if got, err := loose.ReadBlob(mem, h); err != nil || !bytes.Equal(got, contents[2]) {
		t.Errorf("blob in memory: %v", err)
	}
}

// TestWriteObjectOnDisk: objects the writer stores in a repository on disk
// are git's: the same hash as go-git's, read back by git and go-git, found
// sound by git fsck, read-only; writing one again changes nothing.
func TestWriteObjectOnDisk(t *testing.T) {
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("name: c1\nphase: Ready\n"), 300)
	h, err := writeObject(repo.Storer, plumbing.BlobObject, data)
	if err != nil {
		t.Fatal(err)
	}
	if want := putBlob(t, memory.NewStorage(), data); h != want {
		t.Fatalf("hash %s, go-git makes %s", h, want)
	}
	file := filepath.Join(dir, "objects", h.String()[:2], h.String()[2:])
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o444 {
		t.Fatalf("object file: %v, %v; want mode 0444", fi, err)
	}
	if again, err := writeObject(repo.Storer, plumbing.BlobObject, data); err != nil || again != h {
		t.Errorf("written again: %s, %v", again, err)
	}
	tree, err := writeTree(repo.Storer, []object.TreeEntry{{Name: "c1.yaml", Mode: filemode.Regular, Hash: h}})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := repo.BlobObject(h); err != nil || b.Size != int64(len(data)) {
		t.Errorf("go-git reads the blob: %v", err)
	}
	if tr, err := repo.TreeObject(tree); err != nil || len(tr.Entries) != 1 || tr.Entries[0].Hash != h {
		t.Errorf("go-git reads the tree: %v", err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		return
	}
	if out, err := exec.Command("git", "-C", dir, "cat-file", "blob", h.String()).Output(); err != nil || !bytes.Equal(out, data) {
		t.Errorf("git cat-file: %d bytes, %v", len(out), err)
	}
	if out, err := exec.Command("git", "-C", dir, "fsck", "--strict", "--no-dangling").CombinedOutput(); err != nil {
		t.Errorf("git fsck: %v\n%s", err, out)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "objects", "*", "tmp_obj_*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
