package dashboard

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"
)

// usersFile writes an htpasswd file of name:password pairs at cost and
// reads it.
func usersFile(t *testing.T, cost int, pairs ...string) Users {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(pairs); i += 2 {
		h, err := bcrypt.GenerateFromPassword([]byte(pairs[i+1]), cost)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(pairs[i] + ":" + string(h) + "\n")
	}
	p := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	users, err := ReadUsers(p)
	if err != nil {
		t.Fatal(err)
	}
	return users
}

// basicGet asks url with user and password; the response's body is read
// and closed.
func basicGet(t *testing.T, url, user, pass string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.SetBasicAuth(user, pass)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return res, b.String()
}

// A guesser gets a few tries: after limits.failures wrong passwords from
// one address it is answered 429 with Retry-After, without a check (its
// right password too), while a browser that signed in before goes on
// from memory. The log names the user and the address twice at most,
// and never a password.
func TestWrongPasswordsAreLimited(t *testing.T) {
	var logs bytes.Buffer
	users := usersFile(t, bcrypt.MinCost, "alice", "correct horse")
	srv := serve(t, fleetRepo(t, 0, 0), Options{Users: users, Log: zerolog.New(zerolog.SyncWriter(&logs)),
		limits: authLimits{failures: 3, window: time.Hour}})
	if res, _ := basicGet(t, srv.URL+"/", "alice", "correct horse"); res.StatusCode != 200 {
		t.Fatalf("alice before any guess: %d", res.StatusCode)
	}
	for i := range 3 {
		if res, _ := basicGet(t, srv.URL+"/", "alice", "guess-"+string(rune('a'+i))); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("guess %d: %d, want 401", i, res.StatusCode)
		}
	}
	for _, pass := range []string{"guess-z", "correct horse"} {
		res, body := basicGet(t, srv.URL+"/", "bob", pass)
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" || !strings.Contains(body, "too many wrong passwords") {
			t.Errorf("after 3 wrong passwords, %q: %d, Retry-After %q, %s", pass, res.StatusCode, res.Header.Get("Retry-After"), body)
		}
		if after := res.Header.Get("Retry-After"); after != "3600" && after != "3599" {
			t.Errorf("Retry-After %q, want the rest of the hour's window", after)
		}
	}
	if res, _ := basicGet(t, srv.URL+"/", "alice", "correct horse"); res.StatusCode != 200 {
		t.Errorf("alice, signed in before: %d", res.StatusCode)
	}
	srv.Close() // waits for the handlers: the log is whole
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"remote"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.Contains(lines[0], `"user":"alice"`) || !strings.Contains(lines[0], `"remote":"127.0.0.1"`) ||
		!strings.Contains(lines[1], "3 wrong passwords from 127.0.0.1") {
		t.Errorf("the log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "guess-") || strings.Contains(logs.String(), "horse") {
		t.Errorf("the log holds a password:\n%s", logs.String())
	}
}

// bcrypt checks run limits.slots at a time: a burst of guesses waits
// limits.wait at most, then is answered 503 with Retry-After, so a flood
// takes a bounded share of the processors.
func TestPasswordChecksAreBounded(t *testing.T) {
	users := usersFile(t, 10, "alice", "correct horse") // ~70 ms a check (more under -race)
	srv := serve(t, fleetRepo(t, 0, 0), Options{Users: users, limits: authLimits{slots: 1, wait: 20 * time.Millisecond, failures: 100}})
	var mu sync.Mutex
	var codes []int
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			res, _ := basicGet(t, srv.URL+"/", "alice", "a guess")
			if res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") != "1" {
				t.Errorf("503 with Retry-After %q", res.Header.Get("Retry-After"))
			}
			mu.Lock()
			codes = append(codes, res.StatusCode)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(codes)
	if codes[0] != http.StatusUnauthorized || codes[len(codes)-1] != http.StatusServiceUnavailable {
		t.Errorf("6 guesses at once, one check at a time: %v, want 401s and 503s", codes)
	}
}

// An unknown user costs what a wrong password costs: the stand-in hash has
// the users' highest cost (htpasswd -B writes cost 5, and a stand-in at
// bcrypt's default 10 would tell the names apart by time), and entries
// below cost 10 are warned of when the dashboard starts.
func TestUnknownUserCostsAsMuch(t *testing.T) {
	var logs bytes.Buffer // written by Handler, in this goroutine
	users := usersFile(t, 5, "alice", "correct horse")
	srv := serve(t, fleetRepo(t, 0, 0), Options{Users: users, Log: zerolog.New(&logs), limits: authLimits{failures: 1000}})
	if !strings.Contains(logs.String(), "user alice's bcrypt cost 5 is below 10") || !strings.Contains(logs.String(), "htpasswd -B -C 12") {
		t.Errorf("no warning of the weak entry:\n%s", logs.String())
	}
	median := func(user string) time.Duration {
		var took []time.Duration
		for range 7 {
			start := time.Now()
			if res, _ := basicGet(t, srv.URL+"/", user, "a guess"); res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s: %d", user, res.StatusCode)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		return took[len(took)/2]
	}
	median("mallory") // the stand-in is made at first use
	wrong, unknown := median("alice"), median("mallory")
	// Cost 10 is 32 times cost 5: a stand-in at 10 is far outside this.
	if unknown > 3*wrong+5*time.Millisecond || wrong > 3*unknown+5*time.Millisecond {
		t.Errorf("a wrong password takes %s, an unknown user %s: the time tells which users exist", wrong, unknown)
	}
}

// Guesses sent all at once do not get past the limit: the checks in
// progress count against it with the failures, so of 60 wrong passwords
// from one address at once exactly limits.failures are checked (401) and
// the rest are answered 429 with Retry-After, without a check.
func TestGuessesAtOnceAreLimited(t *testing.T) {
	users := usersFile(t, 7, "alice", "correct horse") // ~10 ms a check: the guesses overlap
	srv := serve(t, fleetRepo(t, 0, 0), Options{Users: users, limits: authLimits{slots: 2, wait: time.Minute, failures: 10, window: time.Hour}})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 60}}
	defer client.CloseIdleConnections()
	codes := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 60 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
			req.SetBasicAuth("alice", "guess-"+strconv.Itoa(i))
			<-start
			res, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			if res.StatusCode == http.StatusTooManyRequests && res.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			mu.Lock()
			codes[res.StatusCode]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if codes[http.StatusUnauthorized] != 10 || codes[http.StatusTooManyRequests] != 50 {
		t.Errorf("60 wrong passwords at once, limit 10: %d checked (401), %d refused (429), all: %v; want 10 and 50",
			codes[http.StatusUnauthorized], codes[http.StatusTooManyRequests], codes)
	}
}

// A password typed into the user box stays out of the log: a failed
// sign-in names the user only when --ui-users lists it, and says the user
// is unknown otherwise, at the first wrong password of a window and at
// the refusal alike.
func TestUnknownUserNotLogged(t *testing.T) {
	const typo = "Tr0ub4dor&3-correct" // a password, in the user box
	users := usersFile(t, bcrypt.MinCost, "alice", "correct horse")
	for _, order := range [][]string{{typo, "alice"}, {"alice", typo}} {
		var logs bytes.Buffer
		srv := serve(t, fleetRepo(t, 0, 0), Options{Users: users, Log: zerolog.New(zerolog.SyncWriter(&logs)),
			limits: authLimits{failures: 2, window: time.Hour}})
		for _, user := range order {
			if res, _ := basicGet(t, srv.URL+"/", user, "a guess"); res.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s: %d, want 401", user, res.StatusCode)
			}
		}
		srv.Close() // waits for the handlers: the log is whole
		var lines []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `"remote"`) {
				lines = append(lines, l)
			}
		}
		if strings.Contains(logs.String(), "Tr0ub4dor") {
			t.Errorf("%v: the log holds the name typed, a password:\n%s", order, logs.String())
		}
		if len(lines) != 2 {
			t.Fatalf("%v: want 2 lines, the log:\n%s", order, logs.String())
		}
		for i, user := range order {
			if user == "alice" && !strings.Contains(lines[i], `"user":"alice"`) {
				t.Errorf("%v: the line of alice's wrong password does not name her: %s", order, lines[i])
			}
			if user == typo && (strings.Contains(lines[i], `"user"`) || !strings.Contains(lines[i], "not in --ui-users")) {
				t.Errorf("%v: the line of the unknown user: %s", order, lines[i])
			}
		}
	}
}
