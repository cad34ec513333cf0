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
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/internal/clientaddr"
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

// Delivery ID headers: a signed delivery whose ID or body was seen in the
// last DeliveryWindow is a replay and is refused (409).
var deliveryHeaders = []string{"X-GitHub-Delivery", "X-Gitlab-Event-UUID", "X-Gitea-Delivery", "X-Gitfleet-Delivery"}

// DeliveryWindow is how long a delivery is remembered; at most
// maxDeliveries are (by body and ID: maxRemembered keys), the oldest
// forgotten first.
const (
	DeliveryWindow = time.Hour
	maxDeliveries  = 10000
	maxRemembered  = 2 * maxDeliveries
)

// MaxWebhookRequests is how many webhook requests are served at once;
// more get 503 at once rather than queue. One client address (an IPv6
// client's /64) may hold MaxWebhookRequestsPerClient of them, so one
// sender cannot hold them all.
const (
	MaxWebhookRequests          = 16
	MaxWebhookRequestsPerClient = 4
)

// WebhookBodyTimeout is how long a request's body may take to arrive once
// it is served; a slower one gets 408 and its connection is closed.
const WebhookBodyTimeout = 5 * time.Second

// WebhookOptions configure a Webhook.
type WebhookOptions struct {
	// Secret is shared with the forge; required.
	Secret []byte
	// Branch (may be empty) filters pushes by ref.
	Branch string
	// Trigger is called for each accepted push and must not block
	// (Source.Trigger coalesces bursts).
	Trigger func()
	// Log hears accepted deliveries (info) and refused requests (warnings,
	// at most refusalsLogged every refusalsLogEvery); default: nothing.
	Log *zerolog.Logger
	// Count, when set, hears each request's outcome (one of
	// WebhookOutcomes), for a metric.
	Count func(outcome string)
	// BodyTimeout bounds the read of a body; default WebhookBodyTimeout.
	BodyTimeout time.Duration
}

// The outcomes of a webhook request, as WebhookOptions.Count hears them.
const (
	hookAccepted   = "accepted"   // a fetch was triggered
	hookIgnored    = "ignored"    // a push to another branch
	hookMethod     = "method"     // not a POST
	hookUnsigned   = "unsigned"   // no signature header: refused before the body is read
	hookBusy       = "busy"       // too many requests in progress, overall or from its address
	hookTooLarge   = "too_large"  // a body over MaxWebhookBody
	hookSlow       = "slow"       // a body not in within BodyTimeout
	hookUnreadable = "unreadable" // the body could not be read
	hookForged     = "forged"     // a signature or token that does not match (a token: before the body is read)
	hookReplay     = "replay"     // a delivery ID or body seen in the last DeliveryWindow
)

// WebhookOutcomes are the outcomes WebhookOptions.Count hears.
var WebhookOutcomes = []string{hookAccepted, hookIgnored, hookMethod, hookUnsigned, hookBusy, hookTooLarge, hookSlow, hookUnreadable, hookForged, hookReplay}

// Refused requests are logged at most refusalsLogged every
// refusalsLogEvery: anyone who reaches the port can send them. Count
// counts them all.
const (
	refusalsLogged   = 5
	refusalsLogEvery = 10 * time.Second
)

// Webhook receives push notifications and triggers an immediate fetch. A
// request without a valid signature or token gets 401 and triggers nothing;
// a push to another branch is acknowledged and ignored.
type Webhook struct {
	o        WebhookOptions
	log      zerolog.Logger
	refusals zerolog.Logger // log, sampled
	now      func() time.Time

	mu      sync.Mutex
	serving int                  // requests in progress
	clients map[string]int       // requests in progress by client address
	seen    map[string]time.Time // delivery ID or body hash → when it came
	order   []string             // keys of seen, oldest first
}

// NewWebhook returns the handler for WebhookPath.
func NewWebhook(o WebhookOptions) (*Webhook, error) {
	if len(o.Secret) == 0 {
		return nil, errors.New("webhook: a secret is required; an unsigned webhook would let anyone trigger fetches")
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = WebhookBodyTimeout
	}
	if o.Count == nil {
		o.Count = func(string) {}
	}
	log := zerolog.Nop()
	if o.Log != nil {
		log = *o.Log
	}
	return &Webhook{o: o, log: log, refusals: log.Sample(&zerolog.BurstSampler{Burst: refusalsLogged, Period: refusalsLogEvery}),
		now: time.Now, clients: map[string]int{}, seen: map[string]time.Time{}}, nil
}

// Webhook returns a webhook handler that triggers this source: o's Branch
// and Trigger are the source's, and Log is by default the source's.
func (s *Source) Webhook(o WebhookOptions) (*Webhook, error) {
	o.Branch, o.Trigger = s.opts.Branch, s.Trigger
	if o.Log == nil {
		o.Log = &s.log
	}
	return NewWebhook(o)
}

func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// An IPv6 client is its /64: one host commonly holds a whole /64, and
	// a fresh address for each request would be a fresh client.
	client := clientaddr.Of(r.RemoteAddr)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.refuse(w, r, http.StatusMethodNotAllowed, hookMethod, "use POST")
		return
	}
	// Before a place is taken and the body read: a request that cannot be
	// signed is refused at once, however slowly its body comes, and so is
	// a wrong token (GitLab's is the secret itself, whatever the body).
	// Closing the connection sends each of these answers now: otherwise
	// the server first reads what is left of the body (up to 256 KiB),
	// which a slow sender would make it wait for.
	sig := signer(r.Header)
	if sig == nil {
		w.Header().Set("Connection", "close")
		h.refuse(w, r, http.StatusUnauthorized, hookUnsigned, errNoSignature.Error())
		return
	}
	if sig.token && !sig.check(r.Header.Get(sig.header), nil, h.o.Secret) {
		w.Header().Set("Connection", "close")
		h.refuse(w, r, http.StatusUnauthorized, hookForged, sig.wrong())
		return
	}
	if msg := h.enter(client); msg != "" {
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		h.refuse(w, r, http.StatusServiceUnavailable, hookBusy, msg)
		return
	}
	defer h.leave(client)
	// The server's ReadTimeout is longer; a body that is still coming
	// after BodyTimeout holds its place no longer. A ResponseWriter that
	// cannot set deadlines (a test's recorder) reads without one.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(h.o.BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		w.Header().Set("Connection", "close")
		switch {
		case errors.As(err, &tooBig):
			h.refuse(w, r, http.StatusRequestEntityTooLarge, hookTooLarge, fmt.Sprintf("body larger than %d bytes", MaxWebhookBody))
		case errors.Is(err, os.ErrDeadlineExceeded):
			h.refuse(w, r, http.StatusRequestTimeout, hookSlow, fmt.Sprintf("the body did not arrive within %v", h.o.BodyTimeout))
		default:
			h.refuse(w, r, http.StatusBadRequest, hookUnreadable, "reading body failed")
		}
		return
	}
	provider, err := h.authenticate(r.Header, body)
	if err != nil {
		h.refuse(w, r, http.StatusUnauthorized, hookForged, err.Error())
		return
	}
	delivery := deliveryID(r.Header)
	if msg := h.replayed(delivery, body); msg != "" {
		h.refuse(w, r, http.StatusConflict, hookReplay, msg)
		return
	}
	ref := pushedRef(body)
	if h.o.Branch != "" && strings.HasPrefix(ref, "refs/heads/") && ref != "refs/heads/"+h.o.Branch {
		h.o.Count(hookIgnored)
		h.log.Debug().Str("provider", provider).Str("delivery", delivery.value).Str("ref", ref).Msg("webhook delivery ignored: a push to another branch")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "ignored: push to %s, following %s\n", ref, h.o.Branch)
		return
	}
	h.o.Trigger()
	h.o.Count(hookAccepted)
	h.log.Info().Str("provider", provider).Str("delivery", delivery.value).Str("ref", ref).Msg("webhook delivery accepted: fetch triggered")
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintln(w, "fetch triggered")
}

// refuse answers status with msg, counts the outcome and logs it (sampled).
func (h *Webhook) refuse(w http.ResponseWriter, r *http.Request, status int, outcome, msg string) {
	h.o.Count(outcome)
	h.refusals.Warn().Str("remote", r.RemoteAddr).Str("reason", outcome).Int("status", status).Str("detail", msg).
		Msg("webhook request refused")
	http.Error(w, msg, status)
}

// enter takes a place for a request from client, or says why there is
// none.
func (h *Webhook) enter(client string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.serving >= MaxWebhookRequests:
		return fmt.Sprintf("%d webhook requests in progress already", MaxWebhookRequests)
	case h.clients[client] >= MaxWebhookRequestsPerClient:
		return fmt.Sprintf("%d webhook requests from %s in progress already", MaxWebhookRequestsPerClient, client)
	}
	h.serving++
	h.clients[client]++
	return ""
}

// leave gives back the place enter took.
func (h *Webhook) leave(client string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.serving--
	if h.clients[client]--; h.clients[client] == 0 {
		delete(h.clients, client)
	}
}

// A signature is a signature header: check compares its value with the
// body's HMAC-SHA256 (sum), or, for a token, with the secret itself.
type signature struct {
	header, provider string
	check            func(v string, sum, secret []byte) bool
	// token: the value is the secret itself, not a signature of the
	// body, so it is checked before the body is read (sum is nil then).
	token bool
}

// signatures in the order they are tried: the first header present is
// checked, a wrong one failing without trying the others.
var signatures = []signature{
	{HeaderGitHub, "github", hexSum("sha256="), false},
	{HeaderGeneric, "generic", hexSum("sha256="), false},
	{HeaderGitea, "gitea", hexSum(""), false},
	{HeaderGitLab, "gitlab", func(v string, _, secret []byte) bool {
		return subtle.ConstantTimeCompare([]byte(v), secret) == 1
	}, true},
}

// wrong says what is wrong with a signature that does not match.
func (s *signature) wrong() string {
	if s.token {
		return s.header + " is not the webhook secret"
	}
	return s.header + " does not match the body signed with the webhook secret"
}

// hexSum checks a hex HMAC written after prefix.
func hexSum(prefix string) func(v string, sum, _ []byte) bool {
	return func(v string, sum, _ []byte) bool {
		got, err := hex.DecodeString(strings.TrimPrefix(v, prefix))
		return err == nil && hmac.Equal(got, sum)
	}
}

var errNoSignature = fmt.Errorf("no signature: send %s, %s, %s or %s", HeaderGitHub, HeaderGitLab, HeaderGitea, HeaderGeneric)

// signer is the signature the request carries, or nil.
func signer(hdr http.Header) *signature {
	for i := range signatures {
		if hdr.Get(signatures[i].header) != "" {
			return &signatures[i]
		}
	}
	return nil
}

// authenticate checks the request's signature and says which forge sent
// it.
func (h *Webhook) authenticate(hdr http.Header, body []byte) (provider string, err error) {
	sig := signer(hdr)
	if sig == nil {
		return "", errNoSignature
	}
	mac := hmac.New(sha256.New, h.o.Secret)
	mac.Write(body)
	if !sig.check(hdr.Get(sig.header), mac.Sum(nil), h.o.Secret) {
		return "", errors.New(sig.wrong())
	}
	if sig.header == HeaderGitHub && hdr.Get(HeaderGitea) != "" {
		return "gitea", nil // Gitea sends both
	}
	return sig.provider, nil
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

// A delivery is the ID a forge gives a delivery, under its header
// (deliveryHeaders).
type delivery struct{ header, value string }

// deliveryID is the request's delivery ID, from the first of
// deliveryHeaders it has.
func deliveryID(hdr http.Header) delivery {
	for _, name := range deliveryHeaders {
		if v := hdr.Get(name); v != "" {
			return delivery{name, v}
		}
	}
	return delivery{}
}

// replayed remembers a signed delivery by its ID (when it has one) and by
// its body's SHA-256, and says which was seen within DeliveryWindow ("":
// neither). Forges do not sign the ID: a captured body resent under
// another ID, or none, is a replay too.
func (h *Webhook) replayed(d delivery, body []byte) string {
	var keys []string
	if d.value != "" {
		keys = append(keys, d.header+":"+d.value)
	}
	sum := sha256.Sum256(body)
	keys = append(keys, "body:"+hex.EncodeToString(sum[:]))
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.order) > 0 && (len(h.order) >= maxRemembered || now.Sub(h.seen[h.order[0]]) > DeliveryWindow) {
		delete(h.seen, h.order[0])
		h.order = h.order[1:]
	}
	for _, k := range keys {
		if at, ok := h.seen[k]; ok && now.Sub(at) <= DeliveryWindow {
			if strings.HasPrefix(k, "body:") {
				return "this body was received already, signed, in the last hour: a replay is refused"
			}
			return "delivery " + d.value + " was received already: a replay is refused"
		}
	}
	for _, k := range keys {
		h.seen[k] = now
		h.order = append(h.order, k)
	}
	return ""
}
