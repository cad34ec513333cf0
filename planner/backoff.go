package planner

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Backoff says how long a pool waits to create machines after creates of
// it failed: Base after the first failure, doubling with each failure, at
// most Max; Jitter adds up to a half of that (and never past Max), so the
// pools of many clusters failing together do not retry together.
type Backoff struct {
	Base time.Duration // default DefaultRetryInterval
	Max  time.Duration // default DefaultMaxBackoff
	// Jitter returns a number in [0, 1) for a pool's failure number n; the
	// daemon draws it at random, tests pass a fixed function, so the
	// planner stays deterministic. Nil means no jitter.
	Jitter func(cluster, pool string, n int) float64
}

// Defaults of Backoff.
const (
	DefaultRetryInterval = 10 * time.Second
	DefaultMaxBackoff    = 5 * time.Minute
)

// delay is the wait after failure number n (1-based).
func (b Backoff) delay(cluster, pool string, n int) time.Duration {
	base, limit := b.Base, b.Max
	if base <= 0 {
		base = DefaultRetryInterval
	}
	if limit <= 0 {
		limit = DefaultMaxBackoff
	}
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	if b.Jitter != nil {
		j := min(max(b.Jitter(cluster, pool, n), 0), 1)
		d += time.Duration(float64(d) / 2 * j)
	}
	return min(d, limit)
}

// updateBackoff counts the machines of each pool that turned Failed since
// the last look, and forgets a pool's failures once a machine created after
// its last failure came up, or once its wait is over and the pool has all
// its replicas Running (dc nil: the cluster was removed). It returns prev
// itself when nothing changed.
func updateBackoff(prev []PoolBackoff, dc *DesiredCluster, cluster string, ms []ObservedMachine, now time.Time, cfg Backoff) []PoolBackoff {
	byPool := make(map[string]*PoolBackoff, len(prev))
	for i := range prev {
		b := prev[i]
		byPool[b.Pool] = &b
	}
	changed := false
	present := map[string]bool{}
	for i := range ms {
		m := &ms[i]
		if m.Phase == wire.PhaseDeleted {
			continue
		}
		present[m.Name] = true
		if b := byPool[PoolName(m.Deployment)]; b != nil && m.Phase == wire.PhaseRunning && m.Created.After(b.LastFailure) {
			delete(byPool, b.Pool)
			changed = true
		}
	}
	// Count in name order, so the record does not depend on input order.
	failed := make([]*ObservedMachine, 0)
	for i := range ms {
		if ms[i].Phase == wire.PhaseFailed && ms[i].Reason == "" {
			failed = append(failed, &ms[i])
		}
	}
	sort.Slice(failed, func(i, j int) bool { return failed[i].Name < failed[j].Name })
	for _, m := range failed {
		pool := PoolName(m.Deployment)
		b := byPool[pool]
		if b == nil {
			b = &PoolBackoff{Pool: pool}
			byPool[pool] = b
		}
		if slices.Contains(b.Counted, m.Name) {
			continue
		}
		b.Failures++
		b.LastFailure = now
		b.NextRetry = now.Add(cfg.delay(cluster, pool, b.Failures))
		b.Reason = "machine " + m.Name + " failed"
		if m.Message != "" {
			b.Reason += ": " + m.Message
		}
		b.Counted = append(slices.Clip(b.Counted), m.Name)
		changed = true
	}
	running := map[string]int{}
	failing := map[string]bool{}
	for i := range ms {
		switch ms[i].Phase {
		case wire.PhaseRunning:
			running[PoolName(ms[i].Deployment)]++
		case wire.PhaseFailed:
			failing[PoolName(ms[i].Deployment)] = true
		}
	}
	for pool, b := range byPool {
		if failing[pool] || now.Before(b.NextRetry) {
			continue
		}
		want := 0
		if dc != nil {
			for _, p := range dc.pools() {
				if PoolName(p.Name) == pool {
					want = p.Replicas
				}
			}
		}
		if running[pool] == want {
			delete(byPool, pool)
			changed = true
		}
	}
	for _, b := range byPool {
		kept := b.Counted[:0:0]
		for _, n := range b.Counted {
			if present[n] {
				kept = append(kept, n)
			}
		}
		if len(kept) != len(b.Counted) {
			b.Counted = kept
			changed = true
		}
	}
	if !changed {
		return prev
	}
	out := make([]PoolBackoff, 0, len(byPool))
	for _, b := range byPool {
		if len(b.Counted) == 0 {
			b.Counted = nil
		}
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pool < out[j].Pool })
	if len(out) == 0 {
		return nil
	}
	return out
}

// waiting returns the pool's backoff when it forbids creating now.
func waiting(bs []PoolBackoff, pool string, now time.Time) *PoolBackoff {
	for i := range bs {
		if bs[i].Pool == pool && now.Before(bs[i].NextRetry) {
			return &bs[i]
		}
	}
	return nil
}

func (b *PoolBackoff) String() string {
	return fmt.Sprintf("%s: %d creates failed, the last %s (%s); next try at %s",
		b.Pool, b.Failures, b.LastFailure.UTC().Format(time.RFC3339), b.Reason, b.NextRetry.UTC().Format(time.RFC3339))
}
