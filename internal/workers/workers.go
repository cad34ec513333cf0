// Package workers runs a loop's iterations on a bounded number of
// goroutines: as many as cores for work that computes, more for work that
// waits on the network.
package workers

import "sync"

// Each calls f(i) for every i in [0, n) on up to k goroutines (at least
// one), handing out indexes one at a time, and returns when all are done.
// f must write only what belongs to its own index.
func Each(n, k int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(min(k, n), 1) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
