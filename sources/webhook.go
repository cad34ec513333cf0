package sources

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// WebhookPath is where the daemon serves the push webhook.
const WebhookPath = "/hooks/git"

// MaxWebhookBody is the largest push payload accepted; larger bodies get 413.
const MaxWebhookBody = 1 << 20

// Webhook header names, one per forge. Generic senders sign like GitHub,
// with their own header name.
const (
	HeaderGitHub  = "X-Hub-Signature-256" // sha256=<hex HMAC-SHA256 of the body>; Gitea sends it too
	HeaderGitea   = "X-Gitea-Signature"   // <hex HMAC-SHA256 of the body>
	HeaderGitLab  = "X-Gitlab-Token"      // the secret itself
	HeaderGeneric = "X-Gitfleet-Signature-256"
)

// Delivery ID headers: a delivery seen in the last DeliveryWindow is a
// replay and is refused (409), whatever its signature.
var deliveryHeaders = []string{"X-GitHub-Delivery", "X-Gitlab-Event-UUID", "X-Gitea-Delivery", "X-Gitfleet-Delivery"}

// DeliveryWindow is how long a delivery ID is remembered; at most
// maxDeliveries are, the oldest forgotten first.
const (
	DeliveryWindow = time.Hour
	maxDeliveries  = 10000
)

// MaxWebhookRequests is how many webhook requests are served at once;
// more get 503 at once rather than queue.
const MaxWebhookRequests = 16

// Webhook receives push notifications and triggers an immediate fetch. A
// request without a valid signature or token gets 401 and triggers nothing;
// a push to another branch is acknowledged and ignored.
type Webhook struct {
	secret  []byte
	branch  string
	trigger func()
	slots   chan struct{} // a token per request in progress
	now     func() time.Time

	mu    sync.Mutex
	seen  map[string]time.Time // delivery ID → when it came
	order []string             // delivery IDs, oldest first
}

// NewWebhook returns the handler for WebhookPath. secret is shared with the
// forge; branch (may be empty) filters pushes by ref; trigger is called for
// each accepted push and must not block (Source.Trigger coalesces bursts).
func NewWebhook(secret []byte, branch string, trigger func()) (*Webhook, error) {
	if len(secret) == 0 {
		return nil, errors.New("webhook: a secret is required; an unsigned webhook would let anyone trigger fetches")
	}
	return &Webhook{secret: secret, branch: branch, trigger: trigger, slots: make(chan struct{}, MaxWebhookRequests),
		now: time.Now, seen: map[string]time.Time{}}, nil
}

// Webhook returns a webhook handler that triggers this source.
func (s *Source) Webhook(secret []byte) (*Webhook, error) {
	return NewWebhook(secret, s.opts.Branch, s.Trigger)
}

func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		// Closing the connection sends the answer now: otherwise the server
		// first reads what is left of the body (up to 256 KiB), which a slow
		// sender would make it wait for.
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("%d webhook requests in progress already", MaxWebhookRequests), http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("body larger than %d bytes", MaxWebhookBody), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading body failed", http.StatusBadRequest)
		return
	}
	if err := h.authenticate(r.Header, body); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if id := h.replayed(r.Header); id != "" {
		http.Error(w, "delivery "+id+" was received already: a replay is refused", http.StatusConflict)
		return
	}
	if ref := pushedRef(body); h.branch != "" && strings.HasPrefix(ref, "refs/heads/") && ref != "refs/heads/"+h.branch {
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "ignored: push to %s, following %s\n", ref, h.branch)
		return
	}
	h.trigger()
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintln(w, "fetch triggered")
}

// authenticate accepts the first signature header present; a present but
// wrong one fails without trying the others.
func (h *Webhook) authenticate(hdr http.Header, body []byte) error {
	mac := hmac.New(sha256.New, h.secret)
	mac.Write(body)
	sum := mac.Sum(nil)
	checkHex := func(name, v string) error {
		got, err := hex.DecodeString(v)
		if err != nil || !hmac.Equal(got, sum) {
			return fmt.Errorf("%s does not match the body signed with the webhook secret", name)
		}
		return nil
	}
	switch {
	case hdr.Get(HeaderGitHub) != "":
		return checkHex(HeaderGitHub, strings.TrimPrefix(hdr.Get(HeaderGitHub), "sha256="))
	case hdr.Get(HeaderGeneric) != "":
		return checkHex(HeaderGeneric, strings.TrimPrefix(hdr.Get(HeaderGeneric), "sha256="))
	case hdr.Get(HeaderGitea) != "":
		return checkHex(HeaderGitea, hdr.Get(HeaderGitea))
	case hdr.Get(HeaderGitLab) != "":
		if subtle.ConstantTimeCompare([]byte(hdr.Get(HeaderGitLab)), h.secret) != 1 {
			return fmt.Errorf("%s is not the webhook secret", HeaderGitLab)
		}
		return nil
	}
	return fmt.Errorf("no signature: send %s, %s, %s or %s", HeaderGitHub, HeaderGitLab, HeaderGitea, HeaderGeneric)
}

// pushedRef is the "ref" of a push payload (GitHub, GitLab and Gitea all
// use it), or "" when the body has none.
func pushedRef(body []byte) string {
	var p struct {
		Ref string `json:"ref"`
	}
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	return p.Ref
}

// replayed remembers the request's delivery ID and returns it when it was
// seen within DeliveryWindow ("" otherwise, or when the request has none).
func (h *Webhook) replayed(hdr http.Header) string {
	id := ""
	for _, name := range deliveryHeaders {
		if v := hdr.Get(name); v != "" {
			id = name + ":" + v
			break
		}
	}
	if id == "" {
		return ""
	}
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.order) > 0 && (len(h.order) >= maxDeliveries || now.Sub(h.seen[h.order[0]]) > DeliveryWindow) {
		delete(h.seen, h.order[0])
		h.order = h.order[1:]
	}
	if at, ok := h.seen[id]; ok && now.Sub(at) <= DeliveryWindow {
		return id[strings.Index(id, ":")+1:]
	}
	h.seen[id] = now
	h.order = append(h.order, id)
	return ""
}
