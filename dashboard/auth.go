package dashboard

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/gitfleet/gitfleet/internal/clientaddr"
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

// cookieName is the cookie ?token= sets.
const cookieName = "gitfleet-ui"

// cookieLabel is what the cookie's HMAC is of, under the token as its
// key: a label of this use only, so the value is no HMAC the token makes
// anywhere else. A new label signs every browser out.
const cookieLabel = "gitfleet dashboard cookie v1"

// cookieValue is the cookie that stands for token: HMAC-SHA256 of
// cookieLabel keyed by the token. It depends on the token alone, so every
// replica of the daemon given the token takes the cookie another one set
// (a Service spreads a browser's requests over them), it does not give
// the token back, and it is worth nothing once the token is rotated.
func cookieValue(token string) string {
	h := hmac.New(sha256.New, []byte(token))
	_, _ = h.Write([]byte(cookieLabel))
	return hex.EncodeToString(h.Sum(nil))
}

// guard asks for the token (Authorization: Bearer, a cookie, or ?token=
// which sets the cookie, so links work after the first visit) or a user's
// password (basic auth; the browser asks for it).
func (o Options) guard(next http.Handler) http.Handler {
	tokenOK := func(t string) bool {
		return o.Token != "" && subtle.ConstantTimeCompare([]byte(t), []byte(o.Token)) == 1
	}
	// The cookie holds an HMAC of the token (cookieValue), not the token:
	// a cookie that leaks (a browser profile, a proxy's log) never lets
	// in by Authorization: Bearer, and is worth nothing once the token is
	// rotated.
	session := ""
	if o.Token != "" {
		session = cookieValue(o.Token)
	}
	// The passwords remembered are HMACs under a key of this process: a
	// memory dump gives no fast guess of them.
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	basic := newPasswords(o, key)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bearer, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && tokenOK(bearer) {
			next.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(cookieName); err == nil && session != "" && subtle.ConstantTimeCompare([]byte(c.Value), []byte(session)) == 1 {
			next.ServeHTTP(w, r)
			return
		}
		if t := r.URL.Query().Get("token"); t != "" && tokenOK(t) {
			// The token leaves the address bar (and the history, and the
			// Referer of what the page loads) at once: the same address
			// without it, now with the cookie.
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: session, Path: "/", HttpOnly: true, Secure: overTLS(r), SameSite: http.SameSiteStrictMode})
			u := *r.URL
			q := u.Query()
			q.Del("token")
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if user, pass, found := r.BasicAuth(); found {
			switch ok, retry := basic.check(r, user, pass); {
			case ok:
				next.ServeHTTP(w, r)
				return
			case retry.code != 0:
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.after.Seconds()))))
				http.Error(w, retry.why, retry.code)
				return
			}
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

// overTLS says whether the browser reached us over TLS: directly, or
// through a proxy that ends TLS and says so (X-Forwarded-Proto). The
// header only decides the cookie's Secure flag, which a client that
// forges it can only deny itself.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func mac(key []byte, parts ...string) []byte {
	h := hmac.New(sha256.New, key)
	for _, p := range parts {
		_, _ = h.Write([]byte(p))
		_, _ = h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// authLimits bound what wrong passwords cost the server; the zero value
// is the defaults (tests make them smaller).
type authLimits struct {
	// slots is how many bcrypt checks run at once, and wait how long a
	// request waits for one before it is answered 503.
	slots int
	wait  time.Duration
	// failures wrong passwords from one address within window, and the
	// address is answered 429 without a check until the window ends.
	failures int
	window   time.Duration
}

func (l authLimits) withDefaults() authLimits {
	if l.slots <= 0 {
		// Half the processors: a flood of guesses leaves the daemon
		// the rest.
		l.slots = max(1, runtime.NumCPU()/2)
	}
	if l.wait <= 0 {
		l.wait = time.Second
	}
	if l.failures <= 0 {
		l.failures = 10
	}
	if l.window <= 0 {
		l.window = 5 * time.Minute
	}
	return l
}

// passwords checks basic-auth passwords against the users' bcrypt hashes.
// bcrypt is slow on purpose (about 70 ms of a processor at cost 10, twice
// that at each cost above), and a browser sends the password with every
// request, live updates included: a password that passed is remembered,
// by an HMAC of user and password under the process's key, in memory,
// for knownFor and for a bounded number of pairs, so only the first
// request of a session pays for bcrypt. Wrong passwords are what an
// attacker sends: at most limits.slots checks run at once, and an address
// that sent limits.failures wrong ones within limits.window is refused
// without a check until the window ends. Its checks in progress count as
// wrong ones until they end, so however many it sends at once, no more
// than limits.failures wrong ones are checked a window.
type passwords struct {
	users  Users
	key    []byte
	limits authLimits
	log    zerolog.Logger
	slots  chan struct{}
	// standIn is compared against for a user that is not listed: a
	// hash at the users' highest cost, so an unknown user costs as long
	// as a wrong password (made at first use: it takes that long).
	standIn func() []byte
	mu      sync.Mutex
	known   map[[32]byte]time.Time // when the pair passed
	failing map[string]*failures   // by client address
}

// failures are an address's wrong passwords since the first of its
// window, and its password checks begun and not yet ended (pending):
// both count against limits.failures, so guesses sent at once cannot all
// pass the limit before the first of them is found wrong.
type failures struct {
	n       int
	since   time.Time
	pending int
}

// recent is how many of f's wrong passwords are within window of now.
func (f *failures) recent(now time.Time, window time.Duration) int {
	if now.Sub(f.since) < window {
		return f.n
	}
	return 0
}

const (
	maxKnownPasswords = 256
	knownFor          = 15 * time.Minute
	// maxFailing bounds the addresses remembered: past it the ones whose
	// window ended are forgotten, and if none has, all of them but those
	// with checks in progress (a handful: each ends within limits.wait
	// and a check's time).
	maxFailing = 4096
	// weakCost is the lowest bcrypt cost the dashboard does not warn of:
	// htpasswd -B writes 5 unless told -C.
	weakCost = 10
)

// refusal is a request answered without a password check: code (429 or
// 503), why, and when to try again.
type refusal struct {
	code  int
	why   string
	after time.Duration
}

func newPasswords(o Options, key []byte) *passwords {
	p := &passwords{users: o.Users, key: key, limits: o.limits.withDefaults(), log: o.Log,
		known: map[[32]byte]time.Time{}, failing: map[string]*failures{}}
	p.slots = make(chan struct{}, p.limits.slots)
	highest := bcrypt.MinCost
	for _, user := range slices.Sorted(maps.Keys(o.Users)) {
		cost, _ := bcrypt.Cost(o.Users[user]) // ReadUsers checked it
		highest = max(highest, cost)
		if cost < weakCost {
			p.log.Warn().Str("user", user).Int("cost", cost).
				Msgf("--ui-users: user %s's bcrypt cost %d is below %d, cheap to guess from a stolen file; make it again with htpasswd -B -C 12", user, cost, weakCost)
		}
	}
	p.standIn = sync.OnceValue(func() []byte {
		h, _ := bcrypt.GenerateFromPassword([]byte("no user has this password: "+rand.Text()), highest)
		return h
	})
	return p
}

// check says whether pass is user's password; when it did not check, the
// refusal says why.
func (p *passwords) check(r *http.Request, user, pass string) (bool, refusal) {
	key := [32]byte(mac(p.key, user, pass))
	now := time.Now()
	addr := clientaddr.Of(r.RemoteAddr) // an IPv6 client by its /64
	p.mu.Lock()
	passed, seen := p.known[key]
	if seen && now.Sub(passed) < knownFor {
		p.mu.Unlock()
		return true, refusal{}
	}
	f := p.tracked(addr, now)
	if n := f.recent(now, p.limits.window); n >= p.limits.failures {
		p.mu.Unlock()
		return false, refusal{http.StatusTooManyRequests, fmt.Sprintf("too many wrong passwords from %s: try again later", addr), f.since.Add(p.limits.window).Sub(now)}
	} else if n+f.pending >= p.limits.failures {
		// The checks in progress may all fail: one more could pass the
		// limit. They end within limits.wait and a check's time.
		p.mu.Unlock()
		return false, refusal{http.StatusTooManyRequests, fmt.Sprintf("too many password checks from %s at once: try again in a second", addr), time.Second}
	}
	f.pending++
	p.mu.Unlock()

	ok, listed, unchecked := p.compare(r, user, pass)

	p.mu.Lock()
	defer p.mu.Unlock()
	f.pending--
	switch {
	case ok:
		if len(p.known) >= maxKnownPasswords {
			clear(p.known)
		}
		p.known[key] = now
	case unchecked.code == 0:
		p.failed(f, addr, user, listed, now)
	}
	if f.pending == 0 && f.recent(now, p.limits.window) == 0 && p.failing[addr] == f {
		delete(p.failing, addr)
	}
	return ok, unchecked
}

// compare waits for a check slot (limits.wait at most, and not past the
// request's end) and compares pass with user's hash: ok when it is user's
// password, listed when user is in the file; when no slot came, the
// refusal says so and nothing was compared.
func (p *passwords) compare(r *http.Request, user, pass string) (ok, listed bool, unchecked refusal) {
	wait := time.NewTimer(p.limits.wait)
	defer wait.Stop()
	select {
	case p.slots <- struct{}{}:
	case <-wait.C:
		return false, false, refusal{http.StatusServiceUnavailable, "too many password checks at once: try again in a second", time.Second}
	case <-r.Context().Done():
		return false, false, refusal{http.StatusServiceUnavailable, "the request ended", time.Second}
	}
	defer func() { <-p.slots }()
	hash, listed := p.users[user]
	if !listed {
		// As slow as a wrong password, so the time taken does not tell
		// which users exist.
		hash = p.standIn()
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(pass)) == nil && listed, listed, refusal{}
}

// tracked is addr's entry in p.failing, made when it has none (past
// maxFailing, see there: an entry with checks in progress is never
// forgotten, else its checks would not count). Called with p.mu.
func (p *passwords) tracked(addr string, now time.Time) *failures {
	if f := p.failing[addr]; f != nil {
		return f
	}
	if len(p.failing) >= maxFailing {
		maps.DeleteFunc(p.failing, func(_ string, f *failures) bool {
			return f.pending == 0 && f.recent(now, p.limits.window) == 0
		})
		if len(p.failing) >= maxFailing {
			maps.DeleteFunc(p.failing, func(_ string, f *failures) bool { return f.pending == 0 })
		}
	}
	f := &failures{since: now}
	p.failing[addr] = f
	return f
}

// failed counts a wrong password from addr and says so in the log at the
// first of its window and when the address is refused: two lines per
// address and window at most, however many it sends, naming the user when
// the file lists it. Called with p.mu.
func (p *passwords) failed(f *failures, addr, user string, listed bool, now time.Time) {
	if f.recent(now, p.limits.window) == 0 {
		f.n, f.since = 0, now
	}
	f.n++
	if f.n != 1 && f.n != p.limits.failures {
		return
	}
	// The name is logged only when the file lists it: a name that is
	// not there may be a password typed into the user box.
	ev, unknown := p.log.Warn().Str("remote", addr), ""
	if listed {
		ev = ev.Str("user", user)
	} else {
		ev, unknown = ev.Bool("unknownUser", true), " (the last for a user that is not in --ui-users)"
	}
	if f.n == 1 {
		what := "a wrong password"
		if !listed {
			what = "a user that is not in --ui-users"
		}
		ev.Msgf("dashboard: %s from %s", what, addr)
		return
	}
	ev.Int("failures", f.n).Msgf("dashboard: %d wrong passwords from %s within %s%s: refusing its passwords until %s",
		f.n, addr, p.limits.window, unknown, f.since.Add(p.limits.window).Format(time.TimeOnly))
}
