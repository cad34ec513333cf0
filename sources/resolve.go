package sources

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Resolve turns a branch, tag, full or abbreviated commit hash, or any
// revision go-git understands (HEAD, main~1) into a commit hash.
func (r *Repo) Resolve(ctx context.Context, rev string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := r.lock(); err != nil {
		return "", err
	}
	defer r.mu.Unlock()
	h, err := r.resolveLocked(rev)
	if err != nil {
		return "", err
	}
	return h.String(), nil
}

func (r *Repo) resolveLocked(rev string) (plumbing.Hash, error) {
	if rev == "" {
		rev = "HEAD"
	}
	candidates := []string{rev}
	if b, ok := strings.CutPrefix(rev, "refs/heads/"); ok && r.loc.remote {
		// The remote's branch: a clone keeps it under refs/remotes/.
		candidates = []string{r.BranchRef(b), rev}
	}
	if !strings.HasPrefix(rev, "refs/") && plumbing.IsHash(rev) == false {
		if r.loc.remote {
			candidates = append(candidates, r.BranchRef(rev))
		}
		candidates = append(candidates, "refs/heads/"+rev, "refs/tags/"+rev)
	}
	var h *plumbing.Hash
	var err error
	for _, c := range candidates {
		err = r.retryReindex(func() error {
			var e error
			h, e = r.repo.ResolveRevision(plumbing.Revision(c))
			return e
		})
		if err == nil {
			break
		}
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("resolve %q in %s: %w (no such branch, tag or commit)", rev, r.Location(), ErrNotFound)
	}
	// An annotated tag resolves to the tag object on some paths; peel it.
	c, err := r.commitLocked(*h)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("resolve %q: %w", rev, err)
	}
	return c.Hash, nil
}

// retryReindex runs fn and, if an object is missing, re-reads the pack
// indexes (git gc or a fetch by another process wrote new packs) and runs
// it once more.
func (r *Repo) retryReindex(fn func() error) error {
	err := fn()
	if errors.Is(err, plumbing.ErrObjectNotFound) || errors.Is(err, plumbing.ErrReferenceNotFound) {
		r.storage.Reindex()
		err = fn()
	}
	return err
}

func (r *Repo) commitLocked(h plumbing.Hash) (*object.Commit, error) {
	var c *object.Commit
	err := r.retryReindex(func() error {
		var e error
		c, e = object.GetCommit(r.storage, h)
		if errors.Is(e, plumbing.ErrObjectNotFound) {
			if t, te := object.GetTag(r.storage, h); te == nil {
				c, e = t.Commit()
			}
		}
		return e
	})
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", h, err)
	}
	return c, nil
}
