package planner

import (
	"runtime"
	"sync"
)

// minParallel is the fewest items per goroutine worth a goroutine: a
// cluster's expansion or comparison takes microseconds, so a commit that
// touches a few clusters stays on the caller's goroutine.
const minParallel = 64

// inParallel calls f on contiguous ranges [lo, hi) that cover [0, n), on
// up to GOMAXPROCS goroutines, and returns when all are done. Each range
// writes only its own indexes of the caller's result slices, so results
// come out in input order whatever the scheduling.
func inParallel(n int, f func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n/minParallel)
	if workers <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Go(func() { f(lo, hi) })
	}
	wg.Wait()
}
