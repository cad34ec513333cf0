package secret

import (
	"slices"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:tok3n@git.example.com/fleet.git":  "https://user:***@git.example.com/fleet.git",
		"https://ghp_tok3n@github.com/acme/fleet":       "https://***@github.com/acme/fleet",
		"nats://gitfleet:s3cret@127.0.0.1:4222":         "nats://gitfleet:***@127.0.0.1:4222",
		"nats://a:p1@h1:4222,nats://b:p2@h2:4222":       "nats://a:***@h1:4222,nats://b:***@h2:4222",
		"ssh://git@host:2222/fleet.git":                 "ssh://git@host:2222/fleet.git",
		"git@github.com:acme/fleet.git":                 "git@github.com:acme/fleet.git",
		"https://git.example.com/fleet?who=a@b":         "https://git.example.com/fleet?who=a@b",
		"/srv/git/fleet":                                "/srv/git/fleet",
		"https://user:p%40ss@git.example.com/x.git":     "https://user:***@git.example.com/x.git",
		"https://user:pa:ss@git.example.com/x.git#frag": "https://user:***@git.example.com/x.git#frag",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStripUserinfo(t *testing.T) {
	s, u, p := StripUserinfo("https://user:p%40ss@git.example.com/x.git")
	if s != "https://git.example.com/x.git" || u != "user" || p != "p@ss" {
		t.Errorf("StripUserinfo = %q, %q, %q", s, u, p)
	}
}

// TestChildEnv: a local node inherits none of the daemon's secrets.
func TestChildEnv(t *testing.T) {
	got := ChildEnv([]string{"PATH=/bin", "GITFLEET_GIT_TOKEN=t", "GITFLEET_GIT_PASSWORD=g", "GITFLEET_WEBHOOK_SECRET=w",
		"GITFLEET_NATS_PASSWORD=p", "GITFLEET_NATS_TOKEN=n", "GITFLEET_UI_TOKEN=u", "HOME=/h"})
	if want := []string{"PATH=/bin", "HOME=/h"}; !slices.Equal(got, want) {
		t.Errorf("ChildEnv = %v, want %v", got, want)
	}
}
