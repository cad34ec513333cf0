// Package memreturn gives the system back the heap pages a quiet daemon
// keeps for nothing.
//
// Go's collector lets the heap grow to twice what it found live before it
// collects again, and its scavenger returns pages to the system only above
// about 1.1 times that goal. A daemon that holds a large fleet and mostly
// waits collects when something allocates a lot (every minute, the
// workers' inventories); after that the pages those allocations used stay
// resident, free, until the next burst — about as much again as the live
// heap. Run watches for a process that has not collected for a while (it
// allocates slowly) and holds many free pages, and then forces one
// collection and returns every free page (debug.FreeOSMemory). A busy
// process collects often and is left alone, so it pays nothing; a quiet
// one pays one collection per burst.
package memreturn

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/rs/zerolog"
)

// Defaults of Options.
const (
	DefaultQuiet   = 10 * time.Second
	DefaultMinFree = 16 << 20
)

// Options tune Run; the zero value is the daemon's.
type Options struct {
	// Quiet is how long the process must have gone without a collection
	// before its free pages are given back (default DefaultQuiet).
	Quiet time.Duration
	// MinFree: pages are given back only when at least this many bytes of
	// them are free, and at least a quarter of the live heap (default
	// DefaultMinFree).
	MinFree uint64
	// Log gets a debug line each time pages are given back.
	Log zerolog.Logger
	// Returned, when set, is called with the free bytes each time pages
	// are given back.
	Returned func(free uint64)
}

// Run gives free pages back whenever the process is quiet (Options), until
// ctx ends. It returns at once when the user set GOGC: how often the
// collector runs is then theirs to say. A GOMEMLIMIT alone bounds the
// heap from above and is kept: Run only returns pages sooner.
func Run(ctx context.Context, o Options) {
	if os.Getenv("GOGC") != "" {
		return
	}
	if o.Quiet <= 0 {
		o.Quiet = DefaultQuiet
	}
	if o.MinFree == 0 {
		o.MinFree = DefaultMinFree
	}
	sample := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	read := func(i int) uint64 {
		if sample[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return sample[i].Value.Uint64()
	}
	t := time.NewTicker(o.Quiet / 5)
	defer t.Stop()
	var cycles uint64
	since := time.Now()
	// given is the collection count just after the last give-back: until
	// another collection frees something, there is nothing new to return.
	given := ^uint64(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if c := read(0); c != cycles {
			cycles, since = c, time.Now()
			continue
		}
		quiet := time.Since(since)
		if cycles == given || quiet < o.Quiet {
			continue
		}
		free, live := read(1), read(2)
		if free < max(o.MinFree, live/4) {
			continue
		}
		start := time.Now()
		debug.FreeOSMemory()
		metrics.Read(sample)
		cycles, since, given = read(0), time.Now(), read(0)
		o.Log.Debug().Uint64("freeMiB", free>>20).Uint64("liveMiB", live>>20).Dur("quiet", quiet).Dur("took", time.Since(start)).
			Msg("gave the system back the free heap pages of a quiet process")
		if o.Returned != nil {
			o.Returned(free)
		}
	}
}
