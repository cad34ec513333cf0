package pki

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"regexp"
	"time"
)

// DefaultTokenTTL is how long a bootstrap token is good for, as kubeadm's.
const DefaultTokenTTL = 24 * time.Hour

// Token is a kubeadm bootstrap token, "<id>.<secret>" ([a-z0-9]{6} and
// [a-z0-9]{16}), issued for one machine's creation.
type Token struct {
	ID      string    `json:"id"`
	Secret  string    `json:"secret"`
	Machine string    `json:"machine"`
	Expires time.Time `json:"expires"`
	// Used is when the machine joined with it: from then on it admits
	// nobody, but the same join asked again a moment later (its answer
	// was lost) is answered the same.
	Used time.Time `json:"used,omitzero"`
}

var tokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)

const tokenChars = "abcdefghijklmnopqrstuvwxyz0123456789"

// NewToken makes a random token for machine, good for ttl from now.
func NewToken(machine string, ttl time.Duration, now time.Time) Token {
	return Token{ID: randomString(6), Secret: randomString(16), Machine: machine, Expires: now.Add(ttl).UTC()}
}

func randomString(n int) string {
	b := make([]byte, n)
	// 36 letters: reject bytes ≥ 252 so each is equally likely.
	for i := 0; i < n; {
		var c [1]byte
		if _, err := rand.Read(c[:]); err != nil {
			panic(err)
		}
		if c[0] < 252 {
			b[i] = tokenChars[c[0]%36]
			i++
		}
	}
	return string(b)
}

// String is the token as kubeadm writes it: "<id>.<secret>".
func (t Token) String() string { return t.ID + "." + t.Secret }

// ParseToken splits "<id>.<secret>".
func ParseToken(s string) (id, secret string, err error) {
	m := tokenRE.FindStringSubmatch(s)
	if m == nil {
		return "", "", fmt.Errorf("a bootstrap token is <6 of [a-z0-9]>.<16 of [a-z0-9]>")
	}
	return m[1], m[2], nil
}

// Hash is what a verifier keeps of a token: the SHA-256 of its secret.
func (t Token) Hash() string {
	sum := sha256.Sum256([]byte(t.Secret))
	return hex.EncodeToString(sum[:])
}

// Matches says whether secret is the token's, in constant time.
func (t Token) Matches(secret string) bool {
	return subtle.ConstantTimeCompare([]byte(t.Secret), []byte(secret)) == 1
}
