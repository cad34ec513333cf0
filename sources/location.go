package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gitfleet/gitfleet/internal/secret"
)

// scpLike matches git@host:path (user optional, no scheme).
var scpLike = regexp.MustCompile(`^(?:[A-Za-z0-9._~-]+@)?[A-Za-z0-9.-]+:[^/\\]`)

// location is a classified Options.Location.
type location struct {
	remote bool
	url    string // remote only: what go-git fetches from
	path   string // local only: absolute path
	ssh    bool
	http   bool
	// user and password came in the URL's user information: taken out
	// of url, so they are never printed, stored in the clone's config or
	// hashed into its folder name; Auth uses them when it has none.
	user, password string
}

// IsRemote reports whether loc names a repository to clone (a URL, or
// git@host:path), not a folder on this machine.
func IsRemote(loc string) bool {
	l, err := parseLocation(loc)
	return err == nil && l.remote
}

func parseLocation(loc string) (location, error) {
	switch {
	case loc == "":
		return location{}, fmt.Errorf("repository location is empty: give a path or a URL")
	case strings.HasPrefix(loc, "http://"), strings.HasPrefix(loc, "https://"):
		url, user, password := secret.StripUserinfo(loc)
		return location{remote: true, url: url, http: true, user: user, password: password}, nil
	case strings.HasPrefix(loc, "ssh://"):
		return location{remote: true, url: loc, ssh: true}, nil
	case strings.HasPrefix(loc, "file://"):
		return location{remote: true, url: loc}, nil
	case strings.Contains(loc, "://"):
		return location{}, fmt.Errorf("repository %q: unsupported scheme; use a path, file://, https://, ssh:// or git@host:path", secret.RedactURL(loc))
	case scpLike.MatchString(loc) && !filepath.IsAbs(loc):
		return location{remote: true, url: loc, ssh: true}, nil
	}
	abs, err := filepath.Abs(loc)
	if err != nil {
		return location{}, fmt.Errorf("repository %q: %w", loc, err)
	}
	return location{path: abs}, nil
}

// cacheDir is where a remote's bare clone lives under dataDir.
func (l location) cacheDir(dataDir string) string {
	sum := sha256.Sum256([]byte(l.url))
	return filepath.Join(dataDir, "repos", hex.EncodeToString(sum[:8]))
}
