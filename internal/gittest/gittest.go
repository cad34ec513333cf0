// Package gittest makes real Git repositories for tests: working repos whose
// commits are made with the git CLI as a user would, bare remotes, and a
// smart-HTTP server that runs the real git http-backend over net/http/cgi on
// loopback.
package gittest

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Repo is a working repository in a temporary folder.
type Repo struct {
	t   testing.TB
	Dir string
	env []string
}

// Env is the environment every git command of a test runs with: a fixed
// author and committer, a temporary HOME and no system or global config.
func Env(home string) []string {
	return append(os.Environ(),
		"HOME="+home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"),
		"GIT_AUTHOR_NAME=Ada Tester",
		"GIT_AUTHOR_EMAIL=ada@example.com",
		"GIT_COMMITTER_NAME=Ada Tester",
		"GIT_COMMITTER_EMAIL=ada@example.com",
		"GIT_TERMINAL_PROMPT=0",
		// No background gc: tests and benchmarks decide when to pack.
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=gc.auto", "GIT_CONFIG_VALUE_0=0",
	)
}

// NewRepo runs git init -b main in a new temporary folder.
func NewRepo(t testing.TB) *Repo {
	t.Helper()
	r := &Repo{t: t, Dir: t.TempDir(), env: Env(t.TempDir())}
	r.Git("init", "-q", "-b", "main")
	return r
}

// NewRepoInMemory is NewRepo on /dev/shm when the machine has it: for
// benchmarks that create thousands of files, which a disk skews
// (measured: file creation dominates there).
func NewRepoInMemory(t testing.TB) *Repo {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "gittest-")
	if err != nil {
		return NewRepo(t)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := &Repo{t: t, Dir: dir, env: Env(t.TempDir())}
	r.Git("init", "-q", "-b", "main")
	return r
}

// Git runs git in the repository and returns its trimmed standard output;
// a failure fails the test.
func (r *Repo) Git(args ...string) string {
	r.t.Helper()
	return Run(r.t, r.Dir, r.env, args...)
}

// Run runs git in dir with env and returns its trimmed standard output.
func Run(t testing.TB, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// Write writes files (path → content, slash-separated paths) into the work
// tree; an empty content removes the file.
func (r *Repo) Write(files map[string]string) {
	r.t.Helper()
	for p, data := range files {
		full := filepath.Join(r.Dir, filepath.FromSlash(p))
		if data == "" {
			if err := os.Remove(full); err != nil && !os.IsNotExist(err) {
				r.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

// Commit writes files, stages everything and commits; it returns the new
// commit's hash.
func (r *Repo) Commit(msg string, files map[string]string) string {
	r.t.Helper()
	r.Write(files)
	r.Git("add", "-A")
	r.Git("commit", "-q", "--allow-empty", "-m", msg)
	return r.Head()
}

// Head returns the hash of HEAD.
func (r *Repo) Head() string {
	r.t.Helper()
	return r.Git("rev-parse", "HEAD")
}

// NewBare makes an empty bare repository dir/name (name should end in .git)
// that accepts pushes over HTTP.
func NewBare(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	Run(t, dir, Env(t.TempDir()), "init", "-q", "--bare", "-b", "main", p)
	Run(t, p, Env(t.TempDir()), "config", "http.receivepack", "true")
	return p
}

// Server serves every bare repository under Root with git http-backend.
type Server struct {
	Root string
	URL  string // http://127.0.0.1:port, without a trailing slash
	srv  *httptest.Server
	n    atomic.Int64
}

// Fetches counts the fetches served (upload-pack requests, i.e. ref
// advertisements for git-upload-pack).
func (s *Server) Fetches() int64 { return s.n.Load() }

// NewServer starts a smart-HTTP server on loopback for the bare
// repositories under root; it stops when the test ends.
func NewServer(t testing.TB, root string) *Server {
	return NewServerWith(t, root, func(h http.Handler) http.Handler { return h })
}

// NewServerWith is NewServer with middleware around git http-backend, e.g.
// an authentication check.
func NewServerWith(t testing.TB, root string, wrap func(http.Handler) http.Handler) *Server {
	t.Helper()
	gitExec, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(gitExec)), "git-http-backend")
	h := &cgi.Handler{
		Path: backend,
		Env: []string{
			"GIT_PROJECT_ROOT=" + root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"HOME=" + t.TempDir(),
		},
		InheritEnv: []string{"PATH"},
	}
	s := &Server{Root: root}
	s.srv = httptest.NewServer(wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("service") == "git-upload-pack" {
			s.n.Add(1)
		}
		h.ServeHTTP(w, r)
	})))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// CommitGo writes files, stages everything with the git CLI and commits with
// go-git, so tests can sign with keys made in Go (opts.Signer or
// opts.SignKey); it returns the new commit's hash.
func (r *Repo) CommitGo(msg string, files map[string]string, opts git.CommitOptions) string {
	r.t.Helper()
	r.Write(files)
	r.Git("add", "-A")
	repo, err := git.PlainOpen(r.Dir)
	if err != nil {
		r.t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	sig := &object.Signature{Name: "Ada Tester", Email: "ada@example.com", When: time.Now()}
	opts.Author, opts.Committer, opts.AllowEmptyCommits = sig, sig, true
	h, err := wt.Commit(msg, &opts)
	if err != nil {
		r.t.Fatalf("commit %q: %v", msg, err)
	}
	return h.String()
}
