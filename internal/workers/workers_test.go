package workers

import (
	"sync/atomic"
	"testing"
)

// Every index is done once, with no more goroutines at once than asked.
func TestEachDoesEveryIndexOnceWithinTheBound(t *testing.T) {
	for _, c := range []struct{ n, k int }{{0, 4}, {1, 4}, {100, 1}, {100, 3}, {5, 0}} {
		done := make([]atomic.Int32, c.n)
		var running, most atomic.Int32
		Each(c.n, c.k, func(i int) {
			now := running.Add(1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			done[i].Add(1)
			running.Add(-1)
		})
		for i := range done {
			if got := done[i].Load(); got != 1 {
				t.Errorf("n=%d k=%d: index %d done %d times", c.n, c.k, i, got)
			}
		}
		if limit := int32(max(c.k, 1)); most.Load() > limit {
			t.Errorf("n=%d k=%d: %d at once, want at most %d", c.n, c.k, most.Load(), limit)
		}
	}
}
