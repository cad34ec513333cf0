package status

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/helper/chroot"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// The status writer's commits leave each cluster file as a loose object,
// and a restarting daemon reads all 10,000 of them. go-git reads one
// through its filesystem abstraction (resolving the path's links), with a
// new inflater and a collision-detecting hash each: about 100 µs. readLoose
// opens the file itself with a pooled inflater and checks the object's
// hash with crypto/sha1, about a third of that. Anything it does not find
// loose (a packed object, a storage not on disk) is go-git's to read.

// objectsDir is the objects folder of a storer on the operating system's
// file system, "" for any other storer.
func objectsDir(s storer.EncodedObjectStorer) string {
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

// errNotLoose: the object is not a loose file under dir.
var errNotLoose = errors.New("not a loose object")

// readLoose returns the content of blob h from its loose file under dir.
func readLoose(dir string, h plumbing.Hash) ([]byte, error) {
	hex := h.String()
	f, err := os.Open(filepath.Join(dir, hex[:2], hex[2:]))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNotLoose
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src := bufio.NewReaderSize(f, 4096)
	var z io.ReadCloser
	if v := inflaters.Get(); v != nil {
		z = v.(io.ReadCloser)
		err = z.(zlib.Resetter).Reset(src, nil)
	} else {
		z, err = zlib.NewReader(src)
	}
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", hex, err)
	}
	defer inflaters.Put(z)
	var head [32]byte // "blob <size>" and a NUL
	n, nul := 0, -1
	for nul < 0 && n < len(head) {
		m, err := z.Read(head[n:])
		n += m
		nul = bytes.IndexByte(head[:n], 0)
		if err != nil && nul < 0 {
			return nil, fmt.Errorf("object %s: %w", hex, err)
		}
	}
	typ, size, ok := bytes.Cut(head[:max(nul, 0)], []byte(" "))
	if nul < 0 || !ok || string(typ) != "blob" {
		return nil, fmt.Errorf("object %s: not a blob", hex)
	}
	want, err := strconv.Atoi(string(size))
	if err != nil || want < 0 {
		return nil, fmt.Errorf("object %s: bad size %q", hex, size)
	}
	data := make([]byte, want)
	got := copy(data, head[nul+1:n])
	if got < want {
		if _, err := io.ReadFull(z, data[got:]); err != nil {
			return nil, fmt.Errorf("object %s: %w", hex, err)
		}
	}
	sum := sha1.New()
	sum.Write(head[:nul+1])
	sum.Write(data)
	if !bytes.Equal(sum.Sum(nil), h[:]) {
		return nil, fmt.Errorf("object %s: content does not match its hash: the object file is damaged (git fsck names what is)", hex)
	}
	return data, nil
}

// Each status commit writes a loose object per changed cluster file and
// tree: in a class bump of 1,000 clusters, go-git's writer (deflate at the
// default level, a collision-detecting hash) was a quarter of the whole
// process's CPU. writeLoose writes the same file as git and go-git do —
// "<type> <size>\0<data>" deflated, under objects/<2 hex>/<38 hex>,
// read-only, moved into place from a temporary file — with the fastest
// deflate level (any level is valid zlib for git) and crypto/sha1, and
// with as few system calls as that allows: the object is deflated in
// memory and written at once, the temporary file is made read-only as it
// is created, and its folder is made only when the create says it is
// missing (lstat, open, write, close, rename: five, down from nine).

type deflater struct {
	z   *zlib.Writer
	buf bytes.Buffer
}

var deflaters = sync.Pool{New: func() any {
	d := &deflater{}
	d.z, _ = zlib.NewWriterLevel(&d.buf, zlib.BestSpeed)
	return d
}}

// writeLoose stores data as a loose object of type t under dir (an
// objects folder) unless it is there already, and returns its hash.
func writeLoose(dir string, t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	h := objectHash(t, data)
	hex := h.String()
	folder := filepath.Join(dir, hex[:2])
	file := filepath.Join(folder, hex[2:])
	if _, err := os.Lstat(file); err == nil {
		return h, nil // content-addressed: the same object
	}
	d := deflaters.Get().(*deflater)
	defer deflaters.Put(d)
	d.buf.Reset()
	d.z.Reset(&d.buf)
	_, _ = d.z.Write(objectHeader(t, data)) // a bytes.Buffer does not fail
	_, _ = d.z.Write(data)
	_ = d.z.Close()

	f, tmp, err := createTemp(folder)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(folder, 0o755); err == nil {
			f, tmp, err = createTemp(folder)
		}
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write object %s: %w", hex, err)
	}
	_, err = f.Write(d.buf.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return plumbing.ZeroHash, fmt.Errorf("write object %s: %w", hex, err)
	}
	return h, nil
}

// createTemp creates a new read-only file in folder for an object being
// written (git's tmp_obj_ prefix), open for writing.
func createTemp(folder string) (*os.File, string, error) {
	for {
		name := filepath.Join(folder, "tmp_obj_"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
		if errors.Is(err, fs.ErrExist) {
			continue // a name taken: draw another
		}
		return f, name, err
	}
}

func objectHeader(t plumbing.ObjectType, data []byte) []byte {
	return fmt.Appendf(nil, "%s %d\x00", t, len(data))
}

// objectHash is Git's name for an object of type t holding data, hashed
// with crypto/sha1 (go-git's plumbing.ComputeHash detects collisions, at
// three times the cost, on content the Writer made itself).
func objectHash(t plumbing.ObjectType, data []byte) plumbing.Hash {
	sum := sha1.New()
	sum.Write(objectHeader(t, data))
	sum.Write(data)
	var h plumbing.Hash
	copy(h[:], sum.Sum(nil))
	return h
}
