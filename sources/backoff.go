package sources

import (
	"math/rand/v2"
	"time"
)

// jitter spreads polls of many daemons: d ± 10%.
func jitter(d time.Duration) time.Duration {
	spread := int64(d) / 5
	if spread <= 0 {
		return d
	}
	return d - time.Duration(spread/2) + time.Duration(rand.Int64N(spread))
}

// backoff is the wait after the n-th failure in a row: interval doubled
// each time, capped, with jitter.
func backoff(interval, maxWait time.Duration, n int) time.Duration {
	d := interval
	for i := 1; i < n && d < maxWait; i++ {
		d *= 2
	}
	return jitter(min(d, maxWait))
}
