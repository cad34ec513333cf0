// Package secret keeps credentials out of what gitfleet prints and passes
// on: URLs with a password are shown as user:***@host, and child processes
// get an environment without the daemon's secrets.
package secret

import (
	"net/url"
	"strings"
)

// Mask replaces a secret when printed.
const Mask = "***"

// RedactURL returns s with the password of its user information replaced
// by Mask (https://user:***@host/…). A user name alone is masked too for
// HTTP URLs, where it is often a token (https://***@host/…); for other
// schemes (ssh://git@host) it is kept. Anything that does not parse as a
// URL with a scheme is returned as it is.
// A comma-separated list of URLs (NATS servers) is redacted URL by URL.
func RedactURL(s string) string {
	if !strings.Contains(s, "://") || !strings.Contains(s, "@") {
		return s
	}
	if strings.Contains(s, ",") {
		parts := strings.Split(s, ",")
		for i, p := range parts {
			parts[i] = RedactURL(p)
		}
		return strings.Join(parts, ",")
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	user := u.User.Username()
	_, hasPassword := u.User.Password()
	switch {
	case hasPassword:
		return u.Scheme + "://" + user + ":" + Mask + "@" + afterUserinfo(s)
	case u.Scheme == "http" || u.Scheme == "https":
		return u.Scheme + "://" + Mask + "@" + afterUserinfo(s)
	}
	return s
}

// afterUserinfo is s from the host on, as written.
func afterUserinfo(s string) string {
	rest := s[strings.Index(s, "://")+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	return rest[at+1:]
}

// StripUserinfo returns s without its user information, and the user and
// password it held ("" when none).
func StripUserinfo(s string) (stripped, user, password string) {
	u, err := url.Parse(s)
	if err != nil || u.User == nil || !strings.Contains(s, "://") {
		return s, "", ""
	}
	user = u.User.Username()
	password, _ = u.User.Password()
	return u.Scheme + "://" + afterUserinfo(s), user, password
}

// secretEnv are the variables that hold the daemon's own secrets: a child
// (a local node) never needs them.
var secretEnv = []string{"GITFLEET_GIT_TOKEN", "GITFLEET_GIT_PASSWORD", "GITFLEET_WEBHOOK_SECRET",
	"GITFLEET_NATS_PASSWORD", "GITFLEET_NATS_TOKEN", "GITFLEET_UI_TOKEN"}

// ChildEnv returns env without the daemon's secrets; the caller adds back
// the ones the child needs.
func ChildEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		secret := false
		for _, s := range secretEnv {
			if name == s {
				secret = true
				break
			}
		}
		if !secret {
			out = append(out, kv)
		}
	}
	return out
}
