package status

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/klauspost/compress/zlib"
)

// A loose object is a new file, and a new file costs the kernel far more
// than its bytes: ~0.6–0.9 ms of system CPU a file on the ext4 disks of the
// machines gitfleet is measured on, against ~8 ms to write 20 MiB to one
// file. A status commit of a rollout rewrites every rolling cluster's file
// (1,000 files a commit in a class bump of 1,000 clusters), so the writer
// writes a commit of packMin files or more as one pack and its index, as
// git fetch and git gc do, instead of as loose objects: two files a
// commit. The packs are merged as they come (keepPacks). Smaller commits
// (one cluster changed: most of them) stay loose, costing no merge.

// packMin is the number of changed files from which a commit's objects
// are written as one pack.
const packMin = 64

// packWriter gathers the objects of one commit (blobs, trees, the commit)
// and writes them as one pack under an objects folder (write). It is a
// storer.EncodedObjectStorer for buildTree: what it is given to write goes
// to the pack; what is read goes to the repository's storer.
type packWriter struct {
	storer.EncodedObjectStorer
	dir     string       // the objects folder
	body    bytes.Buffer // the pack's entries, after its 12-byte header
	entries []packEntry
	seen    map[plumbing.Hash]bool
	z       *zlib.Writer
}

// packEntry is one object of the pack: its name, where its entry starts
// in the pack, and the CRC-32 of the entry (header and deflated data),
// which the index keeps.
type packEntry struct {
	hash plumbing.Hash
	off  uint64
	crc  uint32
}

func newPackWriter(s storer.EncodedObjectStorer, dir string) *packWriter {
	p := &packWriter{EncodedObjectStorer: s, dir: dir, seen: map[plumbing.Hash]bool{}}
	p.z, _ = zlib.NewWriterLevel(&p.body, zlib.BestSpeed) // a valid level
	return p
}

// packTypes are the pack's codes for object types.
var packTypes = map[plumbing.ObjectType]byte{
	plumbing.CommitObject: 1, plumbing.TreeObject: 2, plumbing.BlobObject: 3, plumbing.TagObject: 4,
}

// add puts an object of type t holding data in the pack, once, and
// returns its hash.
func (p *packWriter) add(t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	code, ok := packTypes[t]
	if !ok {
		return plumbing.ZeroHash, fmt.Errorf("pack: no object type %s", t)
	}
	h := objectHash(t, data)
	if p.seen[h] {
		return h, nil
	}
	p.seen[h] = true
	start := p.body.Len()
	// The entry's header: the type and the size, 4 bits of it in the
	// first byte, then 7 bits a byte, each byte but the last with its
	// high bit set.
	size := uint64(len(data))
	b := code<<4 | byte(size&0x0f)
	size >>= 4
	for size > 0 {
		p.body.WriteByte(b | 0x80)
		b, size = byte(size&0x7f), size>>7
	}
	p.body.WriteByte(b)
	p.z.Reset(&p.body)
	_, _ = p.z.Write(data) // a bytes.Buffer does not fail
	_ = p.z.Close()
	p.entries = append(p.entries, packEntry{hash: h, off: uint64(12 + start), crc: crc32.ChecksumIEEE(p.body.Bytes()[start:])})
	return h, nil
}

// write writes the pack and its index into the objects folder's pack/
// folder (writePack) and returns the pack's path without its extension
// and its size.
func (p *packWriter) write() (string, int64, error) {
	if len(p.entries) == 0 {
		return "", 0, nil
	}
	head := packHeader(len(p.entries))
	sum := sha1.New()
	sum.Write(head)
	sum.Write(p.body.Bytes())
	checksum := sum.Sum(nil)
	name := filepath.Join(p.dir, "pack", "pack-"+hex.EncodeToString(checksum))
	err := writePack(name, p.entries, checksum, head, p.body.Bytes(), checksum)
	return name, int64(len(head) + p.body.Len() + len(checksum)), err
}

// packHeader is the 12 bytes a pack of n objects starts with.
func packHeader(n int) []byte {
	head := []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00")
	binary.BigEndian.PutUint32(head[8:], uint32(n))
	return head
}

// writePack writes the pack name.pack, whose bytes are parts, and its
// index name.idx, each from a temporary file, the index first: git takes
// a pack for one once its .pack is there, go-git once both are; neither
// looks at an index alone.
func writePack(name string, entries []packEntry, checksum []byte, parts ...[]byte) error {
	folder := filepath.Dir(name)
	if err := writeFileAside(folder, name+".idx", "tmp_pack_", packIndex(entries, checksum)); err != nil {
		return fmt.Errorf("write %s.idx: %w", filepath.Base(name), err)
	}
	if err := writeFileAside(folder, name+".pack", "tmp_pack_", parts...); err != nil {
		return fmt.Errorf("write %s.pack: %w", filepath.Base(name), err)
	}
	return nil
}

// packIndex encodes a pack's index, version 2: after its magic and
// version, the fan-out table, the sorted names, their entries' CRC-32s,
// their offsets (those past 2 GiB in a table of their own), the pack's
// checksum and its own.
func packIndex(entries []packEntry, checksum []byte) []byte {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b packEntry) int { return bytes.Compare(a.hash[:], b.hash[:]) })
	idx := make([]byte, 0, 8+256*4+len(entries)*28+40)
	idx = append(idx, 0xff, 't', 'O', 'c', 0, 0, 0, 2)
	var fanout [256]uint32
	for _, e := range entries {
		fanout[e.hash[0]]++
	}
	for i, n := 0, uint32(0); i < 256; i++ {
		n += fanout[i]
		idx = binary.BigEndian.AppendUint32(idx, n)
	}
	for _, e := range entries {
		idx = append(idx, e.hash[:]...)
	}
	for _, e := range entries {
		idx = binary.BigEndian.AppendUint32(idx, e.crc)
	}
	var large []uint64
	for _, e := range entries {
		off := uint32(e.off)
		if e.off >= 1<<31 {
			off = 1<<31 | uint32(len(large))
			large = append(large, e.off)
		}
		idx = binary.BigEndian.AppendUint32(idx, off)
	}
	for _, off := range large {
		idx = binary.BigEndian.AppendUint64(idx, off)
	}
	idx = append(idx, checksum...)
	sum := sha1.Sum(idx)
	return append(idx, sum[:]...)
}

// writeFileAside writes parts as the read-only file name in folder (made
// when missing), from a temporary file whose name starts with prefix
// (git's tmp_obj_ or tmp_pack_), moved into place whole: a reader never
// sees a file half written, and a crash leaves at most the temporary one.
func writeFileAside(folder, name, prefix string, parts ...[]byte) error {
	f, tmp, err := createTempIn(folder, prefix)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(folder, 0o755); err == nil {
			f, tmp, err = createTempIn(folder, prefix)
		}
	}
	if err != nil {
		return err
	}
	for _, b := range parts {
		if err == nil {
			_, err = f.Write(b)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// createTempIn creates a new read-only file in folder whose name starts
// with prefix, open for writing.
func createTempIn(folder, prefix string) (*os.File, string, error) {
	for {
		name := filepath.Join(folder, prefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
		if errors.Is(err, fs.ErrExist) {
			continue // a name taken: draw another
		}
		return f, name, err
	}
}

// packMergeMax bounds the packs keepPacks makes: a merge copies both
// packs whole on the writer's way to its next commit, so packs past it
// (a fleet of 10,000 clusters writes ~13 MB a commit while it rolls) are
// left to git gc, and a merge takes well under a second. A variable for
// tests.
var packMergeMax int64 = 256 << 20

// ownPack is a pack this Writer wrote: its path without extension and its
// size in bytes.
type ownPack struct {
	name string
	size int64
}

// keepPacks adds a pack the Writer wrote to those it keeps merged: packs
// are merged so that each is at least twice the size of the next newer
// one (as a binary counter carries), which leaves a few packs however
// many commits were packs (log₂ of their total over the smallest), and
// rewrites each object a few times at most. A reader loads every pack's
// index (go-git reads one in ~2 ms a thousand objects), so a pack a
// commit would cost every fresh reader more as the rollouts add up. The
// packs are merged by copying their entries, not deflating them again.
// It returns the packs to keep, and an error only when a merge failed (the
// packs are then as they were, and their objects all there).
func keepPacks(packs []ownPack, p ownPack) ([]ownPack, error) {
	packs = append(packs, p)
	for len(packs) >= 2 {
		newer, older := packs[len(packs)-1], packs[len(packs)-2]
		if newer.size*2 < older.size || newer.size+older.size > packMergeMax {
			break
		}
		merged, err := mergePacks([]string{older.name, newer.name})
		if err != nil {
			return packs, err
		}
		packs = packs[:len(packs)-2]
		if merged.name != "" { // else git gc had merged both into its own
			packs = append(packs, merged)
		}
	}
	return packs, nil
}

// mergePacks writes one pack of every object of the packs olds (paths
// without extension, of packs written by packWriter or mergePacks), each
// once, then removes olds. A pack found missing (git gc merged it into
// its own) adds nothing.
func mergePacks(olds []string) (ownPack, error) {
	type part struct {
		file    *os.File
		entries []packEntry // the entries to copy, by offset
		ends    []uint64    // where each entry ends
	}
	var parts []part
	defer func() {
		for _, p := range parts {
			p.file.Close()
		}
	}()
	seen := map[plumbing.Hash]bool{}
	n := 0
	var present []string
	for _, old := range olds {
		entries, err := readPackIndex(old + ".idx")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return ownPack{}, err
		}
		f, err := os.Open(old + ".pack")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return ownPack{}, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return ownPack{}, err
		}
		present = append(present, old)
		slices.SortFunc(entries, func(a, b packEntry) int { return cmp.Compare(a.off, b.off) })
		pt := part{file: f}
		for i, e := range entries {
			end := uint64(fi.Size()) - sha1.Size
			if i+1 < len(entries) {
				end = entries[i+1].off
			}
			if seen[e.hash] || end <= e.off {
				continue
			}
			seen[e.hash] = true
			pt.entries = append(pt.entries, e)
			pt.ends = append(pt.ends, end)
		}
		parts = append(parts, pt)
		n += len(pt.entries)
	}
	if len(present) == 0 {
		return ownPack{}, nil
	}
	folder := filepath.Dir(present[0])
	f, tmp, err := createTempIn(folder, "tmp_pack_")
	if err != nil {
		return ownPack{}, fmt.Errorf("merge packs: %w", err)
	}
	fail := func(err error) (ownPack, error) {
		f.Close()
		_ = os.Remove(tmp)
		return ownPack{}, fmt.Errorf("merge packs: %w", err)
	}
	sum := sha1.New()
	out := bufio.NewWriterSize(io.MultiWriter(f, sum), 1<<20)
	if _, err := out.Write(packHeader(n)); err != nil {
		return fail(err)
	}
	off := uint64(12)
	merged := make([]packEntry, 0, n)
	for _, pt := range parts {
		for i, e := range pt.entries {
			size := pt.ends[i] - e.off
			if _, err := io.Copy(out, io.NewSectionReader(pt.file, int64(e.off), int64(size))); err != nil {
				return fail(err)
			}
			merged = append(merged, packEntry{hash: e.hash, off: off, crc: e.crc})
			off += size
		}
	}
	if err := out.Flush(); err != nil {
		return fail(err)
	}
	checksum := sum.Sum(nil)
	if _, err := f.Write(checksum); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return ownPack{}, fmt.Errorf("merge packs: %w", err)
	}
	name := filepath.Join(folder, "pack-"+hex.EncodeToString(checksum))
	if err := writeFileAside(folder, name+".idx", "tmp_pack_", packIndex(merged, checksum)); err != nil {
		_ = os.Remove(tmp)
		return ownPack{}, fmt.Errorf("merge packs: %w", err)
	}
	if err := os.Rename(tmp, name+".pack"); err != nil {
		_ = os.Remove(tmp)
		_ = os.Remove(name + ".idx")
		return ownPack{}, fmt.Errorf("merge packs: %w", err)
	}
	// The old packs go, each .pack before its .idx: go-git finds packs by
	// their .pack, git by their .idx, and git skips an index whose pack
	// is gone.
	for _, old := range present {
		if old == name {
			continue // the same objects: the merge wrote the same pack
		}
		_ = os.Remove(old + ".pack")
		_ = os.Remove(old + ".idx")
	}
	return ownPack{name: name, size: int64(off) + sha1.Size}, nil
}

// readPackIndex reads the entries of a version-2 pack index.
func readPackIndex(path string) ([]packEntry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	bad := fmt.Errorf("%s: not a version-2 pack index", path)
	const head = 8 + 256*4
	if len(data) < head+40 || !bytes.Equal(data[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		return nil, bad
	}
	n := int(binary.BigEndian.Uint32(data[head-4:]))
	names, crcs, offs := head, head+20*n, head+24*n
	large := head + 28*n
	if len(data) < large+40 {
		return nil, bad
	}
	entries := make([]packEntry, n)
	for i := range entries {
		e := &entries[i]
		copy(e.hash[:], data[names+20*i:])
		e.crc = binary.BigEndian.Uint32(data[crcs+4*i:])
		off := binary.BigEndian.Uint32(data[offs+4*i:])
		e.off = uint64(off)
		if off&(1<<31) != 0 {
			at := large + 8*int(off&^(1<<31))
			if at+8 > len(data)-40 {
				return nil, bad
			}
			e.off = binary.BigEndian.Uint64(data[at:])
		}
	}
	return entries, nil
}
