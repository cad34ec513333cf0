// Package loose reads Git's loose objects directly: the daemon reads
// thousands of them at a start, and go-git's reader costs about three times
// as much per object.
package loose

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/helper/chroot"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/klauspost/compress/zlib"
)

// The status writer's commits leave each cluster file as a loose object,
// and a restarting daemon reads all 10,000 of them, and the source's
// 10,000 cluster files, loose too in a repository git has not packed. go-git reads one
// through its filesystem abstraction (resolving the path's links), with a
// new inflater and a collision-detecting hash each: about 100 µs. Read
// opens the file itself with a pooled inflater and checks the object's
// hash with crypto/sha1, about a third of that. Anything it does not find
// loose (a packed object, a storage not on disk) is go-git's to read.

// ObjectsDir is the objects folder of a storer on the operating system's
// file system, "" for any other storer.
func ObjectsDir(s storer.EncodedObjectStorer) string {
	st, ok := s.(*filesystem.Storage)
	if !ok {
		return ""
	}
	if root, ok := osRoot(st.Filesystem()); ok {
		return filepath.Join(root, "objects")
	}
	return ""
}

// osRoot is f's root when f is the operating system's file system under
// go-billy's chroot (and polyfill) wrappers.
func osRoot(f billy.Filesystem) (string, bool) {
	if b, ok := f.(*osfs.BoundOS); ok {
		return b.Root(), true
	}
	c, ok := f.(*chroot.ChrootHelper)
	if !ok {
		return "", false
	}
	var under billy.Basic = c
	for range 4 {
		u, ok := under.(interface{ Underlying() billy.Basic })
		if !ok {
			return "", false
		}
		switch under = u.Underlying(); under.(type) {
		case *osfs.ChrootOS:
			return c.Root(), true
		}
	}
	return "", false
}

var inflaters sync.Pool // of io.ReadCloser that are zlib.Resetter

// ErrNotLoose: the object is not a loose file under dir.
var ErrNotLoose = errors.New("not a loose object")

// ReadBlob returns the content of blob h: from its loose file when s is on
// disk and it is one, else through go-git (a packed blob, another storer).
func ReadBlob(s storer.EncodedObjectStorer, h plumbing.Hash) ([]byte, error) {
	if dir := ObjectsDir(s); dir != "" {
		if data, err := Read(dir, h); !errors.Is(err, ErrNotLoose) {
			return data, err
		}
	}
	return ReadGitBlob(s, h)
}

// ReadGitBlob returns the content of blob h through go-git, loose or
// packed.
func ReadGitBlob(s storer.EncodedObjectStorer, h plumbing.Hash) ([]byte, error) {
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

// Read returns the content of blob h from its loose file under dir.
func Read(dir string, h plumbing.Hash) ([]byte, error) { return read(dir, h, "blob") }

// ReadTree returns the content of tree h from its loose file under dir:
// its entries as Git writes them ("<mode> <name>", a NUL, the 20-byte
// hash), for a caller that walks a large tree without go-git's decoding
// of every entry.
func ReadTree(dir string, h plumbing.Hash) ([]byte, error) { return read(dir, h, "tree") }

// BlobSize is the size of blob h: from its loose file's header when s is
// on disk and it is one (without inflating the rest), else go-git's.
func BlobSize(s storer.EncodedObjectStorer, h plumbing.Hash) (int64, error) {
	if dir := ObjectsDir(s); dir != "" {
		o, err := open(dir, h, "blob")
		if err == nil {
			o.close()
			return int64(o.size), nil
		}
		if !errors.Is(err, ErrNotLoose) {
			return 0, err
		}
	}
	return s.EncodedObjectSize(h)
}

// looseObject is a loose object opened and its header read.
type looseObject struct {
	f    *os.File
	z    io.ReadCloser
	head [32]byte // "blob <size>" (or "tree <size>"), a NUL, content
	n    int      // bytes of head read
	nul  int      // the NUL's index in head
	size int      // the content's size, from the header
}

func open(dir string, h plumbing.Hash, kind string) (_ *looseObject, err error) {
	hex := h.String()
	f, err := os.Open(filepath.Join(dir, hex[:2], hex[2:]))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotLoose
	}
	if err != nil {
		return nil, err
	}
	o := &looseObject{f: f, nul: -1}
	defer func() {
		if err != nil {
			o.close()
		}
	}()
	src := bufio.NewReaderSize(f, 4096)
	if v := inflaters.Get(); v != nil {
		o.z = v.(io.ReadCloser)
		err = o.z.(zlib.Resetter).Reset(src, nil)
	} else {
		o.z, err = zlib.NewReader(src)
	}
	if err != nil {
		o.z = nil // a Reset that failed leaves it unusable
		return nil, fmt.Errorf("object %s: %w", hex, err)
	}
	for o.nul < 0 && o.n < len(o.head) {
		m, err := o.z.Read(o.head[o.n:])
		o.n += m
		o.nul = bytes.IndexByte(o.head[:o.n], 0)
		if err != nil && o.nul < 0 {
			return nil, fmt.Errorf("object %s: %w", hex, err)
		}
	}
	typ, size, ok := bytes.Cut(o.head[:max(o.nul, 0)], []byte(" "))
	if o.nul < 0 || !ok || string(typ) != kind {
		return nil, fmt.Errorf("object %s: not a %s", hex, kind)
	}
	if o.size, err = strconv.Atoi(string(size)); err != nil || o.size < 0 {
		return nil, fmt.Errorf("object %s: bad size %q", hex, size)
	}
	return o, nil
}

func (o *looseObject) close() {
	if o.z != nil {
		inflaters.Put(o.z)
		o.z = nil
	}
	o.f.Close()
}

func read(dir string, h plumbing.Hash, kind string) ([]byte, error) {
	o, err := open(dir, h, kind)
	if err != nil {
		return nil, err
	}
	defer o.close()
	data := make([]byte, o.size)
	got := copy(data, o.head[o.nul+1:o.n])
	if got < o.size {
		if _, err := io.ReadFull(o.z, data[got:]); err != nil {
			return nil, fmt.Errorf("object %s: %w", h, err)
		}
	}
	sum := sha1.New()
	sum.Write(o.head[:o.nul+1])
	sum.Write(data)
	if !bytes.Equal(sum.Sum(nil), h[:]) {
		return nil, fmt.Errorf("object %s: content does not match its hash: the object file is damaged (git fsck names what is)", h)
	}
	return data, nil
}
