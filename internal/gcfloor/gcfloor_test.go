package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

var sink []byte

// gcPercent reads the collector's setting without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// collectionsIn32MiBOfGarbage makes 32 MiB of garbage in 1 KiB pieces
// and returns how many collections ran meanwhile.
func collectionsIn32MiBOfGarbage() uint32 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 32 << 10 {
		sink = make([]byte, 1<<10)
	}
	runtime.ReadMemStats(&after)
	return after.NumGC - before.NumGC
}

func TestNoCollectionBelowTheFloor(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	runtime.GC()
	undo := Set(256 << 20)
	n := collectionsIn32MiBOfGarbage()
	undo()
	undo() // a second call (a timer's, say) changes nothing
	if n != 0 {
		t.Errorf("%d collections while the heap stayed under the floor, want none", n)
	}
	if p := gcPercent(); p != 100 {
		t.Errorf("after undo GOGC is %d, want 100 back", p)
	}
}

func TestDefaultsComeBackPastHalfTheFloor(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	undo := Set(32 << 20)
	defer undo()
	if p := gcPercent(); p != -1 {
		t.Fatalf("under the floor GOGC is %d, want off (-1)", p)
	}
	live := make([][]byte, 0, 24)
	for range 24 { // 24 MiB kept: more than half the floor
		live = append(live, make([]byte, 1<<20))
	}
	runtime.GC()
	deadline := time.Now().Add(5 * time.Second)
	for gcPercent() != 100 {
		if time.Now().After(deadline) {
			t.Fatal("the live heap passed half the floor and GOGC stayed off")
		}
		time.Sleep(time.Millisecond)
	}
	if l := debug.SetMemoryLimit(-1); l < 1<<62 {
		t.Errorf("memory limit %d left in place, want none", l)
	}
	runtime.KeepAlive(live)
}

func TestTheUsersSettingWins(t *testing.T) {
	t.Setenv("GOGC", "100")
	undo := Set(256 << 20)
	defer undo()
	if p := gcPercent(); p != 100 {
		t.Errorf("GOGC set by the user, yet the floor turned it to %d", p)
	}
}

// TestAboveWhatTheProcessHolds: Above's floor counts from the memory the
// process holds already, so a process that holds much (a daemon beside an
// embedded server) still skips collections for the extra it asked for.
func TestAboveWhatTheProcessHolds(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	held := make([][]byte, 0, 96)
	for range 96 { // 96 MiB held: more than Set(64 MiB) would allow
		held = append(held, make([]byte, 1<<20))
	}
	runtime.GC()
	undo := Above(64 << 20)
	n := collectionsIn32MiBOfGarbage()
	undo()
	runtime.KeepAlive(held)
	if n != 0 {
		t.Errorf("%d collections within the extra 64 MiB, want none", n)
	}
}
