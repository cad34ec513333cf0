package sources

import (
	"time"
)

// Options say which repository to read and how.
type Options struct {
	// Location is a local path (working repository or bare), a file://,
	// http(s):// or ssh:// URL, or an scp-like git@host:path.
	Location string
	// DataDir holds the bare clones of remote repositories
	// (DataDir/repos/<hash of the URL>). Required for remotes only.
	DataDir string
	// Auth is used for remote repositories only.
	Auth Auth
	// Verify, when set, makes Revision refuse commits that are not signed by
	// one of its keys.
	Verify *Verifier
	// VerifyMode is VerifyHead (default: only the commit applied is
	// checked, as Flux does) or VerifyAll: every commit since the last
	// applied one must be signed by an allowed key, so an unsigned commit
	// cannot hide under a signed one.
	VerifyMode string
	// CacheFile, when set, keeps validation verdicts (which files passed
	// the schema and policy checks, by content hash) in this file across
	// processes, so a later run checks only what changed;
	// DefaultCacheFile is the CLI's. Without it they are kept in memory
	// for the Repo's life.
	CacheFile string
	// KeepObjects also keeps, beside CacheFile, what each good file was
	// decoded into, so that a later run reads and parses only the files
	// it has not seen (objectCache). For one-shot commands (plan,
	// validate --rev); a daemon, which would hold the entries for its
	// life, uses ObjectsOnce.
	KeepObjects bool
	// ObjectsOnce is KeepObjects for a daemon: the file serves the
	// Repo's first validation that reads the tree (a start's) and is then
	// written, with what that validation used or added, in the
	// background, and let go: a running daemon holds none of it, and its
	// next start parses only the files that changed since. The objects
	// it hands out share nothing with the file's bytes, which a daemon
	// would otherwise keep for its life. With KeepObjects set too,
	// KeepObjects is what happens.
	ObjectsOnce bool
	// Files, if set, is told how many files each revision read lists
	// before they are parsed (plan sizes its garbage-collection floor by
	// it, as validate does with ValidateOptions.Files).
	Files func(n int)
}

// Verify modes.
const (
	VerifyHead = "head"
	VerifyAll  = "all"
)

// maxVerifyWalk bounds the commits VerifyAll checks for one revision.
const maxVerifyWalk = 10000

// Auth says how to authenticate to a remote repository.
type Auth struct {
	// Username and Password are HTTP basic auth.
	Username string
	Password string
	// Token is an HTTP access token, sent as the basic-auth password
	// (username Username, or "git" when empty), which GitHub, GitLab and
	// Gitea all accept.
	Token string
	// SSHKeyFile is a private key for ssh:// and git@host:path URLs;
	// SSHKeyPassphrase decrypts it.
	SSHKeyFile       string
	SSHKeyPassphrase string
	// KnownHostsFile lists the SSH host keys trusted; empty means
	// $SSH_KNOWN_HOSTS or ~/.ssh/known_hosts.
	KnownHostsFile string
}

// Defaults of the change detection.
const (
	DefaultInterval = time.Minute
	DefaultDebounce = 10 * time.Millisecond
)
