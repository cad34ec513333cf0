// Package gcfloor lets a one-shot command skip the garbage collections it
// would run while its heap is small. Go's collector aims at twice the live
// heap, so a process whose live heap grows from nothing to tens of MiB, as
// validate's and plan's do while they parse a fleet, collects again and
// again early on, marking the same young objects each time. With a floor,
// the heap may grow to the floor before the first collection, and the
// collector keeps to the floor for as long as that is at least twice the
// live heap; past that, Go's default (GOGC=100, no limit) applies, so a
// large fleet never makes the collector run more often than it would
// without the floor.
package gcfloor

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// every is how often the live heap is looked at; it changes only when a
// collection ends.
const every = 5 * time.Millisecond

// Above is Set with a floor of extra bytes more than the process's Go
// memory now (as GOMEMLIMIT counts it: everything the runtime holds from
// the system, less what it returned), for a long-lived process that is
// about to grow by about that much — a daemon reading its records.
func Above(extra int64) (undo func()) {
	if extra <= 0 {
		return func() {}
	}
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(sample)
	var used int64
	if sample[0].Value.Kind() == metrics.KindUint64 && sample[1].Value.Kind() == metrics.KindUint64 {
		used = int64(sample[0].Value.Uint64()) - int64(sample[1].Value.Uint64())
	}
	return Set(used + extra)
}

// Set gives the collector a floor of bytes (total Go memory, as
// GOMEMLIMIT counts it) and returns the function that takes it away, which
// may be called more than once and from any goroutine. It
// does nothing when the user set GOGC or GOMEMLIMIT: theirs wins.
func Set(bytes int64) (undo func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" || bytes <= 0 {
		return func() {}
	}
	pct := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(bytes)
	var once sync.Once
	restore := func() {
		once.Do(func() {
			debug.SetGCPercent(pct)
			debug.SetMemoryLimit(limit)
		})
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 && int64(sample[0].Value.Uint64())*2 > bytes {
				restore()
				return
			}
		}
	}()
	var undoOnce sync.Once
	return func() {
		undoOnce.Do(func() {
			close(stop)
			<-done
			restore()
		})
	}
}
