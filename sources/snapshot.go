package sources

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/gitfleet/gitfleet/internal/layered"
	"github.com/gitfleet/gitfleet/internal/loose"
)

// snapshot is the list of regular files of a tree — a commit's or a working
// folder's — with a content key per file; contents are read on demand.
type snapshot struct {
	// files are the entries by path; a commit's snapshot shares the
	// entries of the files it did not change with the one before, and
	// the map itself (internal/layered) when no path came or went.
	files *layered.Map[string, *entry]
	paths []string // sorted; shared with the snapshot before while no path came or went
	// trees are a Git tree's folders ("" for the root, else "dir/") and
	// their tree hashes, and folders the same folders in order: a folder
	// whose hash is the same in the next commit is not listed again.
	// raw is each folder's tree as read (Git's entries, in order): the
	// next commit's tree of the folder is compared with it entry by
	// entry, so only the entries that differ are looked at.
	trees   *layered.Map[string, plumbing.Hash]
	raw     *layered.Map[string, []byte]
	folders []string
	// patched says the snapshot was made from the one before it when
	// only contents changed (changedSince): the same paths, with the
	// entries in edited new. A snapshot listed anew is not patched.
	patched bool
	edited  []*entry
	// known reports whether an input key (content key and path) was read
	// and parsed before; nil: none was.
	known func(key string) bool
	// fits reports whether content (a key) was found within MaxFileSize
	// before, and fitted records that it was; nil: sizes are always asked.
	fits   func(content string) bool
	fitted func(content string)
}

type entry struct {
	key string // content hash: the blob hash in Git, sha256 on disk
	// read and size are how a file on disk is read (readData) and its
	// length known without reading it (sizeOf); a Git tree's entry has
	// neither and reads its blob from st (methods, not closures: a
	// daemon keeps an entry a fleet file).
	read func() ([]byte, error)
	size func() (n int64, data []byte, err error)
	// Of a Git tree's entry: its blob, its path and its input key
	// (inputKey), kept so the next revision's snapshot reuses the entry
	// of a file that did not change, and where the blob is: in st, in a
	// pack (packed) or loose.
	st     *filesystem.Storage
	blob   plumbing.Hash
	packed bool
	path   string
	ikey   string
	// parsed is the file's latest parse result (parseCache.parseAll sets
	// it): an entry kept from the snapshot before finds its file's result
	// here, not by its key in the cache's map.
	parsed atomic.Pointer[parsed]
	// place is 1 + the file's index in the inputs of the repository's
	// latest listing, 0 if none (collect sets it, under the repository
	// lock); only a listing whose input at that index is this entry
	// trusts it (patchListing).
	place int32
}

// readable reports whether e has content to read (an entry made for a
// file not listed has none: it reads as empty).
func (e *entry) readable() bool { return e.read != nil || e.st != nil }

// readData reads e's content.
func (e *entry) readData() ([]byte, error) {
	if e.st != nil {
		return e.readBlob()
	}
	if e.read == nil {
		return nil, nil
	}
	return e.read()
}

// sizes reports whether sizeOf can tell e's length without reading it.
func (e *entry) sizes() bool { return e.size != nil || e.st != nil }

// sizeOf is e's length in bytes; data is its content when finding the
// length read it anyway (a packed blob within the limit), else nil.
func (e *entry) sizeOf() (n int64, data []byte, err error) {
	if e.st != nil {
		return e.blobSize()
	}
	return e.size()
}

// parsedBefore reports whether the file of e, at input key key, was read
// and parsed before.
func (s *snapshot) parsedBefore(e *entry, key string) bool {
	return e.parsed.Load() != nil || (s.known != nil && s.known(key))
}

// inputKey is the key of the file at p as an input: content and path.
func (e *entry) inputKey(p string) string {
	if e.ikey != "" {
		return e.ikey
	}
	return e.key + " " + p
}

func (s *snapshot) add(p string, e *entry) {
	s.files.Set(p, e)
	s.paths = append(s.paths, p)
}

// file is the entry of path p, or nil.
func (s *snapshot) file(p string) *entry {
	e, _ := s.files.Get(p)
	return e
}

// under lists the files at or below dir ("" is the root), in order.
func (s *snapshot) under(dir string) []string {
	if dir == "" {
		return s.paths
	}
	prefix := dir + "/"
	lo := sort.SearchStrings(s.paths, prefix)
	hi := lo
	for hi < len(s.paths) && strings.HasPrefix(s.paths[hi], prefix) {
		hi++
	}
	return s.paths[lo:hi]
}

// isDir reports whether some file lies below dir.
func (s *snapshot) isDir(dir string) bool { return dir == "" || len(s.under(dir)) > 0 }

func (s *snapshot) readFile(p string) ([]byte, error) {
	e := s.file(p)
	if e == nil {
		return nil, fmt.Errorf("%s: %w", p, ErrNotFound)
	}
	data, err := e.readData()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return data, nil
}

// treeSnapshot lists a commit tree's regular files without reading them.
// Symbolic links and submodules are skipped. The caller holds the repo lock
// while listing and while reading. A file of prev (nil: none) with the same
// path and blob keeps its entry, and a folder whose tree did not change
// keeps all of prev's below it: a commit that changes one file of 10,000
// makes one new entry, not 10,000, and allocates nothing for the others.
// When no path came or went (the common commit: files edited), the new
// snapshot shares prev's path list and maps, and only the entries of the
// changed folders' trees that differ from prev's are looked at
// (changedSince); otherwise every folder that changed is listed again.
func treeSnapshot(st *filesystem.Storage, tree *object.Tree, prev *snapshot) (*snapshot, error) {
	if s, err := changedSince(st, tree, prev); s != nil || err != nil {
		return s, err
	}
	n := 0
	if prev != nil {
		n = prev.files.Len()
	}
	w := &treeWalk{
		st: st, dir: loose.ObjectsDir(st), prev: prev,
		s: &snapshot{files: layered.New[string, *entry](n), trees: layered.New[string, plumbing.Hash](0),
			raw: layered.New[string, []byte](0)},
	}
	w.s.paths = make([]string, 0, n)
	if err := w.walk(tree.Hash, nil); err != nil {
		return nil, fmt.Errorf("walk tree %s: %w", tree.Hash, err)
	}
	// Git orders a tree's entries so that a walk lists paths in byte
	// order; only a tree Git would not write needs sorting.
	if !sort.StringsAreSorted(w.s.paths) {
		sort.Strings(w.s.paths)
	}
	if !sort.StringsAreSorted(w.s.folders) {
		sort.Strings(w.s.folders)
	}
	return w.s, nil
}

// changedSince is the snapshot of tree made from prev when tree has the
// same folders and files as prev's, each of the same kind (only contents
// changed): prev's maps are cloned and the entries that differ set in the
// clones. nil (and no error) when it cannot be: no prev, or a path came,
// went or changed kind somewhere.
func changedSince(st *filesystem.Storage, tree *object.Tree, prev *snapshot) (*snapshot, error) {
	if prev == nil || prev.trees == nil || prev.raw == nil {
		return nil, nil
	}
	w := &treeWalk{st: st, dir: loose.ObjectsDir(st), prev: prev}
	s := &snapshot{paths: prev.paths, folders: prev.folders}
	var files []*entry
	type folderTree struct {
		folder string
		hash   plumbing.Hash
		raw    []byte
	}
	var trees []folderTree // the folders whose trees changed
	var diff func(folder string, h plumbing.Hash) (bool, error)
	diff = func(folder string, h plumbing.Hash) (bool, error) {
		ph, ok := prev.trees.Get(folder)
		if !ok {
			return false, nil
		}
		if ph == h {
			return true, nil
		}
		old, ok := prev.raw.Get(folder)
		if !ok {
			return false, nil
		}
		data, packed, err := w.readTree(h)
		if err != nil {
			return false, err
		}
		trees = append(trees, folderTree{folder, h, data})
		cur := data
		for len(cur) > 0 || len(old) > 0 {
			if len(cur) == 0 || len(old) == 0 {
				return false, nil // an entry came or went
			}
			mode, name, hash, rest, err := nextTreeEntry(cur)
			if err != nil {
				return false, fmt.Errorf("tree %s: %w", h, err)
			}
			omode, oname, ohash, orest, err := nextTreeEntry(old)
			if err != nil {
				return false, nil // the tree read before is read afresh
			}
			cur, old = rest, orest
			if mode != omode || !bytes.Equal(name, oname) {
				return false, nil
			}
			if hash == ohash {
				continue
			}
			switch mode {
			case filemode.Dir:
				if ok, err := diff(folder+string(name)+"/", hash); !ok || err != nil {
					return false, err
				}
			case filemode.Regular, filemode.Executable:
				p := folder + string(name)
				files = append(files, w.newEntry(p, hash, packed))
			}
		}
		return true, nil
	}
	if ok, err := diff("", tree.Hash); !ok || err != nil {
		if err != nil {
			err = fmt.Errorf("walk tree %s: %w", tree.Hash, err)
		}
		return nil, err
	}
	s.files, s.trees, s.raw = prev.files, prev.trees, prev.raw
	s.patched, s.edited = true, files
	if len(trees) > 0 {
		s.files, s.trees, s.raw = prev.files.Clone(), prev.trees.Clone(), prev.raw.Clone()
		for _, e := range files {
			s.files.Set(e.path, e)
		}
		for _, t := range trees {
			s.trees.Set(t.folder, t.hash)
			s.raw.Set(t.folder, t.raw)
		}
	}
	return s, nil
}

type treeWalk struct {
	st   *filesystem.Storage
	dir  string // loose objects, "" when not on disk
	prev *snapshot
	s    *snapshot
}

// walk lists tree h, at folder prefix ("" for the root, else ending in "/").
func (w *treeWalk) walk(h plumbing.Hash, prefix []byte) error {
	folder := string(prefix)
	w.s.trees.Set(folder, h)
	w.s.folders = append(w.s.folders, folder)
	if w.prev != nil && w.prev.trees != nil {
		if ph, ok := w.prev.trees.Get(folder); ok && ph == h {
			w.keep(folder)
			return nil
		}
	}
	data, packed, err := w.readTree(h)
	if err != nil {
		return err
	}
	w.s.raw.Set(folder, data)
	path := append([]byte(nil), prefix...)
	for len(data) > 0 {
		mode, name, hash, rest, err := nextTreeEntry(data)
		if err != nil {
			return fmt.Errorf("tree %s: %w", h, err)
		}
		data = rest
		path = append(path[:len(prefix)], name...)
		switch mode {
		case filemode.Dir:
			if err := w.walk(hash, append(path, '/')); err != nil {
				return err
			}
		case filemode.Regular, filemode.Executable:
			// string(path) in the index allocates nothing: an unchanged
			// file costs a lookup.
			if pe := w.prev.fileOrNil(string(path)); pe != nil && pe.blob == hash && pe.ikey != "" {
				w.s.add(pe.path, pe)
				continue
			}
			w.s.add(string(path), w.newEntry(string(path), hash, packed))
		}
	}
	return nil
}

// keep takes prev's files and folders below folder as they are.
func (w *treeWalk) keep(folder string) {
	for _, p := range w.prev.under(strings.TrimSuffix(folder, "/")) {
		w.s.add(p, w.prev.file(p))
	}
	below := w.prev.folders
	for i := sort.SearchStrings(below, folder); i < len(below) && strings.HasPrefix(below[i], folder); i++ {
		if f := below[i]; f != folder {
			h, _ := w.prev.trees.Get(f)
			w.s.trees.Set(f, h)
			if data, ok := w.prev.raw.Get(f); ok {
				w.s.raw.Set(f, data)
			}
			w.s.folders = append(w.s.folders, f)
		}
	}
	if data, ok := w.prev.raw.Get(folder); ok {
		w.s.raw.Set(folder, data)
	}
}

// readTree returns tree h's raw entries: from its loose file when it is
// one, else through go-git (a packed tree, packed true), written back in
// Git's form.
func (w *treeWalk) readTree(h plumbing.Hash) (_ []byte, packed bool, _ error) {
	if w.dir != "" {
		if data, err := loose.ReadTree(w.dir, h); !errors.Is(err, loose.ErrNotLoose) {
			return data, false, err
		}
	}
	t, err := object.GetTree(w.st, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		w.st.Reindex() // packed by git gc since the commit was read
		t, err = object.GetTree(w.st, h)
	}
	if err != nil {
		return nil, false, err
	}
	var out []byte
	for _, e := range t.Entries {
		out = fmt.Appendf(out, "%o %s", uint32(e.Mode), e.Name)
		out = append(out, 0)
		out = append(out, e.Hash[:]...)
	}
	return out, true, nil
}

// nextTreeEntry splits the first entry off a tree's raw content.
func nextTreeEntry(data []byte) (mode filemode.FileMode, name []byte, hash plumbing.Hash, rest []byte, err error) {
	sp := bytes.IndexByte(data, ' ')
	if sp < 0 {
		return 0, nil, hash, nil, errors.New("entry without a mode")
	}
	var m uint32
	for _, c := range data[:sp] {
		if c < '0' || c > '7' || m > 1<<24 {
			return 0, nil, hash, nil, fmt.Errorf("entry mode %q is not octal", data[:sp])
		}
		m = m<<3 | uint32(c-'0')
	}
	data = data[sp+1:]
	nul := bytes.IndexByte(data, 0)
	if nul < 0 || len(data) < nul+1+len(hash) {
		return 0, nil, hash, nil, errors.New("entry cut short")
	}
	copy(hash[:], data[nul+1:])
	return filemode.FileMode(m), data[:nul], hash, data[nul+1+len(hash):], nil
}

// newEntry is the entry of a file not listed before, blob h at path: its
// blob is read (internal/loose) when it is needed. A blob of a packed tree
// is most likely packed too (git packs what a commit reaches together), so
// it is asked of go-git at once rather than after looking for its loose
// file (an open that fails, ~5 µs, twice a file); either way finds it
// wherever it is. A lookup that misses after git gc repacked reads the
// pack indexes again, once.
func (w *treeWalk) newEntry(path string, h plumbing.Hash, packed bool) *entry {
	// The content key (the blob's hash as text) is the input key's head:
	// one string, made in one allocation.
	var hx [2 * len(h)]byte
	hex.Encode(hx[:], h[:])
	var b strings.Builder
	b.Grow(len(hx) + 1 + len(path))
	b.Write(hx[:])
	b.WriteByte(' ')
	b.WriteString(path)
	ikey := b.String()
	return &entry{key: ikey[:len(hx)], blob: h, path: path, ikey: ikey, st: w.st, packed: packed}
}

// blobSize is sizeOf for an entry of a Git tree.
func (e *entry) blobSize() (int64, []byte, error) {
	st, h := e.st, e.blob
	if !e.packed {
		n, err := loose.BlobSize(st, h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			st.Reindex()
			n, err = loose.BlobSize(st, h)
		}
		return n, nil, err
	}
	// The object itself: its size comes with it, and so does its content,
	// which the caller keeps rather than finding the blob in the pack
	// again. One over the storage's LargeObjectThreshold (MaxFileSize) is
	// not inflated to tell its size.
	o, err := st.EncodedObject(plumbing.BlobObject, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		st.Reindex()
		o, err = st.EncodedObject(plumbing.BlobObject, h)
	}
	if err != nil {
		return 0, nil, err
	}
	if o.Size() > MaxFileSize {
		return o.Size(), nil, nil
	}
	r, err := o.Reader()
	if err != nil {
		return 0, nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	return int64(len(data)), data, err
}

// readBlob is readData for an entry of a Git tree.
func (e *entry) readBlob() ([]byte, error) {
	read := loose.ReadBlob
	if e.packed {
		read = loose.ReadGitBlob
	}
	data, err := read(e.st, e.blob)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		// git gc packed the loose object since the tree was listed: read
		// the pack indexes again, once.
		e.st.Reindex()
		data, err = loose.ReadBlob(e.st, e.blob)
	}
	return data, err
}

// fileOrNil is the entry of path p in s, or nil (also when s is nil).
func (s *snapshot) fileOrNil(p string) *entry {
	if s == nil {
		return nil
	}
	return s.file(p)
}

// dirSnapshot lists a working folder's regular files, skipping hidden
// folders such as .git; a file is read when it is needed. Its key is its
// size and modification time.
func dirSnapshot(root string) (*snapshot, error) {
	s := &snapshot{files: layered.New[string, *entry](0)}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		key := fmt.Sprintf("%d-%d", fi.Size(), fi.ModTime().UnixNano())
		size := fi.Size()
		s.add(filepath.ToSlash(rel), &entry{key: key, size: func() (int64, []byte, error) { return size, nil, nil }, read: func() ([]byte, error) { return os.ReadFile(p) }})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", root, err)
	}
	sort.Strings(s.paths)
	return s, nil
}
