package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"

	"github.com/gitfleet/gitfleet/internal/loose"
)

// Trailers of a status commit.
const (
	TrailerSourceCommit = "Gitfleet-Source-Commit"
	TrailerPlan         = "Gitfleet-Plan"
)

const maxAttempts = 6

// errRaced: the branch moved between reading it and setting it.
var errRaced = errors.New("status branch moved concurrently")

// Flush commits what is pending now, and pushes when a remote is set. A
// commit that races with another writer is rebuilt on top of the other's and
// retried with backoff.
func (w *Writer) Flush(ctx context.Context) error {
	if err := w.Ready(ctx); err != nil {
		return err
	}
	select {
	case <-w.done:
		return ErrClosed
	default:
	}
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	w.stageFleet()
	w.mu.Unlock()
	w.encodePending()
	w.mu.Lock()
	idle := len(w.outbox) == 0 && (w.opts.Remote == "" || w.tip == w.pushed)
	w.mu.Unlock()
	if idle {
		return nil
	}
	var err error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 {
			w.mu.Lock()
			w.stats.Retries++
			w.mu.Unlock()
			if err := sleep(ctx, time.Duration(25<<attempt)*time.Millisecond); err != nil {
				return err
			}
		}
		if err := w.fenced(); err != nil {
			return err
		}
		err = w.commit()
		if errors.Is(err, errRaced) {
			w.log.Debug().Msg("status: branch moved while committing; rebuilding on top")
			continue
		}
		if w.reindexed(err) {
			w.log.Debug().Err(err).Msg("status: an object was packed under the writer; read the packs again")
			continue
		}
		if err != nil {
			return err
		}
		if w.opts.Remote == "" {
			w.settled()
			return nil
		}
		if err := w.fenced(); err != nil {
			return err
		}
		if err = w.push(ctx); err == nil {
			w.settled()
			return nil
		}
		if w.opts.OnPushFailure != nil {
			w.opts.OnPushFailure()
		}
		if ferr := w.fetch(ctx); ferr != nil {
			return fmt.Errorf("status push: %w (and fetch: %v)", err, ferr)
		}
		w.log.Debug().Err(err).Msg("status: push rejected; fetched and rebuilding on top")
	}
	return fmt.Errorf("status commit: gave up after %d attempts: %w", maxAttempts, err)
}

// reindexed says whether err is an object the writer knows that go-git
// did not find, and if so has go-git read the repository's pack indexes
// again, so that trying once more finds it. git gc (by hand, or git's own
// gc --auto in a user's repository as they commit) packs the loose objects
// the writer wrote and removes them; go-git does not see a new pack until
// it is told to look.
func (w *Writer) reindexed(err error) bool {
	r, ok := w.store.(interface{ Reindex() })
	if !ok || !errors.Is(err, plumbing.ErrObjectNotFound) {
		return false
	}
	r.Reindex()
	return true
}

// fenced asks Options.Fence whether this writer may still write.
func (w *Writer) fenced() error {
	if w.opts.Fence == nil {
		return nil
	}
	if err := w.opts.Fence(); err != nil {
		return fmt.Errorf("status: not writing: %w", err)
	}
	return nil
}

// settled empties the outbox once its changes are durable.
func (w *Writer) settled() {
	w.mu.Lock()
	clear(w.outbox)
	w.pushed = w.tip
	w.mu.Unlock()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// readTip returns the branch's commit, zero when it does not exist.
func (w *Writer) readTip() (plumbing.Hash, error) {
	r, err := w.store.Reference(w.ref)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, w.damagedRef()
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read %s: %w", w.ref, err)
	}
	return r.Hash(), nil
}

// commit writes the outbox's changes that differ from the branch as one
// commit on top of it.
func (w *Writer) commit() error {
	tip, err := w.readTip()
	if err != nil {
		return err
	}
	base := tip // the commit the new one goes on
	if tip != w.tip {
		lost, err := w.lostFrom(tip)
		if err != nil {
			return err
		}
		switch {
		case lost && tip.IsZero():
			// Deleted: made again at the last status commit, which
			// this repository still has, so no history is lost.
			w.mu.Lock()
			base = w.tip
			w.mu.Unlock()
			w.log.Warn().Str("lastWritten", base.String()).Msg("status: the branch was deleted; making it again at the last status commit, its history kept")
		case lost:
			err = w.restore(tip)
		default:
			err = w.reload(tip)
		}
		if err != nil {
			return err
		}
	}
	changes := map[string]change{}
	w.mu.Lock()
	w.stageFleet() // recount with what the branch gained underneath
	if p, ok := w.pending[FleetFile]; ok {
		w.outbox[FleetFile] = p
		delete(w.pending, FleetFile)
	}
	for p, c := range w.outbox {
		if h, ok := w.known[p]; (ok && h != c.hash) || (!ok && c.data != nil) {
			changes[p] = c
		}
	}
	w.mu.Unlock()
	if len(changes) == 0 {
		return nil
	}
	var baseTree plumbing.Hash
	var parents []plumbing.Hash
	if !base.IsZero() {
		baseTree, parents = w.tipTree, []plumbing.Hash{base}
	}
	next := trees{}
	var objects storer.EncodedObjectStorer = w.store
	var pack *packWriter
	if dir := loose.ObjectsDir(w.store); dir != "" && len(changes) >= packMin {
		pack = newPackWriter(w.store, dir)
		objects = pack
	}
	tree, err := buildTree(objects, w.trees, next, baseTree, changes)
	if err == nil && tree.IsZero() {
		tree, err = emptyTree(objects)
	}
	if err != nil {
		return fmt.Errorf("status tree: %w", err)
	}
	sig := object.Signature{Name: w.opts.CommitterName, Email: w.opts.CommitterEmail, When: w.opts.Now()}
	c := &object.Commit{Author: sig, Committer: sig, Message: message(changes), TreeHash: tree, ParentHashes: parents}
	o := w.store.NewEncodedObject()
	if err := c.Encode(o); err != nil {
		return err
	}
	h, err := w.writeCommit(o, pack)
	if err != nil {
		return fmt.Errorf("write commit: %w", err)
	}
	var old *plumbing.Reference
	if !tip.IsZero() {
		old = plumbing.NewHashReference(w.ref, tip)
	}
	if w.beforeCAS != nil {
		w.beforeCAS()
	}
	// Building the commit may have taken a while: the lease is checked
	// again right before the branch moves.
	if err := w.fenced(); err != nil {
		return err
	}
	if err := w.setRef(plumbing.NewHashReference(w.ref, h), old); err != nil {
		if errors.Is(err, storage.ErrReferenceHasChanged) || strings.Contains(err.Error(), "changed concurrently") {
			return errRaced
		}
		return fmt.Errorf("set %s: %w", w.ref, err)
	}
	w.mu.Lock()
	for p, c := range changes {
		if c.data == nil {
			delete(w.known, p)
			continue
		}
		w.known[p] = c.hash
	}
	w.wrote = true
	w.tip, w.tipTree = h, tree
	w.trees = next
	w.stats.Commits++
	w.mu.Unlock()
	if w.opts.OnCommit != nil {
		w.opts.OnCommit()
	}
	w.log.Debug().Str("commit", h.String()).Int("files", len(changes)).Msg("status: committed")
	return nil
}

// writeCommit stores the encoded commit o: with the rest of its objects
// in pack, which it then writes, when there is one. go-git is told to read
// the repository's packs again, as it is after git gc (reindexed), so
// that it finds what the pack holds.
func (w *Writer) writeCommit(o plumbing.EncodedObject, pack *packWriter) (plumbing.Hash, error) {
	if pack == nil {
		return w.store.SetEncodedObject(o)
	}
	r, err := o.Reader()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	data, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := pack.add(plumbing.CommitObject, data)
	var written ownPack
	if err == nil {
		written.name, written.size, err = pack.write()
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	// Merged with those written before (keepPacks): the objects of the
	// commit about to be set are in the merged pack before any goes.
	packs, merr := keepPacks(w.packs, written)
	w.packs = packs
	if merr != nil {
		w.log.Warn().Err(merr).Msg("status: could not merge the packs it wrote; they stay as they are, whole")
	}
	if r, ok := w.store.(interface{ Reindex() }); ok {
		r.Reindex()
	}
	w.mu.Lock()
	w.stats.Packs++
	w.mu.Unlock()
	return h, nil
}

// pruneSums keeps the summaries of the files at tip once the others (of
// files since rewritten by others) outnumber them. Call with w.mu held.
func (w *Writer) pruneSums() {
	if len(w.sums) <= 2*len(w.known)+1024 {
		return
	}
	keep := make(map[plumbing.Hash]clusterSum, len(w.known))
	for _, h := range w.known {
		if s, ok := w.sums[h]; ok {
			keep[h] = s
		}
	}
	w.sums = keep
}

// reload makes tip the Writer's base: the file hashes it compares against
// and the cluster summaries fleet.yaml counts. Only files whose blob changed
// are decoded again.
func (w *Writer) reload(tip plumbing.Hash) error {
	var tree plumbing.Hash
	if !tip.IsZero() {
		c, err := object.GetCommit(w.store, tip)
		if err != nil {
			return fmt.Errorf("read %s: %w", tip, err)
		}
		tree = c.TreeHash
	}
	hashes, err := fileHashes(w.store, tree)
	if err != nil {
		return err
	}
	w.mu.Lock()
	old := maps.Clone(w.known)
	w.mu.Unlock()
	sums := map[string]*clusterSum{} // nil: removed
	var fleet *FleetStatus
	for p, h := range hashes {
		if old[p] == h {
			continue
		}
		if p != FleetFile {
			w.mu.Lock()
			s, ok := w.sums[h]
			if c, cached := w.cachedSums[h]; cached && !ok {
				s, ok = c, true
				w.sums[h] = c
			}
			w.mu.Unlock()
			if ok {
				sums[clusterName(p)] = &s
				continue
			}
		}
		data, err := loose.ReadBlob(w.store, h)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		w.mu.Lock()
		w.stats.FilesRead++
		w.mu.Unlock()
		if p == FleetFile {
			f, err := DecodeFleet(data)
			if err != nil {
				w.log.Warn().Err(err).Msg("status: fleet.yaml on the branch does not decode; rewriting it")
			}
			fleet = &f
			continue
		}
		s, ok := quickSummary(data)
		if !ok {
			c, err := DecodeCluster(data)
			if err != nil {
				w.log.Warn().Err(err).Str("path", p).Msg("status: file on the branch does not decode; it is replaced when the cluster is next set")
			}
			s = summarize(c)
			ok = err == nil
		}
		w.mu.Lock()
		if ok {
			w.sums[h] = s
			w.sumsLearnt++
		} else {
			w.unreadable[h] = true
		}
		w.mu.Unlock()
		sums[clusterName(p)] = &s
	}
	for p := range old {
		if _, ok := hashes[p]; !ok && p != FleetFile {
			sums[clusterName(p)] = nil
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known, w.tip, w.tipTree = hashes, tip, tree
	w.pruneSums()
	for name, s := range sums {
		_, pending := w.pending[ClusterPath(name)]
		if _, out := w.outbox[ClusterPath(name)]; out || pending {
			continue // the caller's newer word wins
		}
		if s == nil {
			w.dropSum(name)
		} else {
			w.setSum(name, *s)
		}
	}
	if fleet != nil && w.fleetSet == nil {
		fleet.Counts = Counts{}
		w.fleet = fleet.normalized()
	}
	if len(sums) > 0 || fleet != nil {
		w.dirty = true // recount; an unchanged fleet.yaml encodes the same and is not written
	}
	return nil
}

// lostFrom says whether tip lacks the commit the Writer last saw or wrote
// (with a remote, the remote's branch as last seen: a local commit whose
// push was rejected was never on it): the branch was deleted, or forced
// back or elsewhere, rather than moved on by another writer. Status
// commits go forward in time, so the walk stops at commits an hour older
// than that one — but only once it has passed maxOldWalk of them: another
// writer whose clock is behind (a replica that led meanwhile) makes
// commits that look older than this writer's last, and a branch it moved
// on must not be taken for one forced back, whose files would then be put
// back over the other writer's newer ones.
func (w *Writer) lostFrom(tip plumbing.Hash) (bool, error) {
	w.mu.Lock()
	last := w.tip
	if w.opts.Remote != "" {
		last = w.pushed
	}
	w.mu.Unlock()
	if last.IsZero() {
		return false, nil
	}
	lc, err := object.GetCommit(w.store, last)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		// Gone from the repository too (a git gc pruned it once no
		// branch held it): nothing to restore from or to make the branch
		// again at, and no commit may name it as its parent. The status
		// goes on from what the branch holds, as any writer's would.
		w.log.Warn().Str("lastWritten", last.String()).Msg("status: the last status commit is no longer in the repository; going on from what the branch holds")
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", last, err)
	}
	if tip.IsZero() {
		return true, nil
	}
	oldest := lc.Committer.When.Add(-time.Hour)
	old := 0
	seen := map[plumbing.Hash]bool{}
	for todo := []plumbing.Hash{tip}; len(todo) > 0; {
		h := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if h == last {
			return false, nil
		}
		if seen[h] {
			continue
		}
		seen[h] = true
		c, err := object.GetCommit(w.store, h)
		if err != nil {
			return false, fmt.Errorf("read %s: %w", h, err)
		}
		if c.Committer.When.Before(oldest) {
			if old++; old > maxOldWalk {
				continue
			}
		}
		todo = append(todo, c.ParentHashes...)
	}
	return true, nil
}

// maxOldWalk is how many commits older than an hour before the writer's
// last one lostFrom walks: over five hours of another writer's commits at
// the most a writer makes (one every DefaultInterval), a few hundred
// milliseconds of reading when the branch was truly forced back, which is
// rare.
const maxOldWalk = 10000

// restore makes tip, which lost the Writer's last commit (forced back or
// elsewhere), its base, and
// stages every file as that commit had it (or its removal), under what the
// caller set since: the next commit puts the whole status back on top of
// what the branch now holds. The history the branch lost stays lost.
func (w *Writer) restore(tip plumbing.Hash) error {
	w.mu.Lock()
	last, prev, prevSums, prevFleet := w.tip, maps.Clone(w.known), maps.Clone(w.clusters), w.fleet
	if w.opts.Remote != "" {
		last = w.pushed
	}
	w.mu.Unlock()
	if err := w.reload(tip); err != nil {
		return err
	}
	w.log.Warn().Str("lastWritten", last.String()).Str("found", tip.String()).
		Msg("status: the branch no longer holds the last status commit (forced back or elsewhere): writing the whole status again on top; the commits it lost are not on it (git branch <name> " + last.String() + " keeps them while git keeps their objects)")
	w.mu.Lock()
	defer w.mu.Unlock()
	busy := func(p string) bool {
		_, pending := w.pending[p]
		_, out := w.outbox[p]
		return pending || out
	}
	for p, h := range prev {
		if p == FleetFile || w.known[p] == h || busy(p) {
			continue
		}
		data, err := loose.ReadBlob(w.store, h)
		if err != nil {
			return fmt.Errorf("restoring %s as last written: %w", p, err)
		}
		w.seq++
		w.outbox[p] = change{data: data, hash: h, summary: clusterName(p) + ": restored", seq: w.seq}
		if s, ok := prevSums[clusterName(p)]; ok {
			w.setSum(clusterName(p), s)
		}
	}
	for p := range w.known {
		if _, had := prev[p]; had || p == FleetFile || busy(p) {
			continue
		}
		w.seq++
		w.outbox[p] = change{summary: clusterName(p) + ": removed, as restored", seq: w.seq}
		w.dropSum(clusterName(p))
	}
	w.fleet, w.dirty = prevFleet, true
	return nil
}

func clusterName(path string) string {
	return strings.TrimSuffix(strings.TrimPrefix(path, ClustersDir+"/"), ".yaml")
}

// message summarises changes: a subject of the first lines, a body with one
// line per changed file, and the trailers of every distinct origin.
func message(changes map[string]change) string {
	paths := slices.Sorted(maps.Keys(changes))
	var lines []string
	for _, p := range paths {
		if s := changes[p].summary; s != "" {
			lines = append(lines, s)
		}
	}
	if len(lines) == 0 {
		lines = []string{"fleet: counts"}
	}
	subject := ""
	for i, l := range lines {
		next := subject
		if next != "" {
			next += "; "
		}
		next += l
		if i > 0 && len(next) > 100 {
			subject += fmt.Sprintf("; and %d more", len(lines)-i)
			break
		}
		subject = next
	}
	var b strings.Builder
	b.WriteString(subject)
	b.WriteString("\n\n")
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	byseq := slices.SortedFunc(maps.Values(changes), func(a, b change) int { return int(a.seq - b.seq) })
	var commits, plans []string
	for _, c := range byseq {
		if s := c.origin.SourceCommit; s != "" && !slices.Contains(commits, s) {
			commits = append(commits, s)
		}
		if p := c.origin.PlanID; p != "" && !slices.Contains(plans, p) {
			plans = append(plans, p)
		}
	}
	if len(commits)+len(plans) > 0 {
		b.WriteByte('\n')
	}
	for _, s := range commits {
		fmt.Fprintf(&b, "%s: %s\n", TrailerSourceCommit, s)
	}
	for _, p := range plans {
		fmt.Fprintf(&b, "%s: %s\n", TrailerPlan, p)
	}
	return b.String()
}
