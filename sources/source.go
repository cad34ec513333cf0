package sources

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// WatchOptions configure a Source.
type WatchOptions struct {
	// Branch is the branch followed; default "main".
	Branch string
	// Interval is how often the repository is polled (remote: fetched);
	// default DefaultInterval. Local repositories are also watched with
	// fsnotify, so for them polling is only a safety net.
	Interval time.Duration
	// Debounce is the window in which ref changes are coalesced; default
	// DefaultDebounce. The first change of a burst is acted on at once.
	Debounce time.Duration
	// MaxBackoff caps the wait between fetches while the remote fails;
	// default 10 × Interval.
	MaxBackoff time.Duration
	// Log receives what the source does; default zerolog.Ctx(ctx).
	Log *zerolog.Logger
	// Newest leaves Revisions empty: readers call Follow, which hands them
	// the newest good and the newest revision and skips those read while
	// nobody followed, so the source never waits for a reader.
	Newest bool
	// LastGood names the commit that was in force before this start (the
	// daemon's: the status branch's last applied commit; "" for none).
	// When a head is rejected and no good revision has been read yet, that
	// commit is read and, if it is good, stays in force (Current) as it
	// would have without the restart; it is delivered before the head.
	LastGood func(ctx context.Context) (string, error)
}

// Source follows a branch and turns each new head into a Revision: read,
// signature-checked and validated. Rejected revisions are delivered too, but
// Current stays at the last good one.
type Source struct {
	repo *Repo
	opts WatchOptions
	log  zerolog.Logger

	wake   chan struct{} // cap 1: triggers coalesce
	out    chan *Revision
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	current *Revision
	last    *Revision     // newest head read, good or not
	err     error         // last fetch or read failure, nil after a success
	changed chan struct{} // closed and replaced when last changes
}

// Watch starts following opts.Branch of repo; the first head is read at
// once. It runs until ctx ends or Close; the caller still owns repo.
func Watch(ctx context.Context, repo *Repo, opts WatchOptions) (*Source, error) {
	if opts.Branch == "" {
		opts.Branch = "main"
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * opts.Interval
	}
	log := zerolog.Ctx(ctx)
	if opts.Log != nil {
		log = opts.Log
	}
	s := &Source{
		repo: repo,
		opts: opts,
		log:  log.With().Str("repo", repo.Location()).Str("branch", opts.Branch).Logger(),
		wake: make(chan struct{}, 1),
		out:  make(chan *Revision, 16),
		done: make(chan struct{}),

		changed: make(chan struct{}),
	}
	var refs *refWatcher
	if !repo.Remote() {
		var err error
		refs, err = newRefWatcher(repo.GitDir(), opts.Branch)
		if err != nil {
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	go s.run(runCtx, refs)
	return s, nil
}

// Revisions delivers every new head of the branch, good or rejected, and
// the source waits for the reader; nothing when WatchOptions.Newest is set
// (use Follow). It is closed by Close.
func (s *Source) Revisions() <-chan *Revision { return s.out }

// Current is the last good revision, or nil if none was read yet.
func (s *Source) Current() *Revision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// Latest is the newest head read, which may be a rejected one.
func (s *Source) Latest() *Revision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Err is the last fetch or read failure; nil once one succeeds again.
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Branch is the branch followed.
func (s *Source) Branch() string { return s.opts.Branch }

// Trigger asks for an immediate fetch and check. Calls made while one is
// pending coalesce into it. It never blocks.
func (s *Source) Trigger() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close stops the source and waits for its goroutine; Revisions is closed.
func (s *Source) Close() error {
	s.cancel()
	<-s.done
	return nil
}

func (s *Source) run(ctx context.Context, refs *refWatcher) {
	defer close(s.done)
	defer close(s.out)
	var refEvents <-chan struct{}
	if refs != nil {
		refEvents = refs.changes(ctx, s.opts.Debounce)
		defer refs.close(true)
	}
	failures := 0
	timer := time.NewTimer(0) // first check at once
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.wake:
		case <-refEvents:
		}
		err := s.check(ctx)
		if ctx.Err() != nil {
			return
		}
		delay := jitter(s.opts.Interval)
		if err != nil {
			failures++
			delay = backoff(s.opts.Interval, s.opts.MaxBackoff, failures)
			s.log.Warn().Err(err).Int("failures", failures).Dur("retryIn", delay).Msg("source check failed")
		} else {
			failures = 0
		}
		timer.Reset(delay)
	}
}

// check fetches (remote), resolves the branch and, if its head moved, reads
// and delivers the new revision (after the last good one, when a rejected
// head made checkOnce read that).
func (s *Source) check(ctx context.Context) error {
	revs, err := s.checkOnce(ctx)
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	for _, rev := range revs {
		if s.opts.Newest {
			break
		}
		select {
		case s.out <- rev:
		case <-ctx.Done():
		}
	}
	return err
}

// Follow delivers the newest good revision and then the newest one if it
// differs (a rejected head), at once and after every change, until ctx
// ends. A follower that starts late never gets an older revision than
// those: a new leader starts from the newest state of the branch. When
// the head moves back to the good revision it delivered (the branch reset
// or force-pushed over a rejected head), that revision comes again,
// marked Returned: no refusal applies any more.
func (s *Source) Follow(ctx context.Context) <-chan *Revision {
	out := make(chan *Revision)
	go func() {
		defer close(out)
		sent := map[string]bool{}
		head := ""
		for {
			s.mu.Lock()
			good, latest, changed := s.current, s.last, s.changed
			s.mu.Unlock()
			if latest != nil && head != "" && latest.Commit != head && sent[latest.Commit] {
				back := *latest
				back.Returned = true
				select {
				case out <- &back:
				case <-ctx.Done():
					return
				}
			}
			if latest != nil {
				head = latest.Commit
			}
			keep := map[string]bool{}
			for _, rev := range []*Revision{good, latest} {
				if rev == nil {
					continue
				}
				keep[rev.Commit] = true
				if sent[rev.Commit] {
					continue
				}
				select {
				case out <- rev:
					sent[rev.Commit] = true
				case <-ctx.Done():
					return
				}
			}
			maps.DeleteFunc(sent, func(c string, _ bool) bool { return !keep[c] }) // only the two it may see again
			select {
			case <-changed:
			case <-ctx.Done():
				return
			case <-s.done:
				return
			}
		}
	}()
	return out
}

// checkOnce returns the new head's revision, or nothing if the head is the
// one already read; a rejected head read before any good revision comes
// after the last good one (WatchOptions.LastGood) when that can be read.
func (s *Source) checkOnce(ctx context.Context) ([]*Revision, error) {
	fctx, cancel := context.WithTimeout(ctx, max(s.opts.Interval, time.Minute))
	defer cancel()
	if _, err := s.repo.Fetch(fctx); err != nil {
		return nil, err
	}
	head, err := s.repo.Resolve(ctx, s.repo.BranchRef(s.opts.Branch))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("branch %s: %w", s.opts.Branch, err)
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	same := s.last != nil && s.last.Commit == head
	since := ""
	if s.current != nil {
		since = s.current.Commit
	}
	s.mu.Unlock()
	if same {
		return nil, nil
	}
	s.log.Debug().Str("commit", short(head)).Msg("reading new head")
	rev, err := s.repo.RevisionSince(ctx, head, since)
	if err != nil {
		return nil, err
	}
	rev.Ref = s.opts.Branch
	var good *Revision
	if rev.Rejected() && since == "" {
		good = s.lastGood(ctx, head)
	}
	s.mu.Lock()
	s.last = rev
	switch {
	case !rev.Rejected():
		s.current = rev
	case good != nil && s.current == nil:
		s.current = good
	default:
		good = nil
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	if rev.Rejected() {
		s.log.Warn().Str("commit", short(rev.Commit)).Err(rev.Err).Msg("revision rejected; keeping the last good one")
	} else {
		s.log.Info().Str("commit", short(rev.Commit)).Msg("new revision")
	}
	if good != nil {
		return []*Revision{good, rev}, nil
	}
	return []*Revision{rev}, nil
}

// lastGood reads the revision WatchOptions.LastGood names, when head is
// rejected and none was good since the start: nil when there is none, or
// it cannot be read, or it does not validate (any more).
func (s *Source) lastGood(ctx context.Context, head string) *Revision {
	if s.opts.LastGood == nil {
		return nil
	}
	commit, err := s.opts.LastGood(ctx)
	if err != nil {
		s.log.Warn().Err(err).Msg("cannot tell which revision was in force before the start; none is until a head validates")
		return nil
	}
	if commit == "" || commit == head {
		return nil
	}
	rev, err := s.repo.Revision(ctx, commit)
	if err != nil {
		s.log.Warn().Err(err).Str("commit", short(commit)).Msg("cannot read the revision in force before the start; none is until a head validates")
		return nil
	}
	if rev.Rejected() {
		s.log.Warn().Err(rev.Err).Str("commit", short(commit)).Msg("the revision in force before the start does not validate now; none is until a head validates")
		return nil
	}
	rev.Ref = s.opts.Branch
	s.log.Warn().Str("commit", short(commit)).Str("head", short(head)).Msg("head rejected at the start: the revision in force before it stays in force")
	return rev
}
