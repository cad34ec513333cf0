package sources

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gitfleet/gitfleet/internal/buildid"
	"github.com/gitfleet/gitfleet/internal/privfile"
)

// verdicts remembers which files passed the schema checks and which
// objects passed the policies, by the hash of what decided it: this
// gitfleet build, the file's path and content and, for policies, the
// content of every policy file. A file or object it knows is decoded
// without the CUE checks (schemas.ParseKnownGood, CheckOptions); anything
// else is checked in full. Only successes are kept: an error is always
// found again, with its file, line and message.
//
// A daemon keeps them in memory across revisions; with a file they also
// outlive the process (gitfleet validate and plan use the user's cache
// directory), bounded to maxVerdicts entries, newest kept.
type verdicts struct {
	mu    sync.Mutex
	m     map[verdictKey]uint64 // key -> last use (a counter)
	clock uint64
	added int // entries not yet written to file
	file  string
	saved time.Time // when saveEvery last wrote the file
	// busy is set while saveEvery's write runs; wg waits for it.
	// stopped: Repo.Close is writing the rest, so no write starts again.
	busy, stopped bool
	wg            sync.WaitGroup
}

type verdictKey [16]byte

// maxVerdicts bounds the entries kept on disk (16 bytes each: 8 MiB),
// many times what a fleet of 10,000 clusters uses; memory keeps at most
// twice as many (add trims back to maxVerdicts, newest kept).
const maxVerdicts = 1 << 19

// verdictMagic starts a verdict file; the build's identity follows it.
const verdictMagic = "gitfleet-verdicts 1\n"

func newVerdicts() *verdicts { return &verdicts{m: map[verdictKey]uint64{}} }

// loadVerdicts reads file's verdicts, if it was written by this very
// build. A missing, damaged or foreign file is an empty cache: it never
// fails a validation.
func loadVerdicts(file string) *verdicts {
	v := newVerdicts()
	if buildIdentity() == "" {
		return v // a build that cannot name itself keeps its verdicts in memory
	}
	v.file = file
	if data, err := os.ReadFile(file); err == nil {
		// The file's entries keep their order (oldest first).
		for i, k := range fileKeys(data) {
			if _, ok := v.m[k]; !ok {
				v.m[k] = uint64(i)
			}
			v.clock = uint64(i) + 1
		}
	}
	return v
}

// fileKeys returns the entries of a verdict file's content, oldest first;
// none when it is not this build's or is damaged.
func fileKeys(data []byte) []verdictKey {
	header := verdictMagic + buildIdentity() + "\n"
	body, ok := bytes.CutPrefix(data, []byte(header))
	if !ok || len(body)%len(verdictKey{}) != 0 {
		return nil
	}
	keys := make([]verdictKey, len(body)/len(verdictKey{}))
	for i := range keys {
		copy(keys[i][:], body[i*len(verdictKey{}):])
	}
	return keys
}

// key hashes parts with the build's identity.
func (v *verdicts) key(parts ...string) verdictKey {
	h := sha256.New()
	h.Write([]byte(buildIdentity()))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	var k verdictKey
	copy(k[:], h.Sum(nil))
	return k
}

// good reports whether k is known, and marks it used.
func (v *verdicts) good(k verdictKey) bool {
	if v == nil {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.m[k]; !ok {
		return false
	}
	v.clock++
	v.m[k] = v.clock
	return true
}

// add records k as a success.
func (v *verdicts) add(k verdictKey) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clock++
	if _, ok := v.m[k]; !ok {
		v.added++
	}
	v.m[k] = v.clock
	if len(v.m) > 2*maxVerdicts {
		v.trimLocked(maxVerdicts)
	}
}

// trimLocked keeps the n most recently used entries.
func (v *verdicts) trimLocked(n int) {
	used := v.usesLocked()
	if len(used) <= n {
		return
	}
	sortByUse(used)
	for _, u := range used[:len(used)-n] {
		delete(v.m, u.key)
	}
}

// verdictUse is an entry with its last use.
type verdictUse struct {
	key  verdictKey
	used uint64
}

// usesLocked copies the entries out, in no order.
func (v *verdicts) usesLocked() []verdictUse {
	used := make([]verdictUse, 0, len(v.m))
	for k, t := range v.m {
		used = append(used, verdictUse{k, t})
	}
	return used
}

// sortByUse sorts entries least recently used first.
func sortByUse(used []verdictUse) {
	slices.SortFunc(used, func(a, b verdictUse) int { return cmp.Compare(a.used, b.used) })
}

// save writes the verdicts to their file when this process learnt new
// ones: what another run wrote meanwhile is kept (as older than this
// process's entries), the newest maxVerdicts are kept, and the file is
// replaced by rename, so concurrent runs never see half a file (at worst
// one run's additions are lost). The lock is held only to copy the
// entries out: a daemon's revision asks the verdicts while its
// background write runs.
func (v *verdicts) save() error {
	if v == nil || v.file == "" {
		return nil
	}
	v.mu.Lock()
	added := v.added
	var mine []verdictUse
	if added > 0 {
		mine = v.usesLocked()
	}
	v.mu.Unlock()
	if added == 0 {
		return nil
	}
	sortByUse(mine)
	var theirs []verdictKey
	if data, err := os.ReadFile(v.file); err == nil {
		theirs = fileKeys(data)
	}
	keys := make([]verdictKey, 0, len(theirs)+len(mine))
	if len(theirs) > 0 {
		have := make(map[verdictKey]struct{}, len(mine))
		for _, u := range mine {
			have[u.key] = struct{}{}
		}
		for _, k := range theirs {
			if _, ok := have[k]; !ok {
				keys = append(keys, k)
				have[k] = struct{}{} // a damaged file may repeat one
			}
		}
	}
	for _, u := range mine {
		keys = append(keys, u.key)
	}
	if len(keys) > maxVerdicts {
		keys = keys[len(keys)-maxVerdicts:]
	}
	var buf bytes.Buffer
	buf.Grow(len(verdictMagic) + 80 + len(keys)*len(verdictKey{}))
	buf.WriteString(verdictMagic + buildIdentity() + "\n")
	for _, k := range keys {
		buf.Write(k[:])
	}
	dir := filepath.Dir(v.file)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("validation cache: %w", err)
	}
	if err := privfile.Write(v.file, buf.Bytes()); err != nil {
		return fmt.Errorf("validation cache: %w", err)
	}
	v.mu.Lock()
	v.added -= added // what was added meanwhile is for the next write
	v.mu.Unlock()
	return nil
}

// saveEvery is save at most once every d, in the background: a daemon
// validates a revision per commit, and rewriting a file of 10,000
// clusters' verdicts (reading it to merge what other processes wrote,
// writing and syncing the new one: ~20 ms) held up the revision it came
// with, and so that commit's first task. What is not written yet is
// written by the next call past d, or by Repo.Close (which waits for a
// write in progress); a crash in between costs the next start that much
// validation, not correctness.
func (v *verdicts) saveEvery(d time.Duration) {
	if v == nil || v.file == "" {
		return
	}
	v.mu.Lock()
	due := !v.busy && !v.stopped && (v.saved.IsZero() || time.Since(v.saved) >= d)
	if due {
		v.busy = true
		v.wg.Add(1) // under the lock: never after stop began to wait
	}
	v.mu.Unlock()
	if !due {
		return
	}
	go func() {
		defer v.wg.Done()
		_ = v.save() // a cache that cannot be written costs time, not correctness
		v.mu.Lock()
		v.saved, v.busy = time.Now(), false
		v.mu.Unlock()
	}()
}

// stop keeps saveEvery from starting another write and waits for the one
// in progress, if any: Repo.Close then writes the rest itself.
func (v *verdicts) stop() {
	if v == nil {
		return
	}
	v.mu.Lock()
	v.stopped = true
	v.mu.Unlock()
	v.wg.Wait()
}

// buildIdentity names this gitfleet build (internal/buildid).
var buildIdentity = buildid.ID

// DefaultCacheFile is where gitfleet validate and plan keep their
// verdicts: gitfleet/validation under the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache on Linux); "" when there is none.
func DefaultCacheFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "gitfleet", "validation")
}
