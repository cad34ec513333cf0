package reconciler

import (
	"runtime"
	"sync"
)

// parallelMin is the fewest clusters a goroutine is worth: a cluster's
// summary or plan takes tens of microseconds, so a pass over a few
// clusters (a commit's, an event's) stays on the loop's goroutine.
const parallelMin = 64

// parallel calls f(i) for every i in [0, n), on up to GOMAXPROCS
// goroutines when n is large, and returns when all are done. f must only
// read the Reconciler and write its own index of the caller's slices.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/parallelMin)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				f(i)
			}
		})
	}
	wg.Wait()
}
