package dashboard

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// Users are the people the dashboard lets in with HTTP basic auth: each
// user's bcrypt hash, as htpasswd -B writes them.
type Users map[string][]byte

// ReadUsers reads an htpasswd file of bcrypt entries (user:$2y$…), one a
// line; blank lines and lines starting with # are skipped. The file must
// not be readable by others, and an entry in another scheme (MD5, SHA-1,
// crypt, plain) is refused with the line that holds it: those are cheap
// to guess from a stolen file.
func ReadUsers(path string) (Users, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("dashboard users: %w", err)
	}
	if st.Mode().Perm()&0o007 != 0 {
		return nil, fmt.Errorf("dashboard users %s: mode %o lets others read it; run chmod 600 %s", path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dashboard users: %w", err)
	}
	users := Users{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("%s:%d: want user:hash, as htpasswd -nB USER prints", path, n)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return nil, fmt.Errorf("%s:%d: user %s: the hash is not bcrypt ($2y$…); make it with htpasswd -B %s %s", path, n, user, path, user)
		}
		if _, dup := users[user]; dup {
			return nil, fmt.Errorf("%s:%d: user %s is listed twice", path, n, user)
		}
		users[user] = []byte(hash)
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("dashboard users %s: no user in the file", path)
	}
	return users, nil
}

// Protected says whether the options ask who is reading: a token or users.
func (o Options) Protected() bool { return o.Token != "" || len(o.Users) > 0 }

// guard asks for the token (Authorization: Bearer, a cookie, or ?token=
// which sets the cookie, so links work after the first visit) or a user's
// password (basic auth; the browser asks for it).
func (o Options) guard(next http.Handler) http.Handler {
	tokenOK := func(t string) bool {
		return o.Token != "" && subtle.ConstantTimeCompare([]byte(t), []byte(o.Token)) == 1
	}
	basic := newPasswords(o.Users)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bearer, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && tokenOK(bearer) {
			next.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie("gitfleet-ui"); err == nil && tokenOK(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		if t := r.URL.Query().Get("token"); t != "" && tokenOK(t) {
			http.SetCookie(w, &http.Cookie{Name: "gitfleet-ui", Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			next.ServeHTTP(w, r)
			return
		}
		if user, pass, found := r.BasicAuth(); found && basic.check(user, pass) {
			next.ServeHTTP(w, r)
			return
		}
		var asks []string
		if o.Token != "" {
			asks = append(asks, "its token (--ui-token): ?token=… once, or Authorization: Bearer …")
		}
		if len(o.Users) > 0 {
			w.Header().Set("WWW-Authenticate", `Basic realm="gitfleet", charset="UTF-8"`)
			asks = append(asks, "a user and password of --ui-users")
		}
		http.Error(w, "the dashboard asks for "+strings.Join(asks, ", or "), http.StatusUnauthorized)
	})
}

// passwords checks basic-auth passwords against the users' bcrypt hashes.
// bcrypt is slow on purpose (tens of milliseconds), and a browser sends
// the password with every request, live updates included: a password
// that passed is remembered by a SHA-256 of user and password, in memory
// and for a bounded number of pairs, so only the first request of a
// session pays for bcrypt.
type passwords struct {
	users Users
	mu    sync.Mutex
	known map[[32]byte]bool
}

const maxKnownPasswords = 256

// unknownUser is a bcrypt hash of a random password, compared against
// when the user is not listed; made on first use, not at every start of
// the binary (bcrypt takes tens of milliseconds on purpose).
var unknownUser = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("no user has this password: "+rand.Text()), bcrypt.DefaultCost)
	return h
})

func newPasswords(users Users) *passwords {
	return &passwords{users: users, known: map[[32]byte]bool{}}
}

func (p *passwords) check(user, pass string) bool {
	hash, ok := p.users[user]
	if !ok {
		// As slow as a wrong password, so the time taken does not tell
		// which users exist.
		_ = bcrypt.CompareHashAndPassword(unknownUser(), []byte(pass))
		return false
	}
	key := sha256.Sum256([]byte(user + "\x00" + pass))
	p.mu.Lock()
	seen := p.known[key]
	p.mu.Unlock()
	if seen {
		return true
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(pass)) != nil {
		return false
	}
	p.mu.Lock()
	if len(p.known) >= maxKnownPasswords {
		clear(p.known)
	}
	p.known[key] = true
	p.mu.Unlock()
	return true
}
