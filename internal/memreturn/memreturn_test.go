package memreturn

import (
	"context"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var live, garbage [][]byte

// fill allocates mib MiB in 64 KiB pieces, touching each.
func fill(mib int) [][]byte {
	var out [][]byte
	for range mib * 16 {
		b := make([]byte, 64<<10)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		out = append(out, b)
	}
	return out
}

// rss is the process's resident set in MiB (VmRSS).
func rss(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status: ", err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb >> 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// A quiet process that holds 200 MiB and freed 150 MiB more keeps those
// pages under Go's defaults (they are under its heap goal); Run gives
// them back once it has been quiet, and the resident set falls.
func TestQuietProcessGivesPagesBack(t *testing.T) {
	t.Setenv("GOGC", "")
	live = fill(200)
	garbage = fill(150)
	garbage = nil
	runtime.GC()
	before := rss(t)
	var returned atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Options{Quiet: 200 * time.Millisecond, Returned: func(free uint64) { returned.Add(1) }})
	}()
	for deadline := time.Now().Add(30 * time.Second); returned.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no pages given back within 30 s of a quiet process")
		}
	}
	after := rss(t)
	cancel()
	<-done
	if before-after < 100 {
		t.Errorf("resident set %d MiB before, %d MiB after: want at least 100 MiB given back", before, after)
	}
	time.Sleep(time.Second)
	if n := returned.Load(); n != 1 {
		t.Errorf("pages given back %d times with no collection between, want once", n)
	}
	runtime.KeepAlive(live)
	live = nil
}

// A process that allocates all the time collects every few milliseconds:
// Run leaves it alone, whatever it holds free.
func TestBusyProcessIsLeftAlone(t *testing.T) {
	t.Setenv("GOGC", "")
	live = fill(64)
	defer func() { live = nil }()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var returned atomic.Int64
	go Run(ctx, Options{Quiet: 500 * time.Millisecond, MinFree: 1 << 20, Returned: func(uint64) { returned.Add(1) }})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	// The longest time without a collection: on a machine so loaded that
	// this goroutine waits for a core longer than Quiet, the process is
	// quiet for that long and giving pages back is right.
	cycles := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	var last uint64
	lastAt, longest := time.Now(), time.Duration(0)
	for ctx.Err() == nil {
		garbage = fill(4)
		metrics.Read(cycles)
		// Measured before a new collection resets the clock: the gap
		// a collection ends (FreeOSMemory's own, say) counts too.
		now := time.Now()
		longest = max(longest, now.Sub(lastAt))
		if c := cycles[0].Value.Uint64(); c != last {
			last, lastAt = c, now
		}
	}
	garbage = nil
	runtime.ReadMemStats(&after)
	if after.NumGC-before.NumGC < 20 || longest > 300*time.Millisecond {
		t.Skipf("%d collections in 3 s, %v the longest without one: the test needs a collector busy all along", after.NumGC-before.NumGC, longest)
	}
	if n := returned.Load(); n != 0 {
		t.Errorf("pages given back %d times while the process collected %d times", n, after.NumGC-before.NumGC)
	}
}

// A user's GOGC is theirs: Run does nothing and returns.
func TestUsersGOGCWins(t *testing.T) {
	t.Setenv("GOGC", "200")
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(t.Context(), Options{Quiet: time.Millisecond, MinFree: 1})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return under the user's GOGC")
	}
}
