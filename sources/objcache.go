package sources

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/gitfleet/gitfleet/internal/privfile"
	"github.com/gitfleet/gitfleet/internal/varint"
	"github.com/gitfleet/gitfleet/schemas"
)

// objectCache keeps what validation decoded each good file into
// (schemas.KnownDoc: every document's value in the value codec's bytes,
// field lines, kind and name), by the file's content key, in a file beside
// the verdicts (Options.KeepObjects: `gitfleet plan`, `validate --rev`;
// Options.ObjectsOnce: a daemon's start). A later run then takes a file's
// objects from it without reading the blob or its YAML — only the codec's
// decode into Go types is done again — so a CI job planning one pull
// request after another parses only the files that changed. Whether a
// file passed the checks is still the verdicts' word: an entry is used
// only for a file they call good under the same policies.
//
// The file names the build that wrote it (a file of another build is an
// empty cache), is replaced by rename (mode 0600), and keeps the newest
// entries up to maxObjectBytes: those this process used or added first,
// then the rest of what is on disk when it writes.
type objectCache struct {
	mu    sync.Mutex
	file  string
	index map[string]string // content key -> entry (a slice of the file read, or new)
	mine  []string          // keys used or added by this process, in order
	seen  map[string]bool   // keys in mine
	added int
	// once (Options.ObjectsOnce): decode copies what it reads, and
	// retire ends the cache's use after one validation; gone is set
	// then, and the cache has nothing after.
	once, gone bool
}

// objectMagic starts an object cache file; the build's identity follows.
// Each entry is framed by its length and followed by its CRC-32C
// (Castagnoli, big-endian): a byte changed on disk fails the check, and the
// file is not trusted, rather than decoding into another fleet.
const objectMagic = "gitfleet-objects 2\n"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// entrySum is the check written after an entry, summed over the entry's
// own bytes: crc32 only reads them, and a []byte(entry) would copy every
// entry of the file once more as it is read.
func entrySum(b []byte, entry string) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Update(0, crcTable, unsafe.Slice(unsafe.StringData(entry), len(entry))))
}

// maxObjectBytes bounds the file: ~0.8 KiB a cluster file, so many times
// what a fleet of 10,000 clusters needs.
var maxObjectBytes = 128 << 20

// objectCacheFile is where the objects of verdict file f are kept.
func objectCacheFile(f string) string { return f + ".objects" }

// loadObjects reads file's entries, if this very build wrote it. A missing,
// damaged or foreign file is an empty cache.
func loadObjects(file string) *objectCache {
	c := &objectCache{file: file, index: map[string]string{}, seen: map[string]bool{}}
	if buildIdentity() == "" {
		c.file = "" // a build that cannot name itself keeps nothing
		return c
	}
	if data, err := os.ReadFile(file); err == nil {
		// One string of the whole file: entries, their keys and what get
		// hands out (kinds, names, field positions, encoded values) are
		// slices of it, not a copy each.
		c.index = parseObjects(string(data))
	}
	return c
}

// parseObjects indexes the entries of a cache file by key; empty when the
// file is not this build's or is damaged.
func parseObjects(data string) map[string]string {
	body, ok := strings.CutPrefix(data, objectMagic+buildIdentity()+"\n")
	if !ok {
		return map[string]string{}
	}
	index := map[string]string{}
	r := reader{s: body, ok: true}
	for r.ok && len(r.s) > 0 {
		entry := r.str()
		var sum [4]byte // on the stack: no allocation an entry
		if !r.ok || len(r.s) < 4 || r.s[:4] != string(entrySum(sum[:0], entry)) {
			return map[string]string{} // damaged: trust none of it
		}
		r.s = r.s[4:]
		e := reader{s: entry, ok: true}
		if key := e.str(); e.ok {
			index[key] = entry
		}
	}
	if !r.ok {
		return map[string]string{} // damaged: trust none of it
	}
	return index
}

// has reports whether key has an entry (for any policies).
func (c *objectCache) has(key string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.index[key]
	return ok && !c.gone
}

// get returns the docs kept for key under policies polKey.
func (c *objectCache) get(key, polKey string) ([]schemas.KnownDoc, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	entry, ok := c.index[key]
	ok = ok && !c.gone
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	// Its kinds, names, encoded values and field positions are slices of
	// the entry, not a copy each.
	r := reader{s: entry, ok: true}
	r.str() // the key
	if r.str() != polKey || !r.ok {
		return nil, false
	}
	docs := make([]schemas.KnownDoc, r.count())
	for i := range docs {
		d := &docs[i]
		d.Kind, d.Name, d.Line = r.str(), r.str(), r.num()
		d.Encoded = r.str()
		var ok bool
		if d.Lines, ok = schemas.LinesFromEncoding(r.str()); !ok || !r.ok {
			return nil, false
		}
	}
	if !r.ok || len(r.s) != 0 {
		return nil, false
	}
	c.mu.Lock()
	c.use(key)
	c.mu.Unlock()
	return docs, true
}

// decode gives the objects of file path from docs (get's). An ObjectsOnce
// cache's share no bytes with the file: a daemon keeps them for its life,
// and a slice of an entry would keep every entry.
func (c *objectCache) decode(path string, docs []schemas.KnownDoc) ([]schemas.Object, bool) {
	if c.once {
		return schemas.DecodeKnownCopy(path, docs)
	}
	return schemas.DecodeKnown(path, docs)
}

// put keeps docs for key under policies polKey.
func (c *objectCache) put(key, polKey string, docs []schemas.KnownDoc) {
	if c == nil || c.file == "" {
		return
	}
	b := appendStr(nil, key)
	b = appendStr(b, polKey)
	b = binary.AppendUvarint(b, uint64(len(docs)))
	for _, d := range docs {
		b = appendStr(b, d.Kind)
		b = appendStr(b, d.Name)
		b = binary.AppendUvarint(b, uint64(d.Line))
		b = appendStr(b, d.Encoded)
		b = appendStr(b, d.Lines.Encoding())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return
	}
	c.index[key] = string(b)
	c.use(key)
	c.added++
}

// retire ends an ObjectsOnce cache's use: it reports true the first time,
// when the caller is to run retired (in the background); nothing is found
// or kept from then on.
func (c *objectCache) retire() bool {
	if c == nil || !c.once {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return false
	}
	c.gone = true
	return true
}

// retired writes what the cache's one validation used or added (save),
// then lets go of every entry.
func (c *objectCache) retired() {
	_ = c.save() // failing to write costs the next start the parse, as a lost file does
	c.mu.Lock()
	defer c.mu.Unlock()
	c.index, c.mine, c.seen, c.added = nil, nil, nil, 0
}

// use records that this process used key. Called with mu held.
func (c *objectCache) use(key string) {
	if !c.seen[key] {
		c.seen[key] = true
		c.mine = append(c.mine, key)
	}
}

// save writes the file when this process added entries: its own first,
// then those of the file as it is now (another run may have written it
// meanwhile), up to maxObjectBytes.
func (c *objectCache) save() error {
	if c == nil || c.file == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.added == 0 {
		return nil
	}
	var disk map[string]string
	if data, err := os.ReadFile(c.file); err == nil {
		disk = parseObjects(string(data))
	}
	if err := os.MkdirAll(filepath.Dir(c.file), 0o700); err != nil {
		return fmt.Errorf("object cache: %w", err)
	}
	// Written as it goes: at 10,000 clusters the file is ~8 MiB, which a
	// cold plan would otherwise hold twice at its end.
	err := privfile.WriteFunc(c.file, func(w io.Writer) error {
		size := len(objectMagic) + len(buildIdentity()) + 1
		if _, err := io.WriteString(w, objectMagic+buildIdentity()+"\n"); err != nil {
			return err
		}
		written := map[string]bool{}
		var frame []byte
		write := func(key, entry string) (bool, error) {
			if written[key] {
				return true, nil
			}
			frame = binary.AppendUvarint(frame[:0], uint64(len(entry)))
			if size+len(frame)+len(entry)+4 > maxObjectBytes {
				return false, nil
			}
			written[key] = true
			size += len(frame) + len(entry) + 4
			if _, err := w.Write(frame); err != nil {
				return false, err
			}
			if _, err := io.WriteString(w, entry); err != nil {
				return false, err
			}
			_, err := w.Write(entrySum(frame[:0], entry))
			return err == nil, err
		}
		for _, k := range c.mine {
			if more, err := write(k, c.index[k]); !more {
				return err
			}
		}
		for k, e := range disk {
			if more, err := write(k, e); !more {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("object cache: %w", err)
	}
	c.added = 0
	return nil
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader reads an entry; ok turns false at the first thing that does not
// fit, and stays false. What str returns is a slice of s.
type reader struct {
	s  string
	ok bool
}

func (r *reader) num() int {
	if !r.ok {
		return 0
	}
	n, w := varint.Uvarint(r.s)
	if w <= 0 || n > 1<<31 {
		r.ok, r.s = false, ""
		return 0
	}
	r.s = r.s[w:]
	return int(n)
}

// count reads the length of a list that follows, which cannot have more
// elements than bytes left: a damaged count allocates nothing large.
func (r *reader) count() int {
	n := r.num()
	if n > len(r.s) {
		r.ok, r.s = false, ""
		return 0
	}
	return n
}

func (r *reader) str() string {
	n := r.num()
	if !r.ok || n > len(r.s) {
		r.ok, r.s = false, ""
		return ""
	}
	v := r.s[:n]
	r.s = r.s[n:]
	return v
}
