package status

import (
	"bytes"
	"crypto/sha1"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/klauspost/compress/zlib"
)

// A status commit of fewer than packMin files (pack.go) writes a loose
// object per changed cluster file and tree. When every commit did, in a
// class bump of 1,000 clusters, go-git's writer (deflate at the default
// level, a collision-detecting hash) was a quarter of the whole process's
// CPU. writeLoose writes the same file as git and go-git do —
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

	if err := writeFileAside(folder, file, "tmp_obj_", d.buf.Bytes()); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write object %s: %w", hex, err)
	}
	return h, nil
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
