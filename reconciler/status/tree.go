package status

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// change is the new content of one file of the status branch.
type change struct {
	data    []byte        // nil: remove the file
	hash    plumbing.Hash // blob hash of data; zero when removing
	summary string        // the file's line in the commit message
	origin  Origin        // what caused it, for the trailers
	seq     int64         // staging order, for the order of trailers
}

func newChange(data []byte, summary string) change {
	return change{data: data, hash: plumbing.ComputeHash(plumbing.BlobObject, data), summary: summary}
}

func removal(summary string) change { return change{summary: summary} }

// writeBlob stores data as a blob.
func writeBlob(s storer.EncodedObjectStorer, data []byte) (plumbing.Hash, error) {
	o := s.NewEncodedObject()
	o.SetType(plumbing.BlobObject)
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

// buildTree returns the tree base (zero: empty) with changes applied, keyed
// by slash-separated paths. Only the trees on a changed path are read and
// written again; every other subtree keeps its hash. A tree left empty is
// removed from its parent.
func buildTree(s storer.EncodedObjectStorer, base plumbing.Hash, changes map[string]change) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if !base.IsZero() {
		t, err := object.GetTree(s, base)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read tree %s: %w", base, err)
		}
		entries = append(entries, t.Entries...)
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
	index := make(map[string]int, len(entries))
	for i, e := range entries {
		index[e.Name] = i
	}
	removed := map[string]bool{}
	set := func(name string, mode filemode.FileMode, h plumbing.Hash) {
		if i, ok := index[name]; ok {
			entries[i].Mode, entries[i].Hash = mode, h
			delete(removed, name)
			return
		}
		index[name] = len(entries)
		entries = append(entries, object.TreeEntry{Name: name, Mode: mode, Hash: h})
	}
	for name, c := range files {
		if c.data == nil {
			removed[name] = true
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
		h, err := buildTree(s, subBase, sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if h.IsZero() {
			removed[name] = true
			continue
		}
		set(name, filemode.Dir, h)
	}
	kept := entries[:0]
	for _, e := range entries {
		if !removed[e.Name] {
			kept = append(kept, e)
		}
	}
	if len(kept) == 0 {
		return plumbing.ZeroHash, nil
	}
	sort.Sort(object.TreeEntrySorter(kept))
	t := &object.Tree{Entries: kept}
	o := s.NewEncodedObject()
	if err := t.Encode(o); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(o)
}

// emptyTree stores the empty tree, for a commit that removes every file.
func emptyTree(s storer.EncodedObjectStorer) (plumbing.Hash, error) {
	o := s.NewEncodedObject()
	if err := (&object.Tree{}).Encode(o); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(o)
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

// readBlob returns the content of a blob.
func readBlob(s storer.EncodedObjectStorer, h plumbing.Hash) ([]byte, error) {
	b, err := object.GetBlob(s, h)
	if err != nil {
		return nil, err
	}
	r, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
