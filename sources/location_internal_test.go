package sources

import (
	"testing"
	"time"
)

func TestParseLocation(t *testing.T) {
	for loc, want := range map[string]location{
		"git@github.com:acme/fleet.git": {remote: true, ssh: true, url: "git@github.com:acme/fleet.git"},
		"github.com:acme/fleet.git":     {remote: true, ssh: true, url: "github.com:acme/fleet.git"},
		"ssh://git@host:2222/fleet.git": {remote: true, ssh: true, url: "ssh://git@host:2222/fleet.git"},
		"https://git.example.com/fleet": {remote: true, http: true, url: "https://git.example.com/fleet"},
		"file:///srv/git/fleet.git":     {remote: true, url: "file:///srv/git/fleet.git"},
		"/srv/git/fleet":                {path: "/srv/git/fleet"},
		"/srv/with:colon/fleet":         {path: "/srv/with:colon/fleet"},
	} {
		got, err := parseLocation(loc)
		if err != nil || got != want {
			t.Errorf("parseLocation(%q) = %+v, %v; want %+v", loc, got, err, want)
		}
		if IsRemote(loc) != want.remote {
			t.Errorf("IsRemote(%q) = %v, want %v", loc, !want.remote, want.remote)
		}
	}
	for _, bad := range []string{"", "ftp://x/y"} {
		if _, err := parseLocation(bad); err == nil {
			t.Errorf("parseLocation(%q) succeeded", bad)
		}
	}
}

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	interval, maxWait := time.Second, 10*time.Second
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 50: 10 * time.Second} {
		got := backoff(interval, maxWait, n)
		if got < want*9/10 || got > want*11/10 {
			t.Errorf("backoff after %d failures = %v, want %v ± 10%%", n, got, want)
		}
	}
}
