package main

import (
	"context"
	"sync"

	"github.com/gitfleet/gitfleet/sources"
)

// revisionBox follows a source's revisions in the order the source read
// them and keeps the newest good one and the newest of all (which may be
// rejected). The source never waits on a follower replica, and a replica
// that becomes leader starts from the newest revisions: never from one that
// was still queued behind a newer one.
type revisionBox struct {
	mu     sync.Mutex
	good   *sources.Revision
	latest *sources.Revision
	wake   chan struct{}
}

// newRevisionBox drains in until it is closed.
func newRevisionBox(in <-chan *sources.Revision) *revisionBox {
	b := &revisionBox{wake: make(chan struct{}, 1)}
	go func() {
		for rev := range in {
			b.mu.Lock()
			b.latest = rev
			if !rev.Rejected() {
				b.good = rev
			}
			b.mu.Unlock()
			select {
			case b.wake <- struct{}{}:
			default:
			}
		}
	}()
	return b
}

func (b *revisionBox) get() (good, latest *sources.Revision) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.good, b.latest
}

// follow delivers, for one leadership term, the newest good revision and then
// the newest one if it differs (a rejected head), at once and after every
// change, until ctx ends. One term follows at a time.
func (b *revisionBox) follow(ctx context.Context) <-chan *sources.Revision {
	out := make(chan *sources.Revision)
	go func() {
		defer close(out)
		sent := map[string]bool{}
		for {
			good, latest := b.get()
			for _, rev := range []*sources.Revision{good, latest} {
				if rev == nil || sent[rev.Commit] {
					continue
				}
				select {
				case out <- rev:
					sent[rev.Commit] = true
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-b.wake:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
