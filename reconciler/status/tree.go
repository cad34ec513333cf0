package status

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/gitfleet/gitfleet/internal/loose"
)

// change is the new content of one file of the status branch.
type change struct {
	// status is a cluster's status not encoded yet (SetCluster); data,
	// hash and summary are set when it is (encodePending).
	status  *ClusterStatus
	base    condMarks     // with status: the cluster's conditions before it, as the branch has them or is about to
	data    []byte        // nil: remove the file
	hash    plumbing.Hash // blob hash of data; zero when removing
	summary string        // the file's line in the commit message
	origin  Origin        // what caused it, for the trailers
	seq     int64         // staging order, for the order of trailers
}

func newChange(data []byte, summary string) change {
	return change{data: data, hash: objectHash(plumbing.BlobObject, data), summary: summary}
}

func removal(summary string) change { return change{summary: summary} }

// writeBlob stores data as a blob.
func writeBlob(s storer.EncodedObjectStorer, data []byte) (plumbing.Hash, error) {
	return writeObject(s, plumbing.BlobObject, data)
}

// writeObject stores data as an object of type t: in the commit's pack
// when s is a packWriter, else a loose file written by writeLoose in a
// repository on disk, go-git's writer elsewhere.
func writeObject(s storer.EncodedObjectStorer, t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	if p, ok := s.(*packWriter); ok {
		return p.add(t, data)
	}
	if dir := loose.ObjectsDir(s); dir != "" {
		return writeLoose(dir, t, data)
	}
	o := s.NewEncodedObject()
	o.SetType(t)
	o.SetSize(int64(len(data)))
	w, err := o.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(o)
}

// trees remembers the entries of the trees the Writer last wrote, so the
// next commit does not decode a 10,000-entry clusters/ tree again.
type trees map[plumbing.Hash][]object.TreeEntry

// take returns the entries of tree h (zero: empty) for the caller to
// change. A remembered tree's are handed over and forgotten, not copied
// (at 10,000 clusters a copy was ~0.5 MB of garbage a commit): the commit
// being built remembers them again under the new tree's hash, and one
// that fails reads the tree from the repository next time. Any other is
// decoded and copied (go-git may cache the decoded tree).
func (tc trees) take(s storer.EncodedObjectStorer, h plumbing.Hash) ([]object.TreeEntry, error) {
	if h.IsZero() {
		return nil, nil
	}
	if e, ok := tc[h]; ok {
		delete(tc, h)
		return e, nil
	}
	t, err := object.GetTree(s, h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	return slices.Clone(t.Entries), nil
}

// buildTree returns the tree base (zero: empty) with changes applied, keyed
// by slash-separated paths. Only the trees on a changed path are read and
// written again; every other subtree keeps its hash. A tree left empty is
// removed from its parent. next receives the entries of every tree written.
func buildTree(s storer.EncodedObjectStorer, tc, next trees, base plumbing.Hash, changes map[string]change) (plumbing.Hash, error) {
	entries, err := tc.take(s, base)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	files := map[string]change{}
	dirs := map[string]map[string]change{}
	for p, c := range changes {
		if dir, rest, ok := strings.Cut(p, "/"); ok {
			if dirs[dir] == nil {
				dirs[dir] = map[string]change{}
			}
			dirs[dir][rest] = c
		} else {
			files[p] = c
		}
	}
	index := make(map[string]int, len(files)+len(dirs))
	for i, e := range entries {
		if _, ok := files[e.Name]; ok {
			index[e.Name] = i
		} else if _, ok := dirs[e.Name]; ok {
			index[e.Name] = i
		}
	}
	removed := map[int]bool{} // indexes into entries
	added := false
	drop := func(name string) {
		if i, ok := index[name]; ok {
			removed[i] = true
		}
	}
	set := func(name string, mode filemode.FileMode, h plumbing.Hash) {
		if i, ok := index[name]; ok && entries[i].Mode == mode {
			entries[i].Hash = h
			return
		}
		drop(name) // a file became a folder, or the reverse
		entries = append(entries, object.TreeEntry{Name: name, Mode: mode, Hash: h})
		added = true
	}
	for name, c := range files {
		if c.data == nil {
			drop(name)
			continue
		}
		h, err := writeBlob(s, c.data)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("write %s: %w", name, err)
		}
		set(name, filemode.Regular, h)
	}
	for name, sub := range dirs {
		var subBase plumbing.Hash
		if i, ok := index[name]; ok && entries[i].Mode == filemode.Dir {
			subBase = entries[i].Hash
		}
		h, err := buildTree(s, tc, next, subBase, sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if h.IsZero() {
			drop(name)
			continue
		}
		set(name, filemode.Dir, h)
	}
	if len(removed) > 0 {
		kept := entries[:0]
		for i, e := range entries {
			if !removed[i] {
				kept = append(kept, e)
			}
		}
		entries = kept
	}
	if len(entries) == 0 {
		return plumbing.ZeroHash, nil
	}
	if added {
		slices.SortFunc(entries, compareEntries)
	}
	h, err := writeTree(s, entries)
	if err == nil {
		next[h] = entries
	}
	return h, err
}

// compareEntries orders tree entries as Git does: a folder's name compares
// as if it ended with a slash.
func compareEntries(a, b object.TreeEntry) int {
	an, bn := a.Name, b.Name
	n := min(len(an), len(bn))
	if c := strings.Compare(an[:n], bn[:n]); c != 0 {
		return c
	}
	at, bt := sortTail(a, n), sortTail(b, n)
	return int(at) - int(bt)
}

// sortTail is the byte after the first n of e's sort name, 0 when none.
func sortTail(e object.TreeEntry, n int) byte {
	if n < len(e.Name) {
		return e.Name[n]
	}
	if n == len(e.Name) && e.Mode == filemode.Dir {
		return '/'
	}
	return 0
}

// writeTree encodes a tree the way Git does ("<octal mode> <name>\0<hash>"
// per entry) without go-git's per-entry formatting, which costs more than
// the hashing on a 10,000-entry folder.
func writeTree(s storer.EncodedObjectStorer, entries []object.TreeEntry) (plumbing.Hash, error) {
	bp := treeBufs.Get().(*[]byte)
	defer treeBufs.Put(bp)
	buf := (*bp)[:0]
	defer func() { *bp = buf[:0] }()
	for _, e := range entries {
		if strings.IndexByte(e.Name, 0) >= 0 || e.Name == "" {
			return plumbing.ZeroHash, fmt.Errorf("malformed file name %q", e.Name)
		}
		buf = strconv.AppendUint(buf, uint64(e.Mode), 8)
		buf = append(buf, ' ')
		buf = append(buf, e.Name...)
		buf = append(buf, 0)
		buf = append(buf, e.Hash[:]...)
	}
	return writeObject(s, plumbing.TreeObject, buf)
}

// treeBufs hold the encoding of a tree while it is written (~400 KB for a
// 10,000-entry folder, every commit); writeObject keeps none of it.
var treeBufs = sync.Pool{New: func() any { return new([]byte) }}

// emptyTree stores the empty tree, for a commit that removes every file.
func emptyTree(s storer.EncodedObjectStorer) (plumbing.Hash, error) {
	return writeObject(s, plumbing.TreeObject, nil)
}

// fileHashes lists the blobs of the files the writer owns at tree: fleet.yaml
// and clusters/*.yaml, keyed by path.
func fileHashes(s storer.EncodedObjectStorer, tree plumbing.Hash) (map[string]plumbing.Hash, error) {
	out := map[string]plumbing.Hash{}
	if tree.IsZero() {
		return out, nil
	}
	t, err := object.GetTree(s, tree)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", tree, err)
	}
	for _, e := range t.Entries {
		switch {
		case e.Name == FleetFile && e.Mode.IsFile():
			out[FleetFile] = e.Hash
		case e.Name == ClustersDir && e.Mode == filemode.Dir:
			ct, err := object.GetTree(s, e.Hash)
			if err != nil {
				return nil, fmt.Errorf("read tree %s: %w", ClustersDir, err)
			}
			for _, ce := range ct.Entries {
				if ce.Mode.IsFile() && strings.HasSuffix(ce.Name, ".yaml") {
					out[ClustersDir+"/"+ce.Name] = ce.Hash
				}
			}
		}
	}
	return out, nil
}
