// Package workers runs a loop's iterations on a bounded number of
// goroutines: as many as cores for work that computes, more for work that
// waits on the network.
package workers

import (
	"sync"
	"sync/atomic"
)

// Each calls f(i) for every i in [0, n) on up to k goroutines (at least
// one), handing out indexes one at a time, in order, and returns when all
// are done. f must write only what belongs to its own index.
//
// The goroutines take the next index from a counter: handing indexes out
// over a channel from the caller's goroutine made the workers wait for it
// to be scheduled between items (on two cores, a cold `plan` of 10,000
// clusters parsed its files with 1.5 cores busy; ten runs each in turns,
// 0.98 -> 0.91 s for the same CPU).
func Each(n, k int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(min(k, n), 1) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}
