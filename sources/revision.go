package sources

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// Revision is one commit of the fleet repository, read and validated.
type Revision struct {
	Ref     string // what was asked for: branch, tag or commit
	Commit  string // full commit hash
	Author  string // "Name <email>"
	Time    time.Time
	Message string
	// Signer names the key that signed the commit when verification is on.
	Signer string
	// Fleet is the decoded fleet; nil when the revision is rejected.
	Fleet *v1alpha1.Fleet
	// Errors are the validation errors, each naming file, line and field.
	Errors schemas.Errors
	// Err says why the revision was rejected (errors.Is ErrInvalid,
	// ErrUnsigned or ErrUntrusted); nil for a good revision.
	Err error
	// Places says where the fields of the revision's objects are written,
	// for errors found after validation (the planner's); nil when the
	// revision was not validated (a signature was refused).
	Places *Places
	// Returned: Follow delivers this revision again because the branch's
	// head came back to it (a reset over a rejected head).
	Returned bool
	// keys are the objects' content keys (ObjectKey, ChangedSince).
	keys *objectKeys
}

// ObjectKey is the content key of the revision's object of kind and name:
// its file's blob hash, path and line. Two revisions give an object the
// same key when it is written the same, so the planner re-expands only the
// clusters whose objects changed (planner.ExpandReusing). "" when the
// revision has no such object.
func (r *Revision) ObjectKey(kind, name string) string {
	if r.keys == nil {
		return ""
	}
	k, _ := r.keys.keys.Get(objectRef{kind, name})
	return k
}

// ObjectRef names an object of a revision by kind and name.
type ObjectRef struct{ Kind, Name string }

// ChangedSince names the objects whose content keys differ from prev's,
// when the source read this revision as a change of prev: a source
// reading commit after commit patches the objects of the files a commit
// changed into what it read before, and knows which they are. ok is false
// when it did not (prev is not the revision read just before, or this one
// was read afresh: files added or removed, many changed, names moved);
// then only comparing every ObjectKey tells.
func (r *Revision) ChangedSince(prev *Revision) (changed []ObjectRef, ok bool) {
	if r == nil || prev == nil || r.keys == nil || prev.keys == nil || r.keys.from == 0 || r.keys.from != prev.keys.id {
		return nil, false
	}
	changed = make([]ObjectRef, len(r.keys.changed))
	for i, c := range r.keys.changed {
		changed[i] = ObjectRef{c.kind, c.name}
	}
	return changed, true
}

// Rejected reports whether the revision must not be applied.
func (r *Revision) Rejected() bool { return r.Err != nil }

// Subject is the first line of the commit message.
func (r *Revision) Subject() string {
	s, _, _ := strings.Cut(r.Message, "\n")
	return s
}

// Files returns the fleet files of a commit (or any revision Resolve
// accepts): gitfleet.yaml, the YAML files under its spec.paths with each
// kustomization rendered in place of its sources, and the policy .cue
// files. Nothing is checked out.
func (r *Repo) Files(ctx context.Context, rev string) ([]schemas.File, error) {
	_, ins, _, _, _, err := r.read(ctx, rev, nil)
	if err != nil {
		return nil, err
	}
	files := make([]schemas.File, len(ins))
	for i, in := range ins {
		files[i] = in.File
	}
	return files, nil
}

// read resolves rev and collects its inputs under the repository lock. It
// loads the content of every input that skip (may be nil) does not cover.
//
// listed is the snapshot the inputs were listed from, and patchable says
// whether the next read may patch them (collectListing): a validation
// keeps them for it (Repo.listing).
func (r *Repo) read(ctx context.Context, rev string, skip func(key string) bool) (_ *object.Commit, _ []input, _ schemas.Errors, listed *snapshot, patchable bool, _ error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, nil, false, err
	}
	if err := r.lock(); err != nil {
		return nil, nil, nil, nil, false, err
	}
	defer r.mu.Unlock()
	h, err := r.resolveLocked(rev)
	if err != nil {
		return nil, nil, nil, nil, false, err
	}
	c, err := r.commitLocked(h)
	if err != nil {
		return nil, nil, nil, nil, false, err
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, nil, nil, nil, false, fmt.Errorf("read %s: %w", h, err)
	}
	prev := r.lastTree
	snap, err := treeSnapshot(r.storage, tree, prev)
	if err != nil {
		return nil, nil, nil, nil, false, err
	}
	r.lastTree = snap
	snap.known = skip
	if known := r.parsed.known; known != nil {
		// Sizes are remembered with the verdicts: a blob's size is its
		// content's.
		snap.fits = func(blob string) bool { return known.good(known.key("fits", blob)) }
		snap.fitted = func(blob string) { known.add(known.key("fits", blob)) }
	}
	spare := r.spareIns
	r.spareIns = nil
	var ins []input
	var errs schemas.Errors
	patchable = false
	if last := r.listing; last != nil && last.snap == prev {
		ins, patchable, err = patchListing(snap, last, spare)
		if err != nil {
			return nil, nil, nil, nil, false, fmt.Errorf("read %s: %w", h, err)
		}
		if patchable {
			r.patches++
		}
	}
	if !patchable {
		ins, errs, patchable, err = collectListing(snap, r.rendered, spare)
		if err != nil {
			return nil, nil, nil, nil, false, fmt.Errorf("read %s: %w", h, err)
		}
	}
	for i := range ins {
		if skip != nil && ((ins[i].ent != nil && ins[i].ent.parsed.Load() != nil) || skip(ins[i].key)) {
			continue
		}
		if err := ins[i].load(); err != nil {
			return nil, nil, nil, nil, false, err
		}
	}
	return c, ins, errs, snap, patchable, nil
}

// Revision resolves rev, verifies its signature when Options.Verify is
// set, reads its files and validates them. A revision that fails
// verification or validation is returned with Err set (not as an error);
// the error result is for Git and I/O failures.
func (r *Repo) Revision(ctx context.Context, rev string) (*Revision, error) {
	return r.RevisionSince(ctx, rev, "")
}

// RevisionSince is Revision for a source that applied since (a commit;
// "" for none): with VerifyMode VerifyAll, every commit reachable from rev
// and not from since must be signed by an allowed key. With no applied
// commit only rev itself is checked: a daemon's first revision is where
// its trust starts.
func (r *Repo) RevisionSince(ctx context.Context, rev, since string) (*Revision, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := r.lock(); err != nil {
		return nil, err
	}
	h, err := r.resolveLocked(rev)
	var c *object.Commit
	if err == nil {
		c, err = r.commitLocked(h)
	}
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := newRevision(rev, c)
	if r.opts.Verify != nil {
		signer, err := r.opts.Verify.Verify(c)
		if err == nil && r.opts.VerifyMode == VerifyAll && since != "" && since != c.Hash.String() {
			err = r.verifyBetween(c, since)
		}
		if err != nil {
			out.Err = err
			return out, nil
		}
		out.Signer = signer
	}
	out.Fleet, out.Errors, out.keys, out.Places, err = r.validate(ctx, c.Hash.String())
	if err != nil {
		return nil, err
	}
	if len(out.Errors) > 0 {
		out.Fleet = nil
		out.Err = fmt.Errorf("commit %s: %w: %d error(s), first: %s", short(out.Commit), ErrInvalid, len(out.Errors), out.Errors[0].Error())
	}
	return out, nil
}

func newRevision(ref string, c *object.Commit) *Revision {
	return &Revision{
		Ref:     ref,
		Commit:  c.Hash.String(),
		Author:  fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email),
		Time:    c.Committer.When,
		Message: c.Message,
	}
}

func short(h string) string {
	if len(h) > 12 && plumbing.IsHash(h) {
		return h[:12]
	}
	return h
}

// validate reads rev, loading only the files whose parse result is not
// cached, and validates it.
func (r *Repo) validate(ctx context.Context, rev string) (*v1alpha1.Fleet, schemas.Errors, *objectKeys, *Places, error) {
	_, ins, pre, listed, patchable, err := r.read(ctx, rev, r.parsed.has)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if r.opts.Files != nil {
		r.opts.Files(len(ins))
	}
	fleet, errs, keys, places, err := r.parsed.validate(ins, pre, r.loadLocked)
	// Nothing else holds the inputs now (the parse results keep what
	// they need, and validation let go of the contents): they are the
	// listing the next read patches when they list the tree it starts
	// from, else the slice it fills.
	r.mu.Lock()
	keep := patchable && err == nil && r.lastTree == listed
	if old := r.listing; old != nil && (keep || old.snap != r.lastTree) {
		// Replaced, or no longer of the tree the next read starts from.
		r.listing = nil
		clear(old.ins[:cap(old.ins)])
		if r.spareIns == nil {
			r.spareIns = old.ins[:0]
		}
	}
	if keep {
		r.listing = &listing{snap: listed, ins: ins}
	} else {
		clear(ins[:cap(ins)])
		if r.spareIns == nil {
			r.spareIns = ins[:0]
		}
	}
	r.mu.Unlock()
	if err == nil {
		r.parsed.known.saveEvery(verdictSaveInterval)
		// Under mu, as Close: a Repo closing meanwhile saves the cache
		// itself, and never waits for a write that starts after it.
		r.mu.Lock()
		if !r.closed && r.parsed.objects.retire() {
			r.retiring.Go(r.parsed.objects.retired)
		}
		r.mu.Unlock()
	}
	return fleet, errs, keys, places, err
}

// verdictSaveInterval is how often a repository read revision after
// revision (a daemon's) writes its validation cache file.
const verdictSaveInterval = 30 * time.Second

// loadLocked reads inputs under the repository lock.
func (r *Repo) loadLocked(ins []*input) error {
	if err := r.lock(); err != nil {
		return err
	}
	defer r.mu.Unlock()
	for _, in := range ins {
		if err := in.load(); err != nil {
			return err
		}
	}
	return nil
}

// verifyBetween checks the signature of every commit reachable from head
// and not from since (git log since..head), head excluded (checked by the
// caller).
func (r *Repo) verifyBetween(head *object.Commit, since string) error {
	if err := r.lock(); err != nil {
		return err
	}
	defer r.mu.Unlock()
	stop := map[plumbing.Hash]bool{}
	if base, err := r.commitLocked(plumbing.NewHash(since)); err == nil {
		// Everything reachable from the applied commit was accepted.
		iter := object.NewCommitPreorderIter(base, nil, nil)
		n := 0
		_ = iter.ForEach(func(c *object.Commit) error {
			stop[c.Hash] = true
			if n++; n > maxVerifyWalk {
				return storer.ErrStop
			}
			return nil
		})
	}
	seen := map[plumbing.Hash]bool{head.Hash: true}
	todo := append([]plumbing.Hash(nil), head.ParentHashes...)
	for n := 0; len(todo) > 0; n++ {
		h := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[h] || stop[h] {
			continue
		}
		seen[h] = true
		if n > maxVerifyWalk {
			return fmt.Errorf("commit %s: %w: more than %d commits since the last applied one %s to verify", short(head.Hash.String()), ErrUntrusted, maxVerifyWalk, short(since))
		}
		c, err := r.commitLocked(h)
		if err != nil {
			return err
		}
		if _, err := r.opts.Verify.Verify(c); err != nil {
			return fmt.Errorf("commit %s: every commit since the last applied one must be signed (--verify-mode all): %w", short(head.Hash.String()), err)
		}
		todo = append(todo, c.ParentHashes...)
	}
	return nil
}
