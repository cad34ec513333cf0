package sources

import (
	"context"
	"errors"
	"fmt"
	"maps"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Fetch brings a remote repository's clone up to date with every branch and
// tag of the remote; it reports whether any ref moved. For a local
// repository it does nothing.
func (r *Repo) Fetch(ctx context.Context) (changed bool, err error) {
	if !r.loc.remote {
		return false, nil
	}
	if err := r.lock(); err != nil {
		return false, err
	}
	defer r.mu.Unlock()
	before := r.refsLocked()
	err = r.repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: remoteName,
		RefSpecs:   mirrorRefSpecs,
		Auth:       r.auth,
		Force:      true,
		Tags:       git.NoTags, // the refspecs already name tags
		// No Prune: the status writer commits to its branch in this clone
		// before pushing it, and must not see it deleted in between.
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate), errors.Is(err, transport.ErrEmptyRemoteRepository):
		return !maps.Equal(before, r.refsLocked()), nil
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		return false, fmt.Errorf("fetch %s: %w: %w (check the credentials)", r.loc.url, ErrFetchFailed, err)
	}
	return false, fmt.Errorf("fetch %s: %w: %w", r.loc.url, ErrFetchFailed, err)
}

// refsLocked maps every branch and tag to its hash.
func (r *Repo) refsLocked() map[string]string {
	out := map[string]string{}
	it, err := r.repo.References()
	if err != nil {
		return out
	}
	_ = it.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() == plumbing.HashReference {
			out[ref.Name().String()] = ref.Hash().String()
		}
		return nil
	})
	return out
}
