package sources_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/sources"
)

// slowRequest sends, from the loopback address from, a webhook request's
// head with the header lines hdr and Content-Length 100000, then its body
// a byte a second. The channel gets the server's status line, or "" when
// it closes the connection without one. The connection is closed when the
// test ends.
func slowRequest(t *testing.T, srv *httptest.Server, from, hdr string) <-chan string {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: 100000\r\n\r\n", sources.WebhookPath, hdr); err != nil {
		t.Fatal(err)
	}
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n')
		answer <- strings.TrimSpace(line)
	}()
	go func() {
		for {
			time.Sleep(time.Second)
			if _, err := conn.Write([]byte("x")); err != nil {
				return // answered and closed, or the test ended
			}
		}
	}()
	return answer
}

// hookedRemote is a remote fleet repository, a source that follows it at
// its first revision, polling hourly (a webhook makes it fetch sooner), and
// the source's webhook with secret.
func hookedRemote(t *testing.T, secret []byte) (*remote, *sources.Source, *sources.Webhook) {
	t.Helper()
	rm := newRemote(t)
	s := watch(t, open(t, rm.srv.URL+"/fleet.git"), sources.WatchOptions{Interval: time.Hour})
	next(t, s, 5*time.Second)
	hook, err := s.Webhook(sources.WebhookOptions{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return rm, s, hook
}

// postHook posts body with the headers hdr to srv's webhook path and
// returns the status.
func postHook(t *testing.T, srv *httptest.Server, body string, hdr map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+sources.WebhookPath, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// entering is a handler that says on the channel it returns when each
// request reaches h.
func entering(h http.Handler) (http.Handler, <-chan struct{}) {
	in := make(chan struct{}, 64)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in <- struct{}{}
		h.ServeHTTP(w, r)
	}), in
}

func waitEntered(t *testing.T, in <-chan struct{}, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-in:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d requests reached the handler in 30 s", i, n)
		}
	}
}

// TestSlowUnsignedRequestsDoNotBlockASignedPush: twice MaxWebhookRequests
// requests without a signature, each announcing a 100,000-byte body and
// sending a byte a second, are refused before they take a place; a signed
// push sent while they are still sending triggers its fetch.
func TestSlowUnsignedRequestsDoNotBlockASignedPush(t *testing.T) {
	secret := []byte("s3cret")
	rm, s, hook := hookedRemote(t, secret)
	h, in := entering(hook)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	var answers []<-chan string
	for range 2 * sources.MaxWebhookRequests {
		answers = append(answers, slowRequest(t, srv, "127.0.0.1", ""))
	}
	waitEntered(t, in, len(answers))

	pushed := rm.push(t, "add b", "b")
	body := `{"ref":"refs/heads/main"}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+sources.WebhookPath, strings.NewReader(body))
	req.Header.Set(sources.HeaderGitHub, "sha256="+sign(secret, []byte(body)))
	resp, err := clientFrom("127.0.0.2").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a signed push while %d unsigned requests send slowly: %s, want 202", len(answers), resp.Status)
	}
	if rev := next(t, s, 5*time.Second); rev.Commit != pushed {
		t.Errorf("after the signed push: revision %s, want %s", rev.Commit, pushed)
	}
	for _, a := range answers {
		select {
		case line := <-a:
			if !strings.Contains(line, " 401 ") {
				t.Errorf("a slow unsigned request: %q, want 401", line)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a slow unsigned request is not answered in 10 s; want 401 before its body is read")
		}
	}
}

// TestWrongGitLabTokenIsRefusedAtOnce: GitLab's token is the secret
// itself, not a signature of the body, so a wrong one is refused (401)
// before its body is read or a place taken, however slowly the body
// comes: more of them than one address may hold places are each answered
// at once.
func TestWrongGitLabTokenIsRefusedAtOnce(t *testing.T) {
	var mu sync.Mutex
	counts := map[string]int{}
	hook, err := sources.NewWebhook(sources.WebhookOptions{Secret: []byte("s3cret"), Trigger: func() {}, BodyTimeout: time.Minute,
		Count: func(outcome string) { mu.Lock(); counts[outcome]++; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	var answers []<-chan string
	for range sources.MaxWebhookRequestsPerClient + 1 {
		answers = append(answers, slowRequest(t, srv, "127.0.0.1", sources.HeaderGitLab+": junk\r\n"))
	}
	for _, a := range answers {
		select {
		case line := <-a:
			if !strings.Contains(line, " 401 ") {
				t.Errorf("a slow request with a wrong %s: %q, want 401", sources.HeaderGitLab, line)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("a slow request with a wrong %s is not answered in 10 s; want 401 before its body is read", sources.HeaderGitLab)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]int{"forged": len(answers)}; fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("counted %v, want %v", counts, want)
	}
}

// TestSlowSignedBodyIsCutOff: a request that carries a signature header
// but sends its body a byte a second holds its place for BodyTimeout, not
// for the server's ReadTimeout: it gets 408.
func TestSlowSignedBodyIsCutOff(t *testing.T) {
	hook, err := sources.NewWebhook(sources.WebhookOptions{Secret: []byte("s3cret"), Trigger: func() {}, BodyTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	start := time.Now()
	select {
	case line := <-slowRequest(t, srv, "127.0.0.1", sources.HeaderGitHub+": sha256=00\r\n"):
		if !strings.Contains(line, " 408 ") {
			t.Errorf("a slow signed body: %q after %v, want 408", line, time.Since(start))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a slow signed body with a BodyTimeout of 1 s is not cut off in 10 s")
	}
}

// TestOneClientCannotHoldEveryPlace: slow requests from one address hold
// MaxWebhookRequestsPerClient places at most; one more from there gets
// 503, and a signed push from another address is served.
func TestOneClientCannotHoldEveryPlace(t *testing.T) {
	secret := []byte("s3cret")
	triggered := make(chan struct{}, 1)
	hook, err := sources.NewWebhook(sources.WebhookOptions{Secret: secret, Trigger: func() { triggered <- struct{}{} }, BodyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	h, in := entering(hook)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	forged := sources.HeaderGitHub + ": sha256=00\r\n"
	for range sources.MaxWebhookRequestsPerClient {
		slowRequest(t, srv, "127.0.0.1", forged)
	}
	waitEntered(t, in, sources.MaxWebhookRequestsPerClient)
	select {
	case line := <-slowRequest(t, srv, "127.0.0.1", forged):
		if !strings.Contains(line, " 503 ") {
			t.Errorf("one more from the same address: %q, want 503", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("one more from an address holding %d places is not answered in 10 s; want 503 at once", sources.MaxWebhookRequestsPerClient)
	}
	body := []byte(`{"ref":"refs/heads/main"}`)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+sources.WebhookPath, bytes.NewReader(body))
	req.Header.Set(sources.HeaderGitHub, "sha256="+sign(secret, body))
	resp, err := clientFrom("127.0.0.2").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || len(triggered) != 1 {
		t.Errorf("a signed push from another address: %s, %d fetches triggered; want 202, 1", resp.Status, len(triggered))
	}
}

// TestOneIPv6NetworkIsOneClient: slow requests from five addresses of one
// IPv6 /64 hold MaxWebhookRequestsPerClient places, as from one address:
// the fifth gets 503 at once. A host commonly holds a whole /64, and would
// otherwise be as many clients as it likes. Another /64 is another client.
func TestOneIPv6NetworkIsOneClient(t *testing.T) {
	hook, err := sources.NewWebhook(sources.WebhookOptions{Secret: []byte("s3cret"), Trigger: func() {}, BodyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	reading := make(chan struct{}, sources.MaxWebhookRequests)
	// slow serves a request from addr whose body has not come yet: it
	// holds its place until the test ends.
	slow := func(addr string) <-chan int {
		body, sender := io.Pipe()
		t.Cleanup(func() { sender.Close() })
		req := httptest.NewRequest(http.MethodPost, sources.WebhookPath, &firstRead{ReadCloser: body, first: reading})
		req.RemoteAddr = net.JoinHostPort(addr, "40000")
		req.Header.Set(sources.HeaderGitHub, "sha256=00")
		code := make(chan int, 1)
		go func() {
			rec := httptest.NewRecorder()
			hook.ServeHTTP(rec, req)
			code <- rec.Code
		}()
		return code
	}
	for i := range sources.MaxWebhookRequestsPerClient {
		slow(fmt.Sprintf("2001:db8:1:2::%x", i+1))
	}
	waitEntered(t, reading, sources.MaxWebhookRequestsPerClient)
	select {
	case code := <-slow("2001:db8:1:2:ffff:ffff:ffff:5"):
		if code != http.StatusServiceUnavailable {
			t.Errorf("a fifth request from the same /64: %d, want 503", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("a fifth request from a /64 whose addresses hold %d places is not answered in 10 s; want 503 at once", sources.MaxWebhookRequestsPerClient)
	}
	slow("2001:db8:1:3::1")
	waitEntered(t, reading, 1) // another /64 takes a place
}

// TestWebhookLogsAndCounts: an accepted delivery is logged at info with
// its forge, delivery ID and ref, and never the secret; refusals are
// warnings with the caller's address and the reason, a few every ten
// seconds however many come; every outcome is counted.
func TestWebhookLogsAndCounts(t *testing.T) {
	secret := []byte("s3cret-not-in-logs")
	var buf lockedBuffer
	log := zerolog.New(&buf)
	var mu sync.Mutex
	counts := map[string]int{}
	hook, err := sources.NewWebhook(sources.WebhookOptions{Secret: secret, Branch: "main", Trigger: func() {}, Log: &log,
		Count: func(outcome string) { mu.Lock(); counts[outcome]++; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	post := func(body string, hdr map[string]string) int { return postHook(t, srv, body, hdr) }
	body := `{"ref":"refs/heads/main"}`
	signed := map[string]string{sources.HeaderGitLab: string(secret), "X-Gitlab-Event-UUID": "u-42"}
	if code := post(body, signed); code != http.StatusAccepted {
		t.Fatalf("signed: %d", code)
	}
	if code := post(body, signed); code != http.StatusConflict {
		t.Fatalf("replay: %d", code)
	}
	for range 30 {
		post(body, nil)
	}
	post(body, map[string]string{sources.HeaderGitLab: "guess"})

	mu.Lock()
	want := map[string]int{"accepted": 1, "replay": 1, "unsigned": 30, "forged": 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("counted %v, want %v", counts, want)
	}
	mu.Unlock()
	out := buf.String()
	if strings.Contains(out, string(secret)) {
		t.Errorf("the log holds the secret:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.Contains(lines[0], `"level":"info"`) || !strings.Contains(lines[0], `"provider":"gitlab"`) ||
		!strings.Contains(lines[0], `"delivery":"u-42"`) || !strings.Contains(lines[0], `"ref":"refs/heads/main"`) {
		t.Errorf("the accepted delivery's line: %s", lines[0])
	}
	if !strings.Contains(lines[1], `"level":"warn"`) || !strings.Contains(lines[1], `"reason":"replay"`) || !strings.Contains(lines[1], `"remote":"127.0.0.1:`) {
		t.Errorf("the replay's line: %s", lines[1])
	}
	if n := len(lines) - 1; n > 5 {
		t.Errorf("32 refusals made %d log lines, want at most 5:\n%s", n, out)
	}
}

// lockedBuffer is a log that handlers write while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
