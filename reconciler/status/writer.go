package status

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// DefaultInterval is the shortest time between two status commits.
const DefaultInterval = 2 * time.Second

// Options configure a Writer.
type Options struct {
	// Repo is the fleet repository; status commits are written to its
	// object store without touching any work tree.
	Repo *git.Repository
	// Branch defaults to gitfleet/status.
	Branch string
	// Interval is the shortest time between two commits (default 2s).
	Interval time.Duration
	// Remote, when set, is the remote the branch is pushed to after each
	// commit; Auth is used for push and fetch.
	Remote string
	Auth   transport.AuthMethod
	// CommitterName and CommitterEmail default to gitfleet <gitfleet@localhost>.
	CommitterName  string
	CommitterEmail string
	Logger         zerolog.Logger
	// Now is the clock for commit dates (default time.Now).
	Now func() time.Time
	// Refresh, when set, rewrites fleet.yaml's refreshedAt after a
	// Refresh period in which nothing changed: a status commit older than
	// a few periods says the daemon is down.
	Refresh time.Duration
	// Fence, when set, is asked before every commit and push: a daemon
	// whose leader lease may be gone returns an error and writes nothing.
	Fence func() error
	// OnCommit and OnPushFailure, when set, are called for each status
	// commit written and each push that failed (the daemon's metrics).
	OnCommit      func()
	OnPushFailure func()
	// SumCache, when set, is a file where the Writer keeps each cluster
	// file's summary by blob hash between runs, so a restart reads only
	// the status files that changed since (sumcache.go).
	SumCache string
}

// Stats count what a Writer did.
type Stats struct {
	Commits int // status commits written
	Pushes  int // successful pushes
	Retries int // commits rebuilt because the branch moved underneath
	Packs   int // commits whose objects were written as one pack (packMin files or more)
	// FilesRead counts the files read from the branch: at a start, those
	// whose summary the summary cache did not have (Options.SumCache).
	FilesRead int
}

// Writer commits status changes to the status branch, batched into at most
// one commit per interval. Set* record the new state and return at once
// (once the branch has been read: see NewWriter); a goroutine owned by the
// Writer commits (and pushes). Call Flush before Close to write what is
// pending.
type Writer struct {
	opts  Options
	ref   plumbing.ReferenceName
	store storage.Storer
	log   zerolog.Logger

	flushMu sync.Mutex // one flush at a time
	trees   trees      // entries of the trees of tip; used under flushMu
	packs   []ownPack  // the packs this Writer wrote, kept merged (keepPacks); under flushMu

	mu       sync.Mutex
	seq      int64
	pending  map[string]change        // staged since the last flush
	outbox   map[string]change        // flushed, not yet durable (pushed when remote)
	known    map[string]plumbing.Hash // owned files at tip
	tip      plumbing.Hash            // the branch as the Writer last saw or wrote it
	tipTree  plumbing.Hash            // tip's tree, which a commit builds on without reading tip
	pushed   plumbing.Hash            // the remote branch as last seen
	clusters map[string]clusterSum    // every cluster, pending state included
	counts   Counts                   // of clusters, kept up to date
	fleet    FleetStatus              // the caller's part of fleet.yaml
	fleetSet *change                  // summary and origin of the last SetFleet
	err      error                    // of the last flush; nil once one succeeds
	dirty    bool                     // fleet.yaml needs recounting
	staged   time.Time                // when a change was last staged (opts.Now)
	stats    Stats
	// sums are the summaries reload used, by blob hash: read from the
	// summary cache file (cachedSums) or computed from the file, which
	// sumsLearnt counts; unreadable are the files it could not read.
	// wrote is set once this Writer committed: the summary cache then
	// also gets the files it wrote (saveSums).
	sums       map[plumbing.Hash]clusterSum
	cachedSums map[plumbing.Hash]clusterSum
	sumsLearnt int
	unreadable map[plumbing.Hash]bool
	wrote      bool
	// keyed is set when a cluster's key changed (SetClusterFrom): the
	// summary cache then keeps the new keys.
	keyed bool

	beforeCAS func() // test hook: runs between building a commit and setting the ref

	// ready is closed once the branch has been read (start); loadErr,
	// set before, says why it could not be.
	ready   chan struct{}
	loadErr error

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// clusterSum is what fleet.yaml counts of one cluster.
type clusterSum struct {
	class, version, phase string
	machinePhases         tally
	machineVersions       tally
	machines              int
	created               time.Time
	conds                 condMarks
	// deleted is the file's deleted list, which a new leader carries on
	// (Deleted); shared with the status it came from, never changed.
	deleted []DeletedMachine
	// from is the caller's key of what the status was made from
	// (SetClusterFrom); 0 when unknown, as for a file only read.
	from uint64
}

// condMark is a condition's status and since when it holds.
type condMark struct {
	status string
	since  time.Time
}

func summarize(c ClusterStatus) clusterSum {
	s := clusterSum{class: c.Class, version: c.Version, phase: c.Phase, machines: len(c.Machines), created: c.Created,
		deleted: c.Deleted}
	for _, cd := range c.Conditions {
		s.conds.set(cd.Type, condMark{status: cd.Status, since: cd.LastTransitionTime})
	}
	for _, m := range c.Machines {
		s.machinePhases.add(m.Phase)
		if m.Version != "" {
			s.machineVersions.add(m.Version)
		}
	}
	return s
}

// writtenSum is summarize of c as EncodeCluster writes it (condition times
// to the second) without normalizing the whole status: what reading the
// file back gives (TestWrittenSumIsReadBack), so that the summary cache
// can keep it for a file this Writer wrote.
func writtenSum(c ClusterStatus) clusterSum {
	s := summarize(c)
	for i := range s.conds {
		if t := &s.conds[i].since; !t.IsZero() {
			*t = t.UTC().Truncate(time.Second)
		}
	}
	return s
}

// DefaultRefresh is how often the daemon rewrites a quiet fleet's status
// (fleet.yaml's refreshedAt); describe warns when the status is older than
// StaleAfter.
const (
	DefaultRefresh = 15 * time.Minute
	StaleAfter     = 4 * DefaultRefresh
)

// ErrClosed is returned by Flush after Close.
var ErrClosed = errors.New("status writer closed")

// NewWriter starts the goroutine that reads the status branch (fetching
// it first when a remote is set), then commits; Close stops it. It returns
// at once: reading 10,000 cluster files takes a second, which a restarting
// daemon spends loading its records meanwhile. Every method waits for the
// branch to be read; Ready says when it is, or why it could not be.
func NewWriter(ctx context.Context, opts Options) (*Writer, error) {
	if opts.Repo == nil {
		return nil, errors.New("status writer: no repository")
	}
	if opts.Branch == "" {
		opts.Branch = v1alpha1.DefaultStatusBranch
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.CommitterName == "" {
		opts.CommitterName = "gitfleet"
	}
	if opts.CommitterEmail == "" {
		opts.CommitterEmail = "gitfleet@localhost"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	ref := plumbing.NewBranchReferenceName(opts.Branch)
	if err := ref.Validate(); err != nil {
		return nil, fmt.Errorf("status writer: branch %q: %w", opts.Branch, err)
	}
	w := &Writer{
		opts: opts, ref: ref, store: opts.Repo.Storer, staged: opts.Now(),
		log:     opts.Logger.With().Str("branch", opts.Branch).Logger(),
		pending: map[string]change{}, outbox: map[string]change{},
		known: map[string]plumbing.Hash{}, clusters: map[string]clusterSum{}, trees: trees{}, sums: map[plumbing.Hash]clusterSum{}, unreadable: map[plumbing.Hash]bool{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), ready: make(chan struct{}),
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel = cancel
	go func() {
		if err := w.start(rctx); err != nil {
			w.loadErr = fmt.Errorf("status writer: %w", err)
			close(w.ready)
			close(w.done)
			return
		}
		close(w.ready)
		w.run(rctx)
	}()
	return w, nil
}

// start reads the branch: its tip, and every cluster file's summary.
func (w *Writer) start(ctx context.Context) error {
	if w.opts.Remote != "" {
		if err := w.fetch(ctx); err != nil {
			w.log.Warn().Err(err).Msg("status: cannot fetch the status branch; will retry on push")
		} else {
			w.pushed, _ = w.readTip()
		}
	}
	tip, err := w.readTip()
	if err != nil {
		return err
	}
	w.loadSums()
	if err = w.reload(tip); w.reindexed(err) {
		err = w.reload(tip)
	}
	w.mu.Lock()
	w.cachedSums = nil // what the tip did not use is of no use
	w.mu.Unlock()
	return err
}

// Ready waits until the branch has been read, and returns why it could not
// be (a daemon stops then: it cannot write its status).
func (w *Writer) Ready(ctx context.Context) error {
	select {
	case <-w.ready:
		return w.loadErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait blocks until the branch has been read.
func (w *Writer) wait() error {
	<-w.ready
	return w.loadErr
}

// SetCluster records the status of one cluster. It is encoded when the
// Writer next commits, in the Writer's goroutine: a planning pass hands
// over its clusters without encoding them, and a cluster set several times
// between two commits is encoded once. Nothing is committed when it
// encodes to the same file as what is on the branch or about to be.
func (w *Writer) SetCluster(c ClusterStatus, o Origin) error { return w.SetClusterFrom(c, 0, o) }

// SetClusterFrom is SetCluster for a status made from what the caller's
// key from (not 0) stands for: the same key means the same status, which
// MadeFrom then answers without the status being built again. The key is
// kept with the cluster's summary, in the summary cache too, so it holds
// across restarts: a restart's first pass builds none of the 10,000
// statuses it would hand over only for them to encode to the files the
// branch holds (docs/status.md, "How it is written").
func (w *Writer) SetClusterFrom(c ClusterStatus, from uint64, o Origin) error {
	if err := w.wait(); err != nil {
		return err
	}
	if err := checkName(c.Name); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	path := ClusterPath(c.Name)
	base := w.clusters[c.Name].conds
	if p, ok := w.pending[path]; ok && p.status != nil {
		base = p.base // what the branch has, not the status set since
	}
	w.stamp(&c, base)
	w.stage(path, change{status: &c, base: base}, o)
	s := writtenSum(c)
	s.from = from
	if prev, ok := w.clusters[c.Name]; from != 0 && (!ok || prev.from != from) {
		w.keyed = true
	}
	w.setSum(c.Name, s)
	return nil
}

// MadeFrom reports whether the newest status of cluster name, on the
// branch or about to be, was set from the key from (SetClusterFrom): a
// status made from the same would change nothing. With the same key the
// same status is stamped alike, its conditions' times kept from the
// newest, so it would encode to the same file. False for key 0, for a
// cluster whose file someone else wrote, and when the branch could not be
// read (it waits for the branch, as every method does).
func (w *Writer) MadeFrom(name string, from uint64) bool {
	if from == 0 || w.wait() != nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.clusters[name]
	return ok && s.from == from
}

// Deleted returns each cluster's deleted machines as its newest status
// lists them, on the branch or about to be, for clusters that list any:
// what a new leader carries on, so that a restart does not cut the list
// short (docs/status.md). It waits for the branch, and returns nil when it
// could not be read. The lists are shared: they must not be changed.
func (w *Writer) Deleted() map[string][]DeletedMachine {
	if w.wait() != nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]DeletedMachine{}
	for name, s := range w.clusters {
		if len(s.deleted) > 0 {
			out[name] = s.deleted
		}
	}
	return out
}

// Fleet returns the caller's part of fleet.yaml as it was last set, or as
// the branch holds it when nothing was set yet: what a new leader carries
// on (the refusal it shows, docs/status.md). It waits for the branch, and
// returns the zero FleetStatus when it could not be read. The lists are
// shared: they must not be changed.
func (w *Writer) Fleet() FleetStatus {
	if w.wait() != nil {
		return FleetStatus{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fleet
}

// stamp gives c the times the Writer keeps: the cluster's creation, and
// since when each condition has its status. A condition whose status is
// the one base (the cluster's conditions on the branch or about to be)
// has keeps base's time: a flip and back between two commits is no
// transition the branch shows, and moving the time would say there was
// one. Else the time is kept while the status stays as last set, and is
// now when it flips.
func (w *Writer) stamp(c *ClusterStatus, base condMarks) {
	prev, had := w.clusters[c.Name]
	now := w.opts.Now().UTC().Truncate(time.Second)
	if c.Created.IsZero() {
		c.Created = now
		if had && !prev.created.IsZero() {
			c.Created = prev.created
		}
	}
	c.Conditions = slices.Clone(c.Conditions)
	for i := range c.Conditions {
		cd := &c.Conditions[i]
		if !cd.LastTransitionTime.IsZero() {
			continue
		}
		cd.LastTransitionTime = now
		if b, ok := base.get(cd.Type); ok && b.status == cd.Status && !b.since.IsZero() {
			cd.LastTransitionTime = b.since
		} else if p, ok := prev.conds.get(cd.Type); ok && p.status == cd.Status && !p.since.IsZero() {
			cd.LastTransitionTime = p.since
		}
	}
}

// DeleteCluster removes the status file of a deleted cluster.
func (w *Writer) DeleteCluster(name string, o Origin) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if err := w.wait(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stage(ClusterPath(name), removal(name+": deleted"), o) {
		w.dropSum(name)
	}
	return nil
}

// SetFleet records the caller's part of fleet.yaml: the last applied and
// rejected source commits, the daemon's conditions and the orphans. The
// counts are computed from the clusters; f.Counts is ignored.
func (w *Writer) SetFleet(f FleetStatus, o Origin) {
	if w.wait() != nil {
		return // Ready and Flush say why
	}
	f.Counts = Counts{}
	f = f.normalized()
	w.mu.Lock()
	defer w.mu.Unlock()
	f.RefreshedAt = w.fleet.RefreshedAt // the Writer's own field
	old, _ := encodeYAML(w.fleet)
	now, _ := encodeYAML(f)
	if string(old) == string(now) {
		return
	}
	w.fleet = f
	w.seq++
	w.fleetSet = &change{summary: f.summary(), origin: o, seq: w.seq}
	w.dirty = true
	w.poke()
}

// stage records ch for path unless it changes nothing, and reports whether
// it did. A cluster's status not yet encoded (ch.status) is always staged:
// whether it changes anything is known once it is encoded (encodePending).
// Called with mu held.
func (w *Writer) stage(path string, ch change, o Origin) bool {
	base, inOutbox := w.outbox[path]
	baseHash := base.hash
	if !inOutbox {
		baseHash = w.known[path]
	}
	if ch.status == nil {
		cur, sure := baseHash, true
		if p, ok := w.pending[path]; ok {
			cur, sure = p.hash, p.status == nil // a status not encoded yet: unknown
		}
		if sure && ch.hash == cur {
			return false
		}
		if ch.hash == baseHash {
			delete(w.pending, path) // back to what is written
			return true
		}
	}
	w.seq++
	ch.origin, ch.seq = o, w.seq
	w.pending[path] = ch
	if ch.status == nil {
		w.staged = w.opts.Now()
	}
	w.poke()
	return true
}

// encodePending encodes the clusters' statuses set since the last commit
// (on every core, outside the lock: the loop goes on setting) and moves
// every pending change to the outbox, leaving out a status that encodes
// to what is written or about to be. Called with flushMu held.
func (w *Writer) encodePending() {
	w.mu.Lock()
	var todo []string
	for p, c := range w.pending {
		if c.status != nil {
			todo = append(todo, p)
			continue
		}
		w.outbox[p] = c
	}
	deferred := make([]change, len(todo))
	for i, p := range todo {
		deferred[i] = w.pending[p]
	}
	clear(w.pending)
	w.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	workers := min(runtime.GOMAXPROCS(0), len(todo))
	var wg sync.WaitGroup
	for n := range workers {
		wg.Go(func() {
			for i := n; i < len(deferred); i += workers {
				c := &deferred[i]
				data, err := EncodeCluster(*c.status)
				if err != nil {
					w.log.Error().Err(err).Str("path", todo[i]).Msg("status: cannot encode a cluster's status; it is not written")
					c.status = nil
					continue
				}
				summary := c.status.summary()
				*c = change{data: data, hash: objectHash(plumbing.BlobObject, data), summary: summary, origin: c.origin, seq: c.seq}
			}
		})
	}
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, p := range todo {
		c := deferred[i]
		if c.data == nil {
			// Not written: no key stands for the file at tip.
			if s, ok := w.clusters[clusterName(p)]; ok && s.from != 0 {
				s.from = 0
				w.clusters[clusterName(p)] = s
			}
			continue
		}
		base, inOutbox := w.outbox[p]
		baseHash := base.hash
		if !inOutbox {
			baseHash = w.known[p]
		}
		if c.hash == baseHash {
			continue // the same file as is written or about to be
		}
		w.outbox[p] = c
		w.staged = w.opts.Now()
	}
}

// refresh stamps fleet.yaml's refreshedAt when nothing was staged for a
// Refresh period, so the branch shows the daemon alive in a quiet fleet.
func (w *Writer) refresh() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.opts.Now()
	if now.Sub(w.staged) < w.opts.Refresh {
		return
	}
	w.fleet.RefreshedAt = now.UTC().Truncate(time.Second)
	w.seq++
	w.fleetSet = &change{summary: "fleet: refreshed, nothing changed", seq: w.seq}
	w.dirty = true
	w.staged = now
	w.poke()
}

// poke wakes the goroutine. Called with mu held.
func (w *Writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// stageFleet re-encodes fleet.yaml when a cluster or the fleet changed.
// Called with mu held.
func (w *Writer) stageFleet() {
	if !w.dirty {
		return
	}
	w.dirty = false
	f := w.fleet
	f.Counts = w.counts
	data, err := EncodeFleet(f)
	if err != nil {
		w.log.Error().Err(err).Msg("status: encode fleet.yaml")
		return
	}
	ch := newChange(data, "")
	var o Origin
	if w.fleetSet != nil {
		ch.summary, o = w.fleetSet.summary, w.fleetSet.origin
	}
	w.stage(FleetFile, ch, o)
	w.fleetSet = nil
}

// setSum replaces the summary of cluster name and updates the counts.
// Called with mu held.
func (w *Writer) setSum(name string, s clusterSum) {
	w.dropSum(name)
	w.clusters[name] = s
	w.counts.add(s, 1)
	w.dirty = true
}

// dropSum forgets cluster name. Called with mu held.
func (w *Writer) dropSum(name string) {
	if old, ok := w.clusters[name]; ok {
		w.counts.add(old, -1)
		delete(w.clusters, name)
		w.dirty = true
	}
}

// add adds (sign 1) or removes (sign -1) one cluster's summary.
func (c *Counts) add(s clusterSum, sign int) {
	bump := func(m *map[string]int, k string, n int) {
		if k == "" || n == 0 {
			return
		}
		if *m == nil {
			*m = map[string]int{}
		}
		if (*m)[k] += n; (*m)[k] == 0 {
			delete(*m, k)
		}
	}
	c.Clusters += sign
	c.Machines += sign * s.machines
	bump(&c.ClustersByClass, s.class, sign)
	bump(&c.ClustersByVersion, s.version, sign)
	bump(&c.ClustersByPhase, s.phase, sign)
	for _, e := range s.machinePhases {
		bump(&c.MachinesByPhase, e.key, sign*e.n)
	}
	for _, e := range s.machineVersions {
		bump(&c.MachinesByVersion, e.key, sign*e.n)
	}
}

// Stats returns what the Writer has done so far.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Err is the error of the last commit or push the Writer's goroutine
// tried; nil once one succeeds.
func (w *Writer) Err() error {
	select {
	case <-w.ready:
		if w.loadErr != nil {
			return w.loadErr
		}
	default:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Close stops the goroutine without writing what is pending; call Flush
// first for a graceful shutdown.
func (w *Writer) Close() error {
	w.cancel()
	<-w.done
	return nil
}

func (w *Writer) run(ctx context.Context) {
	defer close(w.done)
	var timer, refresh <-chan time.Time
	if w.opts.Refresh > 0 {
		refresh = time.After(w.opts.Refresh)
	}
	failures := 0
	defer w.saveSums()
	for {
		select {
		case <-ctx.Done():
			return
		case <-refresh:
			refresh = time.After(w.opts.Refresh / 4)
			w.refresh()
		case <-w.wake:
			if timer == nil {
				timer = time.After(w.opts.Interval)
			}
		case <-timer:
			timer = nil
			err := w.Flush(ctx)
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				failures++
				wait := min(w.opts.Interval<<min(failures, 8), time.Minute)
				w.log.Error().Err(err).Dur("retryIn", wait).Msg("status: commit failed")
				timer = time.After(wait)
				continue
			}
			failures = 0
		}
	}
}

// OpenRepository opens the repository whose git directory is gitDir for a
// Writer, without a work tree. Its object cache is small: the Writer
// keeps the trees it builds on itself, and go-git's default cache (96 MiB)
// would keep what the Writer reads — a start's trees, a fetch, a push —
// for the daemon's life.
func OpenRepository(gitDir string) (*git.Repository, error) {
	st := filesystem.NewStorage(osfs.New(gitDir), cache.NewObjectLRU(objectCacheSize))
	g, err := git.Open(st, nil)
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("status: open %s: %w", gitDir, err)
	}
	return g, nil
}

// objectCacheSize bounds OpenRepository's object cache: room for the
// delta bases a packed tree is read through at a start (the clusters/
// tree is about 40 bytes a cluster; go-git keeps no object larger than
// the cache).
const objectCacheSize = 2 * cache.MiByte
