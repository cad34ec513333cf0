package sources

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/gitfleet/gitfleet/internal/secret"
)

// Sentinel errors; match them with errors.Is.
var (
	ErrNotFound    = errors.New("not found")
	ErrNotRepo     = errors.New("not a git repository")
	ErrClosed      = errors.New("repository closed")
	ErrInvalid     = errors.New("fleet is invalid")
	ErrUnsigned    = errors.New("commit is not signed")
	ErrUntrusted   = errors.New("commit is not signed by an allowed key")
	ErrKustomize   = errors.New("kustomize")
	ErrFetchFailed = errors.New("fetch failed")
)

// Repo is an opened fleet repository. Its methods are safe for concurrent
// use; Close releases its file descriptors.
type Repo struct {
	opts   Options
	loc    location
	gitDir string // the folder with objects/ and refs/
	auth   transport.AuthMethod

	mu      sync.Mutex // serialises go-git access to the object store
	repo    *git.Repository
	storage *filesystem.Storage
	closed  bool

	parsed *parseCache
	// lastTree is the snapshot of the tree read last, whose entries the
	// next read reuses for files that did not change. Under mu.
	lastTree *snapshot
	// spareIns is the inputs slice of the last validation, emptied, for
	// the next read to fill: at 10,000 files it is ~1 MB a commit. A
	// read takes it (nil then, so a concurrent read makes its own) and a
	// validation hands its own back when done. Under mu.
	spareIns []input
	// listing is the inputs of the latest validation when they list
	// lastTree and may be patched for the next commit. Under mu.
	listing  *listing
	patches  int // reads that patched a listing (tests count them)
	rendered *renderCache
	// retiring is the background write of an ObjectsOnce cache.
	retiring sync.WaitGroup
}

// remoteName is the name of the remote in a bare clone of a remote repo.
const remoteName = "origin"

// Open opens a local repository in place, or clones a remote one bare into
// opts.DataDir (once; later opens reuse the clone, and Fetch updates it).
func Open(ctx context.Context, opts Options) (*Repo, error) {
	loc, err := parseLocation(opts.Location)
	if err != nil {
		return nil, err
	}
	switch opts.VerifyMode {
	case "", VerifyHead, VerifyAll:
	default:
		return nil, fmt.Errorf("verify mode %q: use %s or %s", opts.VerifyMode, VerifyHead, VerifyAll)
	}
	known := newVerdicts()
	if opts.CacheFile != "" {
		known = loadVerdicts(opts.CacheFile)
	}
	r := &Repo{opts: opts, loc: loc, parsed: newParseCache(known), rendered: newRenderCache()}
	if opts.CacheFile != "" && (opts.KeepObjects || opts.ObjectsOnce) {
		r.parsed.objects = loadObjects(objectCacheFile(opts.CacheFile))
		r.parsed.objects.once = opts.ObjectsOnce && !opts.KeepObjects
	}
	if !loc.remote {
		r.gitDir, err = findGitDir(loc.path)
		if err != nil {
			return nil, err
		}
		return r, r.openStorage()
	}
	if opts.DataDir == "" {
		return nil, fmt.Errorf("open %s: a data directory is needed to clone a remote repository", loc.url)
	}
	r.auth, err = opts.Auth.authMethod(loc)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", loc.url, err)
	}
	r.gitDir = loc.cacheDir(opts.DataDir)
	if _, err := os.Stat(filepath.Join(r.gitDir, "HEAD")); err != nil {
		if err := initMirror(r.gitDir, loc.url); err != nil {
			return nil, err
		}
	}
	if err := r.openStorage(); err != nil {
		return nil, err
	}
	if _, err := r.Fetch(ctx); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// findGitDir returns path/.git for a working repository, path itself for a
// bare one.
func findGitDir(path string) (string, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: no such folder: %w", path, ErrNotRepo)
	}
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("open %s: %w: not a folder", path, ErrNotRepo)
	}
	dotGit := filepath.Join(path, ".git")
	if fi, err := os.Stat(dotGit); err == nil && fi.IsDir() {
		return dotGit, nil
	}
	if _, err := os.Stat(filepath.Join(path, "HEAD")); err == nil {
		if _, err := os.Stat(filepath.Join(path, "objects")); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("open %s: %w (no .git folder; run git init, or give the repository's root)", path, ErrNotRepo)
}

// initMirror creates an empty bare repository whose remote fetches every
// branch to refs/remotes/origin/* and every tag to refs/tags/*. The
// branches under refs/heads/ belong to whoever commits in the clone (the
// status writer's gitfleet/status): a spec fetch never moves them.
func initMirror(dir, url string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("clone %s: %w", url, err)
	}
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		return fmt.Errorf("clone %s: %w", url, err)
	}
	_, err = repo.CreateRemote(&config.RemoteConfig{
		Name:  remoteName,
		URLs:  []string{url},
		Fetch: mirrorRefSpecs,
	})
	if err != nil {
		return fmt.Errorf("clone %s: %w", url, err)
	}
	return nil
}

var mirrorRefSpecs = []config.RefSpec{"+refs/heads/*:refs/remotes/" + remoteName + "/*", "+refs/tags/*:refs/tags/*"}

// BranchRef is the ref that holds branch as the source reads it: the
// remote's branch for a clone, the branch itself for a local repository.
func (r *Repo) BranchRef(branch string) string {
	if r.loc.remote {
		return "refs/remotes/" + remoteName + "/" + branch
	}
	return "refs/heads/" + branch
}

// openStorage opens the object store with KeepDescriptors: reading 10,000
// blobs takes a third of the time (measured); Close releases them.
func (r *Repo) openStorage() error {
	fs := osfs.New(r.gitDir)
	st := filesystem.NewStorageWithOptions(fs, cache.NewObjectLRU(objectLRUSize),
		filesystem.Options{KeepDescriptors: true, LargeObjectThreshold: MaxFileSize})
	repo, err := git.Open(st, nil)
	if err != nil {
		st.Close()
		return fmt.Errorf("open %s: %w", r.gitDir, err)
	}
	r.repo, r.storage = repo, st
	return nil
}

// objectLRUSize bounds go-git's cache of the objects read through the
// store (delta bases of packs, trees). go-git's default, 96 MiB, is
// reached by a daemon only after many revisions, and then stays: more
// than the fleet's records. 16 MiB holds the bases a revision's read
// needs; the source keeps its own trees. (The status writer opens the
// repository on its own: status.OpenRepository.)
const objectLRUSize = 16 * cache.MiByte

// Location is what the repository was opened from.
// Credentials in a URL are shown as user:***@.
func (r *Repo) Location() string { return secret.RedactURL(r.opts.Location) }

// Remote reports whether the repository is a clone of a remote one.
func (r *Repo) Remote() bool { return r.loc.remote }

// GitDir is the folder holding the repository's refs and objects (the bare
// clone for a remote).
func (r *Repo) GitDir() string { return r.gitDir }

// Close releases the repository's file descriptors. Further calls fail with
// ErrClosed.
func (r *Repo) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	// The validation verdicts learnt since the last write (saveEvery,
	// whose write in progress goes first), and the objects of the files
	// parsed.
	r.parsed.known.stop()
	_ = r.parsed.known.save()
	r.retiring.Wait() // an ObjectsOnce write in progress ends first
	_ = r.parsed.objects.save()
	return r.storage.Close()
}

// lock takes the repository lock, failing if it is closed.
func (r *Repo) lock() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	return nil
}
