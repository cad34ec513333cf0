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

// Fetch brings a remote repository's clone up to date with every branch
// (as refs/remotes/origin/*) and tag of the remote; it reports whether any
// of them moved. It never touches refs/heads/: the status writer commits
// its branch there and pushes it, and a fetch in between must not reset it.
// For a local repository it does nothing.
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
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate), errors.Is(err, transport.ErrEmptyRemoteRepository):
		return !maps.Equal(before, r.refsLocked()), nil
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		return false, fmt.Errorf("fetch %s: %w: %w (check the credentials)", r.loc.url, ErrFetchFailed, err)
	}
	return false, fmt.Errorf("fetch %s: %w: %w", r.loc.url, ErrFetchFailed, err)
}

// refsLocked maps the remote's branches and tags to their hashes.
func (r *Repo) refsLocked() map[string]string {
	out := map[string]string{}
	it, err := r.repo.References()
	if err != nil {
		return out
	}
	_ = it.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() == plumbing.HashReference && !ref.Name().IsBranch() {
			out[ref.Name().String()] = ref.Hash().String()
		}
		return nil
	})
	return out
}
