package status

import (
	"context"
	"errors"
	"fmt"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
)

// push sends the branch to the remote; the remote refuses anything but a
// fast-forward.
func (w *Writer) push(ctx context.Context) error {
	spec := config.RefSpec(w.ref.String() + ":" + w.ref.String())
	err := w.opts.Repo.PushContext(ctx, &git.PushOptions{
		RemoteName: w.opts.Remote, RefSpecs: []config.RefSpec{spec}, Auth: w.opts.Auth,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("push %s to %s: %w", w.opts.Branch, w.opts.Remote, err)
	}
	// A push counts only once the remote's branch is the commit pushed:
	// "already up to date" about another commit is no success.
	if err := w.verifyPushed(ctx); err != nil {
		return err
	}
	w.mu.Lock()
	w.stats.Pushes++
	w.mu.Unlock()
	return nil
}

// fetch makes the local branch what the remote has, so the next commit is
// built on top of it. What was not pushed stays in the outbox and is applied
// again. A remote without the branch leaves the local branch alone.
func (w *Writer) fetch(ctx context.Context) error {
	spec := config.RefSpec("+" + w.ref.String() + ":" + w.ref.String())
	err := w.opts.Repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: w.opts.Remote, RefSpecs: []config.RefSpec{spec}, Auth: w.opts.Auth,
	})
	var noMatch git.NoMatchingRefSpecError
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return nil
	case errors.As(err, &noMatch):
		return nil
	default:
		return fmt.Errorf("fetch %s from %s: %w", w.opts.Branch, w.opts.Remote, err)
	}
}

// verifyPushed reads the remote's branch and checks it is the local tip.
func (w *Writer) verifyPushed(ctx context.Context) error {
	rm, err := w.opts.Repo.Remote(w.opts.Remote)
	if err != nil {
		return fmt.Errorf("verify push of %s: %w", w.opts.Branch, err)
	}
	refs, err := rm.ListContext(ctx, &git.ListOptions{Auth: w.opts.Auth})
	if err != nil {
		return fmt.Errorf("verify push of %s: %w", w.opts.Branch, err)
	}
	w.mu.Lock()
	tip := w.tip
	w.mu.Unlock()
	for _, r := range refs {
		if r.Name() == w.ref {
			if r.Hash() != tip {
				return fmt.Errorf("push %s to %s: the remote is at %s, not %s", w.opts.Branch, w.opts.Remote, r.Hash(), tip)
			}
			return nil
		}
	}
	return fmt.Errorf("push %s to %s: the remote has no such branch after the push", w.opts.Branch, w.opts.Remote)
}
