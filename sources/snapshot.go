package sources

import (
	"errors"
	"fmt"
	"github.com/gitfleet/gitfleet/internal/loose"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// snapshot is the list of regular files of a tree — a commit's or a working
// folder's — with a content key per file; contents are read on demand.
type snapshot struct {
	// files are the entries by path; a commit's snapshot shares the
	// entries of the files it did not change with the one before.
	files map[string]*entry
	paths []string // sorted
	// known reports whether an input key (content key and path) was read
	// and parsed before; nil: none was.
	known func(key string) bool
	// fits reports whether content (a key) was found within MaxFileSize
	// before, and fitted records that it was; nil: sizes are always asked.
	fits   func(content string) bool
	fitted func(content string)
}

type entry struct {
	key  string // content hash: the blob hash in Git, sha256 on disk
	read func() ([]byte, error)
	// size is the file's length in bytes, known without reading it.
	size func() (int64, error)
	// Of a Git tree's entry: its blob, and its input key (inputKey),
	// kept so the next revision's snapshot reuses the entry of a file
	// that did not change.
	blob plumbing.Hash
	ikey string
}

// inputKey is the key of the file at p as an input: content and path.
func (e *entry) inputKey(p string) string {
	if e.ikey != "" {
		return e.ikey
	}
	return e.key + " " + p
}

func (s *snapshot) add(p string, e *entry) {
	s.files[p] = e
	s.paths = append(s.paths, p)
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
	e, ok := s.files[p]
	if !ok {
		return nil, fmt.Errorf("%s: %w", p, ErrNotFound)
	}
	data, err := e.read()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return data, nil
}

// treeSnapshot lists a commit tree's regular files without reading them.
// Symbolic links and submodules are skipped. The caller holds the repo lock
// while listing and while reading. A file of prev (nil: none) with the same
// path and blob keeps its entry: a commit that changes one file of 10,000
// makes one new entry, not 10,000.
func treeSnapshot(st *filesystem.Storage, tree *object.Tree, prev *snapshot) (*snapshot, error) {
	// A blob still loose is read directly (internal/loose), the rest by go-git.
	dir := loose.ObjectsDir(st)
	s := &snapshot{files: make(map[string]*entry, len(prevFiles(prev)))}
	s.paths = make([]string, 0, len(prevFiles(prev)))
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("walk tree %s: %w", tree.Hash, err)
		}
		if e.Mode != filemode.Regular && e.Mode != filemode.Executable {
			continue
		}
		if pe, ok := prevFiles(prev)[name]; ok && pe.blob == e.Hash && pe.ikey != "" {
			s.add(name, pe)
			continue
		}
		h := e.Hash
		key := h.String()
		s.add(name, &entry{key: key, blob: h, ikey: key + " " + name, size: func() (int64, error) { return st.EncodedObjectSize(h) }, read: func() ([]byte, error) {
			if dir != "" {
				if data, err := loose.Read(dir, h); !errors.Is(err, loose.ErrNotLoose) {
					return data, err
				}
			}
			b, err := object.GetBlob(st, h)
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				// git gc packed the loose object since the tree was
				// listed: read the pack indexes again, once.
				st.Reindex()
				b, err = object.GetBlob(st, h)
			}
			if err != nil {
				return nil, err
			}
			rd, err := b.Reader()
			if err != nil {
				return nil, err
			}
			defer rd.Close()
			return io.ReadAll(rd)
		}})
	}
	sort.Strings(s.paths)
	return s, nil
}

func prevFiles(prev *snapshot) map[string]*entry {
	if prev == nil {
		return nil
	}
	return prev.files
}

// dirSnapshot lists a working folder's regular files, skipping hidden
// folders such as .git; a file is read when it is needed. Its key is its
// size and modification time.
func dirSnapshot(root string) (*snapshot, error) {
	s := &snapshot{files: map[string]*entry{}}
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
		s.add(filepath.ToSlash(rel), &entry{key: key, size: func() (int64, error) { return size, nil }, read: func() ([]byte, error) { return os.ReadFile(p) }})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", root, err)
	}
	sort.Strings(s.paths)
	return s, nil
}
