package sources_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/sources"
)

// next waits for the source's next revision.
func next(t *testing.T, s *sources.Source, within time.Duration) *sources.Revision {
	t.Helper()
	select {
	case rev, ok := <-s.Revisions():
		if !ok {
			t.Fatal("Revisions closed")
		}
		return rev
	case <-time.After(within):
		t.Fatalf("no revision within %v", within)
	}
	return nil
}

func none(t *testing.T, s *sources.Source, within time.Duration) {
	t.Helper()
	select {
	case rev := <-s.Revisions():
		t.Fatalf("unexpected revision %s %q", rev.Commit, rev.Subject())
	case <-time.After(within):
	}
}

func watch(t *testing.T, r *sources.Repo, opts sources.WatchOptions) *sources.Source {
	t.Helper()
	s, err := sources.Watch(context.Background(), r, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestLocalCommitIsSeenAndBrokenOneRejected(t *testing.T) {
	work := gittest.NewRepo(t)
	first := work.Commit("first", map[string]string{"classes/standard.yaml": classYAML, "clusters/a.yaml": cluster("a")})
	r := open(t, work.Dir)
	// An hour between polls: only fsnotify can see the commits below.
	s := watch(t, r, sources.WatchOptions{Branch: "main", Interval: time.Hour})
	if rev := next(t, s, 5*time.Second); rev.Commit != first || rev.Rejected() {
		t.Fatalf("first revision %s (err %v), want %s", rev.Commit, rev.Err, first)
	}

	second := work.Commit("add b", map[string]string{"clusters/b.yaml": cluster("b")})
	if rev := next(t, s, 5*time.Second); rev.Commit != second || rev.Rejected() || rev.Ref != "main" {
		t.Fatalf("after a commit: revision %s (err %v), want %s", rev.Commit, rev.Err, second)
	}

	broken := work.Commit("break c", map[string]string{"clusters/c.yaml": "apiVersion: gitfleet.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: c\nspec:\n  topology:\n    classRef: {name: standard}\n    version: 1.30\n"})
	rev := next(t, s, 5*time.Second)
	if rev.Commit != broken || !errors.Is(rev.Err, sources.ErrInvalid) {
		t.Fatalf("broken commit: revision %s err %v, want rejected %s", rev.Commit, rev.Err, broken)
	}
	if len(rev.Errors) == 0 || rev.Errors[0].Path != "clusters/c.yaml" || rev.Errors[0].Line != 8 {
		t.Errorf("errors = %v, want clusters/c.yaml line 8", rev.Errors)
	}
	if cur := s.Current(); cur == nil || cur.Commit != second {
		t.Errorf("Current after a rejected commit = %v, want the previous good %s", cur, second)
	}
	if s.Latest().Commit != broken {
		t.Errorf("Latest = %s, want %s", s.Latest().Commit, broken)
	}

	// A branch switch in another ref (packed) and a rewrite of main both count.
	work.Git("pack-refs", "--all")
	none(t, s, 200*time.Millisecond)
	work.Git("reset", "-q", "--hard", second)
	if rev := next(t, s, 5*time.Second); rev.Commit != second || rev.Rejected() {
		t.Errorf("after reset: %s, want %s", rev.Commit, second)
	}
}

func TestCloseStopsTheSource(t *testing.T) {
	work := gittest.NewRepo(t)
	work.Commit("first", map[string]string{"clusters/a.yaml": cluster("a")})
	s, err := sources.Watch(context.Background(), open(t, work.Dir), sources.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next(t, s, 5*time.Second)
	s.Close()
	if _, ok := <-s.Revisions(); ok {
		t.Error("Revisions still open after Close")
	}
}

type remote struct {
	work *gittest.Repo
	bare string
	srv  *gittest.Server
}

func newRemote(t *testing.T) *remote {
	work := gittest.NewRepo(t)
	work.Commit("first", map[string]string{"classes/standard.yaml": classYAML, "clusters/a.yaml": cluster("a")})
	root := t.TempDir()
	bare := gittest.NewBare(t, root, "fleet.git")
	work.Git("push", "-q", bare, "main")
	return &remote{work: work, bare: bare, srv: gittest.NewServer(t, root)}
}

func (rm *remote) push(t *testing.T, msg, name string) string {
	h := rm.work.Commit(msg, map[string]string{"clusters/" + name + ".yaml": cluster(name)})
	rm.work.Git("push", "-q", rm.bare, "main")
	return h
}

func TestRemotePushIsSeenByPolling(t *testing.T) {
	rm := newRemote(t)
	s := watch(t, open(t, rm.srv.URL+"/fleet.git"), sources.WatchOptions{Interval: 100 * time.Millisecond})
	next(t, s, 5*time.Second)
	pushed := rm.push(t, "add b", "b")
	if rev := next(t, s, 5*time.Second); rev.Commit != pushed {
		t.Errorf("polled revision %s, want %s", rev.Commit, pushed)
	}
}

func sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func TestSignedWebhookTriggersFetchAndForgedOneIsRefused(t *testing.T) {
	secret := []byte("s3cret")
	rm, s, hook := hookedRemote(t, secret)
	srv := httptest.NewServer(hook)
	defer srv.Close()
	post := func(body string, hdr map[string]string) int { return postHook(t, srv, body, hdr) }
	body := `{"ref":"refs/heads/main"}`

	pushed := rm.push(t, "add b", "b")
	before := rm.srv.Fetches()
	forged := post(body, map[string]string{sources.HeaderGitHub: "sha256=" + sign([]byte("guess"), []byte(body))})
	if forged != http.StatusUnauthorized {
		t.Errorf("forged webhook: status %d, want 401", forged)
	}
	none(t, s, 300*time.Millisecond)
	if got := rm.srv.Fetches(); got != before {
		t.Errorf("a forged webhook caused %d fetches", got-before)
	}

	if code := post(body, map[string]string{sources.HeaderGitHub: "sha256=" + sign(secret, []byte(body))}); code != http.StatusAccepted {
		t.Fatalf("signed webhook: status %d, want 202", code)
	}
	if rev := next(t, s, 5*time.Second); rev.Commit != pushed {
		t.Errorf("after webhook: revision %s, want %s", rev.Commit, pushed)
	}

	// A burst of 20 signed pushes is coalesced into a few fetches.
	pushed = rm.push(t, "add c", "c")
	before = rm.srv.Fetches()
	for i := range 20 {
		body := fmt.Sprintf(`{"ref":"refs/heads/main","after":"%d"}`, i)
		if code := post(body, map[string]string{sources.HeaderGitLab: string(secret)}); code != http.StatusAccepted {
			t.Errorf("push %d of a burst: status %d, want 202", i, code)
		}
	}
	if rev := next(t, s, 5*time.Second); rev.Commit != pushed {
		t.Errorf("after burst: revision %s, want %s", rev.Commit, pushed)
	}
	none(t, s, 200*time.Millisecond)
	if n := rm.srv.Fetches() - before; n < 1 || n > 5 {
		t.Errorf("20 webhooks caused %d fetches, want 1 to 5", n)
	}
}

// TestWebhookSignatures: each forge's signature is checked, and a signed
// delivery is remembered by its ID and by its body: a replay is refused
// under its own ID, under another forge's ID and under none.
func TestWebhookSignatures(t *testing.T) {
	secret := []byte("s3cret")
	triggered := 0
	h, err := sources.NewWebhook(sources.WebhookOptions{Secret: secret, Branch: "main", Trigger: func() { triggered++ }})
	if err != nil {
		t.Fatal(err)
	}
	push := func(after string) []byte { return []byte(`{"ref":"refs/heads/main","after":"` + after + `"}`) }
	body, replayed := push("abc"), push("replayed")
	for _, tc := range []struct {
		name    string
		method  string
		body    []byte
		hdr     map[string]string
		code    int
		trigger bool
	}{
		{"github", "POST", body, map[string]string{"X-Hub-Signature-256": "sha256=" + sign(secret, body)}, 202, true},
		{"gitea", "POST", push("2"), map[string]string{"X-Gitea-Signature": sign(secret, push("2"))}, 202, true},
		{"gitlab", "POST", push("3"), map[string]string{"X-Gitlab-Token": "s3cret"}, 202, true},
		{"generic", "POST", push("4"), map[string]string{"X-Gitfleet-Signature-256": "sha256=" + sign(secret, push("4"))}, 202, true},
		{"no signature", "POST", push("5"), nil, 401, false},
		{"wrong gitlab token", "POST", push("6"), map[string]string{"X-Gitlab-Token": "s3cre"}, 401, false},
		{"signature of another body", "POST", push("7"), map[string]string{"X-Hub-Signature-256": "sha256=" + sign(secret, []byte("{}"))}, 401, false},
		{"not hex", "POST", push("8"), map[string]string{"X-Gitea-Signature": "zz"}, 401, false},
		{"other branch", "POST", []byte(`{"ref":"refs/heads/dev"}`), map[string]string{"X-Gitlab-Token": "s3cret"}, 202, false},
		{"too big", "POST", bytes.Repeat([]byte("x"), sources.MaxWebhookBody+1), map[string]string{"X-Gitlab-Token": "s3cret"}, 413, false},
		{"GET", "GET", nil, nil, 405, false},
		{"github delivery", "POST", push("9"), map[string]string{"X-Hub-Signature-256": "sha256=" + sign(secret, push("9")), "X-GitHub-Delivery": "d-1"}, 202, true},
		{"replay of that delivery", "POST", push("9"), map[string]string{"X-Hub-Signature-256": "sha256=" + sign(secret, push("9")), "X-GitHub-Delivery": "d-1"}, 409, false},
		{"its ID on another body", "POST", push("10"), map[string]string{"X-Hub-Signature-256": "sha256=" + sign(secret, push("10")), "X-GitHub-Delivery": "d-1"}, 409, false},
		{"gitlab delivery", "POST", push("11"), map[string]string{"X-Gitlab-Token": "s3cret", "X-Gitlab-Event-UUID": "u-1"}, 202, true},
		{"replay of the gitlab delivery", "POST", push("11"), map[string]string{"X-Gitlab-Token": "s3cret", "X-Gitlab-Event-UUID": "u-1"}, 409, false},
		{"another delivery", "POST", push("12"), map[string]string{"X-Gitlab-Token": "s3cret", "X-Gitlab-Event-UUID": "u-2"}, 202, true},
		{"signed", "POST", replayed, map[string]string{"X-Hub-Signature-256": "sha256=" + sign(secret, replayed), "X-GitHub-Delivery": "d-2"}, 202, true},
		{"replayed without its delivery ID", "POST", replayed, map[string]string{"X-Hub-Signature-256": "sha256=" + sign(secret, replayed)}, 409, false},
		{"replayed under a new ID", "POST", replayed, map[string]string{"X-Hub-Signature-256": "sha256=" + sign(secret, replayed), "X-GitHub-Delivery": "d-3"}, 409, false},
		{"replayed under another forge's ID", "POST", replayed, map[string]string{"X-Hub-Signature-256": "sha256=" + sign(secret, replayed), "X-Gitfleet-Delivery": "d-2"}, 409, false},
		{"replayed with the GitLab token", "POST", replayed, map[string]string{"X-Gitlab-Token": "s3cret"}, 409, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			triggered = 0
			req := httptest.NewRequest(tc.method, sources.WebhookPath, bytes.NewReader(tc.body))
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.code || (triggered > 0) != tc.trigger {
				t.Errorf("status %d triggered %d; want %d, %v (%s)", rec.Code, triggered, tc.code, tc.trigger, rec.Body)
			}
		})
	}
	if _, err := sources.NewWebhook(sources.WebhookOptions{Branch: "main", Trigger: func() {}}); err == nil {
		t.Error("NewWebhook without a secret succeeded")
	}
}

// TestWebhookConcurrencyCap: requests beyond MaxWebhookRequests in
// progress get 503 at once instead of queueing, even one whose own body is
// still coming; the held ones are served when their bodies end. They come
// from several addresses, each holding MaxWebhookRequestsPerClient.
func TestWebhookConcurrencyCap(t *testing.T) {
	h, err := sources.NewWebhook(sources.WebhookOptions{Secret: []byte("s3cret"), Branch: "main", Trigger: func() {}, BodyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The handler reads a body only once it holds a slot, so a first read
	// says the request holds one: the test waits for every held request's
	// before it asks for one more (a probe sent earlier could take the slot
	// of a held request not yet in, which then got the 503).
	reading := make(chan struct{}, 4*sources.MaxWebhookRequests)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &firstRead{ReadCloser: r.Body, first: reading}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	var bodies atomic.Int64 // each body its own: a body seen already is a replay
	rest := func() string { return fmt.Sprintf(`"ref":"refs/heads/main","n":%d}`, bodies.Add(1)) }
	post := func(from string, body io.Reader) (int, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+sources.WebhookPath, body)
		req.Header.Set(sources.HeaderGitLab, "s3cret")
		resp, err := clientFrom(from).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Requests whose bodies never end hold their slots. The deferred release
	// runs before srv.Close, which waits for every handler: a failing test
	// ends instead of hanging.
	var held []*io.PipeWriter
	release := func() {
		for _, pw := range held {
			_, _ = pw.Write([]byte(rest()))
			pw.Close()
		}
		held = nil
	}
	defer release()
	codes := make(chan int, sources.MaxWebhookRequests+1)
	for i := range sources.MaxWebhookRequests {
		from := fmt.Sprintf("127.0.0.%d", 1+i/sources.MaxWebhookRequestsPerClient)
		pr, pw := io.Pipe()
		held = append(held, pw)
		go func() {
			code, err := post(from, pr)
			if err != nil {
				t.Errorf("held request: %v", err)
			}
			codes <- code
		}()
		if _, err := pw.Write([]byte("{")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sources.MaxWebhookRequests {
		select {
		case <-reading:
		case code := <-codes:
			t.Fatalf("a held request was answered %d before its body ended", code)
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d held requests reached the handler in 30 s", i, sources.MaxWebhookRequests)
		}
	}
	// One more whose body never ends is refused without waiting for it.
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		code, err := post("127.0.0.100", pr)
		if err != nil {
			t.Errorf("request over the cap: %v", err)
		}
		codes <- code
	}()
	_, _ = pw.Write([]byte("{"))
	select {
	case code := <-codes:
		if code != http.StatusServiceUnavailable {
			t.Fatalf("with %d requests held, a slow one got %d, want 503", sources.MaxWebhookRequests, code)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("with %d requests held, a slow one got no answer in 30 s; want 503 at once", sources.MaxWebhookRequests)
	}
	if code, err := post("127.0.0.100", strings.NewReader("{"+rest())); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("with %d requests held, another got %d (%v), want 503", sources.MaxWebhookRequests, code, err)
	}
	release()
	for range sources.MaxWebhookRequests {
		if code := <-codes; code != http.StatusAccepted {
			t.Errorf("a held request got %d once its body ended, want 202", code)
		}
	}
	if code, err := post("127.0.0.1", strings.NewReader("{"+rest())); err != nil || code != http.StatusAccepted {
		t.Errorf("with the held requests served, a new one got %d (%v), want 202", code, err)
	}
}

// clientFrom is an HTTP client whose connections come from the loopback
// address ip (any of 127.0.0.0/8), as from another host.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// firstRead signals once on the first Read of a request's body.
type firstRead struct {
	io.ReadCloser
	once  sync.Once
	first chan<- struct{}
}

func (f *firstRead) Read(p []byte) (int, error) {
	f.once.Do(func() { f.first <- struct{}{} })
	return f.ReadCloser.Read(p)
}

func TestFailingRemoteIsReportedAndRecovers(t *testing.T) {
	work := gittest.NewRepo(t)
	work.Commit("first", map[string]string{"classes/standard.yaml": classYAML, "clusters/a.yaml": cluster("a")})
	root := t.TempDir()
	bare := gittest.NewBare(t, root, "fleet.git")
	work.Git("push", "-q", bare, "main")
	var down atomic.Bool
	srv := gittest.NewServerWith(t, root, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				http.Error(w, "maintenance", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	s := watch(t, open(t, srv.URL+"/fleet.git"), sources.WatchOptions{Interval: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	first := next(t, s, 5*time.Second)
	down.Store(true)
	pushed := work.Commit("second", map[string]string{"clusters/b.yaml": cluster("b")})
	work.Git("push", "-q", bare, "main")
	deadline := time.Now().Add(5 * time.Second)
	for s.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Err(); !errors.Is(err, sources.ErrFetchFailed) {
		t.Fatalf("Err while the remote is down = %v, want ErrFetchFailed", err)
	}
	if cur := s.Current(); cur == nil || cur.Commit != first.Commit {
		t.Errorf("Current while down = %v, want the first revision", cur)
	}
	down.Store(false)
	if rev := next(t, s, 5*time.Second); rev.Commit != pushed {
		t.Errorf("after recovery: %s, want %s", rev.Commit, pushed)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err after recovery = %v", err)
	}
}

// A follower that starts after several revisions were read (a replica that
// becomes leader) gets the newest good one and the newest rejected one, in
// that order, never an older one, and then each new head.
func TestFollowStartsFromTheNewest(t *testing.T) {
	work := gittest.NewRepo(t)
	work.Commit("a", map[string]string{"classes/standard.yaml": classYAML, "clusters/a.yaml": cluster("a")})
	r := open(t, work.Dir)
	s := watch(t, r, sources.WatchOptions{Branch: "main", Interval: time.Hour, Newest: true})
	wait := func(commit string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for l := s.Latest(); l == nil || l.Commit != commit; l = s.Latest() {
			if time.Now().After(deadline) {
				t.Fatalf("the source did not read %s", commit)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	work.Commit("b", map[string]string{"clusters/b.yaml": cluster("b")})
	good := work.Commit("c", map[string]string{"clusters/c.yaml": cluster("c")})
	wait(good)
	bad := work.Commit("break d", map[string]string{"clusters/d.yaml": "apiVersion: gitfleet.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: d\nspec:\n  topology:\n    classRef: {name: nope}\n"})
	wait(bad)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	revs := s.Follow(ctx)
	recv := func() *sources.Revision { t.Helper(); return nextFollowed(t, revs) }
	if rev := recv(); rev.Commit != good || rev.Rejected() {
		t.Fatalf("first revision a follower gets: %s (err %v), want the newest good %s", rev.Commit, rev.Err, good)
	}
	if rev := recv(); rev.Commit != bad || !rev.Rejected() {
		t.Fatalf("second revision: %s, want the rejected head %s", rev.Commit, bad)
	}
	fixed := work.Commit("fix d", map[string]string{"clusters/d.yaml": cluster("d")})
	if rev := recv(); rev.Commit != fixed || rev.Rejected() {
		t.Fatalf("after a new commit: %s (err %v), want %s", rev.Commit, rev.Err, fixed)
	}
	select {
	case rev := <-s.Revisions():
		if rev != nil {
			t.Errorf("Revisions delivered %s although Newest is set", rev.Commit)
		}
	default:
	}
}

// nextFollowed returns the next revision Follow delivers on revs.
func nextFollowed(t *testing.T, revs <-chan *sources.Revision) *sources.Revision {
	t.Helper()
	select {
	case rev := <-revs:
		return rev
	case <-time.After(10 * time.Second):
		t.Fatal("Follow delivered nothing")
	}
	return nil
}

// When the branch is reset over a rejected head to the good revision in
// force, a follower gets that revision again, marked Returned: the daemon
// learns that no refusal applies any more, though no new commit came.
func TestFollowSaysWhenTheHeadComesBack(t *testing.T) {
	work := gittest.NewRepo(t)
	good := work.Commit("a", map[string]string{"classes/standard.yaml": classYAML, "clusters/a.yaml": cluster("a")})
	s := watch(t, open(t, work.Dir), sources.WatchOptions{Branch: "main", Interval: 20 * time.Millisecond, Newest: true})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	revs := s.Follow(ctx)
	recv := func() *sources.Revision { t.Helper(); return nextFollowed(t, revs) }
	if rev := recv(); rev.Commit != good || rev.Returned {
		t.Fatalf("first: %s returned %v, want %s", rev.Commit, rev.Returned, good)
	}
	bad := work.Commit("break b", map[string]string{"clusters/b.yaml": "apiVersion: gitfleet.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: b\nspec:\n  topology:\n    classRef: {name: nope}\n"})
	if rev := recv(); rev.Commit != bad || !rev.Rejected() || rev.Returned {
		t.Fatalf("second: %s (err %v, returned %v), want the rejected %s", rev.Commit, rev.Err, rev.Returned, bad)
	}
	work.Git("reset", "-q", "--hard", good)
	if rev := recv(); rev.Commit != good || !rev.Returned || rev.Rejected() {
		t.Fatalf("after the reset: %s (err %v, returned %v), want %s again, returned", rev.Commit, rev.Err, rev.Returned, good)
	}
	select {
	case rev := <-revs:
		t.Errorf("then %s (returned %v), want nothing until the branch moves", rev.Commit, rev.Returned)
	case <-time.After(200 * time.Millisecond):
	}
}

// A daemon restarted on a head it rejects keeps the revision in force
// before the restart (WatchOptions.LastGood: the status branch's last
// applied commit) in force: Current is that one, delivered before the
// rejected head; a revision that no longer validates, or none, leaves
// nothing in force, as before.
func TestRejectedHeadAtTheStartKeepsTheLastGood(t *testing.T) {
	work := gittest.NewRepo(t)
	good := work.Commit("a", map[string]string{"classes/standard.yaml": classYAML, "clusters/a.yaml": cluster("a")})
	broken := "apiVersion: gitfleet.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: d\nspec:\n  topology:\n    classRef: {name: nope}\n"
	bad := work.Commit("break d", map[string]string{"clusters/d.yaml": broken})
	r := open(t, work.Dir)
	lastGood := func(commit string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) { return commit, nil }
	}

	s := watch(t, r, sources.WatchOptions{Branch: "main", Interval: time.Hour, LastGood: lastGood(good)})
	if rev := next(t, s, 5*time.Second); rev.Commit != good || rev.Rejected() {
		t.Fatalf("first revision %s (err %v), want the last good %s", rev.Commit, rev.Err, good)
	}
	if rev := next(t, s, 5*time.Second); rev.Commit != bad || !rev.Rejected() {
		t.Fatalf("second revision %s (err %v), want the rejected head %s", rev.Commit, rev.Err, bad)
	}
	if cur := s.Current(); cur == nil || cur.Commit != good {
		t.Errorf("Current = %v, want %s", cur, good)
	}
	fixed := work.Commit("fix d", map[string]string{"clusters/d.yaml": cluster("d")})
	if rev := next(t, s, 5*time.Second); rev.Commit != fixed || rev.Rejected() {
		t.Fatalf("after a fix: %s (err %v), want %s", rev.Commit, rev.Err, fixed)
	}

	// The followers of a daemon (Newest) get the same two, in order.
	work.Commit("break d again", map[string]string{"clusters/d.yaml": broken})
	f := watch(t, r, sources.WatchOptions{Branch: "main", Interval: time.Hour, Newest: true, LastGood: lastGood(fixed)})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	revs := f.Follow(ctx)
	for i, want := range []string{fixed, "rejected"} {
		select {
		case rev := <-revs:
			got := rev.Commit
			if rev.Rejected() {
				got = "rejected"
			}
			if got != want {
				t.Errorf("Follow's revision %d: %s, want %s", i, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Follow delivered %d revisions, want 2", i)
		}
	}

	// A last good commit that is rejected now, or unknown, or none: nothing
	// is in force until a head validates.
	for _, commit := range []string{bad, "0123456789abcdef0123456789abcdef01234567", ""} {
		s := watch(t, r, sources.WatchOptions{Branch: "main", Interval: time.Hour, LastGood: lastGood(commit)})
		if rev := next(t, s, 5*time.Second); !rev.Rejected() {
			t.Errorf("LastGood %q: first revision %s is good, want the rejected head only", commit, rev.Commit)
		}
		none(t, s, 100*time.Millisecond)
		if cur := s.Current(); cur != nil {
			t.Errorf("LastGood %q: Current = %s, want none", commit, cur.Commit)
		}
	}
}
