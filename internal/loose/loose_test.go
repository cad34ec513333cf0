package loose

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// Read returns what git stored, says a damaged file is damaged, and leaves
// what is not loose to go-git.
func TestReadWhatGitWrote(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	content := "apiVersion: gitfleet.io/v1alpha1\nkind: Cluster\n" + strings.Repeat("# padding\n", 500)
	cmd := exec.Command("git", "hash-object", "-w", "--stdin")
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(content)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	h := plumbing.NewHash(strings.TrimSpace(string(out)))
	repo, err := gogit.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	objects := ObjectsDir(repo.Storer)
	if objects != filepath.Join(dir, ".git", "objects") {
		t.Fatalf("ObjectsDir = %q", objects)
	}
	data, err := Read(objects, h)
	if err != nil || string(data) != content {
		t.Fatalf("Read = %d bytes, %v; want git's %d bytes", len(data), err, len(content))
	}
	if _, err := Read(objects, plumbing.NewHash(strings.Repeat("ab", 20))); !errors.Is(err, ErrNotLoose) {
		t.Errorf("a missing object: %v, want ErrNotLoose", err)
	}
	// Another blob's file under h's name: the content does not match.
	other := exec.Command("git", "hash-object", "-w", "--stdin")
	other.Dir, other.Stdin = dir, strings.NewReader("something else\n")
	out, err = other.Output()
	if err != nil {
		t.Fatal(err)
	}
	o := strings.TrimSpace(string(out))
	file := filepath.Join(objects, h.String()[:2], h.String()[2:])
	body, err := os.ReadFile(filepath.Join(objects, o[:2], o[2:]))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(objects, h); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a damaged object: %v, want an error saying so", err)
	}
}

// BlobSize reads a loose blob's size from its header, and asks go-git for
// a packed one: both as git says.
func TestBlobSizeAsGitSays(t *testing.T) {
	dir := t.TempDir()
	git := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Stdin = dir, strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("", "init", "-q")
	sizes := map[plumbing.Hash]int64{}
	for _, content := range []string{"", "x\n", strings.Repeat("kind: Cluster\n", 2000)} {
		sizes[plumbing.NewHash(git(content, "hash-object", "-w", "--stdin"))] = int64(len(content))
	}
	check := func(when string) {
		repo, err := gogit.PlainOpen(dir)
		if err != nil {
			t.Fatal(err)
		}
		for h, want := range sizes {
			if got, err := BlobSize(repo.Storer, h); err != nil || got != want {
				t.Errorf("%s: BlobSize(%s) = %d, %v; want %d", when, h, got, err, want)
			}
		}
		if _, err := BlobSize(repo.Storer, plumbing.NewHash(strings.Repeat("ab", 20))); err == nil {
			t.Errorf("%s: a missing blob has a size", when)
		}
	}
	check("loose")
	// Pack every blob (they are unreachable, so keep them) and drop the
	// loose files.
	var list strings.Builder
	for h := range sizes {
		list.WriteString(h.String() + "\n")
	}
	git(list.String(), "pack-objects", "-q", ".git/objects/pack/pack")
	git("", "prune-packed")
	for h := range sizes {
		if _, err := Read(filepath.Join(dir, ".git", "objects"), h); !errors.Is(err, ErrNotLoose) {
			t.Fatalf("blob %s is still loose after prune-packed: %v", h, err)
		}
	}
	check("packed")
}

// BenchmarkReadTree10k: reading the loose tree of a folder of 10,000
// files, as the source does at every commit that changes one of them.
func BenchmarkReadTree10k(b *testing.B) {
	dir := b.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		b.Fatalf("git init: %v %s", err, out)
	}
	var list strings.Builder
	for i := range 10000 {
		// Distinct blob hashes, as real files have; the blobs need not exist.
		fmt.Fprintf(&list, "100644 blob %040x\tc%05d.yaml\n", i*7919+1, i)
	}
	cmd := exec.Command("git", "mktree", "--missing")
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(list.String())
	out, err := cmd.Output()
	if err != nil {
		b.Fatal(err)
	}
	h := plumbing.NewHash(strings.TrimSpace(string(out)))
	objects := filepath.Join(dir, ".git", "objects")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadTree(objects, h); err != nil {
			b.Fatal(err)
		}
	}
}
