package status

import "github.com/go-git/go-git/v5/plumbing"

// Committed returns the status branch as the Writer last saw or wrote it:
// what a new leader with an empty store rebuilds its records from. It is
// nil when the branch has no commit yet. Changes still pending are not in
// it.
func (w *Writer) Committed() (*Snapshot, error) {
	if err := w.wait(); err != nil {
		return nil, err
	}
	w.mu.Lock()
	tip := w.tip
	w.mu.Unlock()
	if tip == plumbing.ZeroHash {
		return nil, nil
	}
	return ReadAt(w.store, tip)
}
