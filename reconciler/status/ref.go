package status

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// staleLock is how old a ref's lock file must be before a writer takes it
// as left by a process that died while holding it.
const staleLock = time.Minute

// refFile is the loose ref file of name when the repository is on disk.
func (w *Writer) refFile(name plumbing.ReferenceName) (string, bool) {
	st, ok := w.store.(*filesystem.Storage)
	if !ok {
		return "", false
	}
	return filepath.Join(st.Filesystem().Root(), filepath.FromSlash(name.String())), true
}

// setRef moves the branch from old (nil: it must not exist) to ref, as git
// does: the new value is written to <ref>.lock, created exclusively, then
// renamed over the ref file. A kill at any moment leaves the old value or
// the new one, never an empty file (go-git rewrites a ref file in place,
// and an empty one reads as "no branch": the next commit would start a new
// history). The lock also keeps a git CLI or a second writer out.
func (w *Writer) setRef(ref, old *plumbing.Reference) error {
	path, onDisk := w.refFile(ref.Name())
	if !onDisk {
		return w.store.CheckAndSetReference(ref, old)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("set %s: %w", ref.Name(), err)
	}
	lock := path + ".lock"
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Stat(lock); serr == nil && time.Since(fi.ModTime()) > staleLock {
			w.log.Warn().Str("lock", lock).Msg("status: removing a ref lock left by a process that died")
			_ = os.Remove(lock)
		}
		return errRaced
	}
	if err != nil {
		return fmt.Errorf("set %s: %w", ref.Name(), err)
	}
	defer os.Remove(lock) // gone already once renamed
	cur, err := w.store.Reference(ref.Name())
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		cur = nil
	case err != nil:
		f.Close()
		return fmt.Errorf("set %s: %w", ref.Name(), err)
	}
	if (old == nil) != (cur == nil) || (old != nil && cur.Hash() != old.Hash()) {
		f.Close()
		return errRaced
	}
	if _, err := f.WriteString(ref.Hash().String() + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("set %s: %w", ref.Name(), err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("set %s: %w", ref.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("set %s: %w", ref.Name(), err)
	}
	if err := os.Rename(lock, path); err != nil {
		return fmt.Errorf("set %s: %w", ref.Name(), err)
	}
	return nil
}

// damagedRef says why the branch's loose ref file cannot be read when
// go-git reports no branch although the file is there: an empty or cut
// file (a crash of an older version while writing it). Reading it as "no
// branch" would start a new history and orphan the old one.
func (w *Writer) damagedRef() error {
	path, onDisk := w.refFile(w.ref)
	if !onDisk {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil // no loose file: the branch really is absent
	}
	if plumbing.IsHash(strings.TrimSpace(string(data))) {
		return nil
	}
	return fmt.Errorf("%s holds %q, not a commit: restore the branch (git reflog %s, or git update-ref %s <commit> from the remote) before the daemon writes status again",
		path, strings.TrimSpace(string(data)), w.opts.Branch, w.ref)
}
