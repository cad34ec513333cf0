package sources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// refWatcher reports changes to a branch ref of a local repository: the
// loose ref file, packed-refs and HEAD.
type refWatcher struct {
	w       *fsnotify.Watcher
	gitDir  string
	refFile string
	dirs    []string
	done    chan struct{} // closed when the changes goroutine ends
}

func newRefWatcher(gitDir, branch string) (*refWatcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", gitDir, err)
	}
	rw := &refWatcher{w: w, done: make(chan struct{}), gitDir: gitDir, refFile: filepath.Join(gitDir, "refs", "heads", filepath.FromSlash(branch))}
	// The ref's folder and each parent up to .git: a branch named a/b
	// lives in refs/heads/a, which may not exist yet.
	for d := filepath.Dir(rw.refFile); ; d = filepath.Dir(d) {
		rw.dirs = append(rw.dirs, d)
		if d == gitDir || len(d) <= len(gitDir) {
			break
		}
	}
	if err := rw.add(); err != nil {
		w.Close()
		return nil, err
	}
	return rw, nil
}

// add watches every folder that exists; run again after an overflow or
// when a folder appears.
func (rw *refWatcher) add() error {
	for _, d := range rw.dirs {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		if err := rw.w.Add(d); err != nil {
			return fmt.Errorf("watch %s: %w", d, err)
		}
	}
	return nil
}

// close stops the watcher and waits for the changes goroutine, if any.
func (rw *refWatcher) close(started bool) {
	rw.w.Close()
	if started {
		<-rw.done
	}
}

// relevant reports whether a file event may move the branch.
func (rw *refWatcher) relevant(name string) bool {
	switch name {
	case rw.refFile, filepath.Join(rw.gitDir, "packed-refs"), filepath.Join(rw.gitDir, "HEAD"):
		return true
	}
	for _, d := range rw.dirs[:len(rw.dirs)-1] {
		if name == d { // a parent folder of the ref was created
			_ = rw.add()
			return true
		}
	}
	return false
}

// changes delivers one tick per burst of relevant events: the first event
// ticks at once, later ones within the debounce window tick once at its
// end. It runs until ctx ends.
func (rw *refWatcher) changes(ctx context.Context, window time.Duration) <-chan struct{} {
	out := make(chan struct{}, 1)
	tick := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	go func() {
		defer close(rw.done)
		quiet := time.NewTimer(0)
		<-quiet.C
		inWindow, pending := false, false
		for {
			select {
			case <-ctx.Done():
				quiet.Stop()
				return
			case ev, ok := <-rw.w.Events:
				if !ok {
					return
				}
				if !rw.relevant(ev.Name) {
					continue
				}
				if inWindow {
					pending = true
					continue
				}
				tick()
				inWindow = true
				quiet.Reset(window)
			case err, ok := <-rw.w.Errors:
				if !ok {
					return
				}
				if errors.Is(err, fsnotify.ErrEventOverflow) {
					_ = rw.add() // events were lost: rescan
					tick()
				}
			case <-quiet.C:
				inWindow = false
				if pending {
					pending = false
					tick()
					inWindow = true
					quiet.Reset(window)
				}
			}
		}
	}()
	return out
}
