// Package pki keeps what a cluster's machines need to trust each other:
// the cluster's certificate authorities, the service-account key pair,
// the certificate key of control-plane joins and per-machine bootstrap
// tokens. It is kept outside Git, in the gitfleet-pki bucket, sealed with
// AES-256-GCM under a key only the daemon (and the workers that hand
// bootstrap data to machines) read from a file.
package pki

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gitfleet/gitfleet/internal/privfile"
)

// KeySize is the length of a secrets key: AES-256.
const KeySize = 32

// sealMagic starts every sealed value: format version 1.
var sealMagic = []byte("gfs1")

// ErrWrongKey: a sealed value was sealed under a key the keyring does not
// hold.
var ErrWrongKey = errors.New("sealed with another key")

type key struct {
	id   string // hex of the first 8 bytes of the key's SHA-256
	aead cipher.AEAD
	file string
}

// Keyring seals with its current key and opens with the current or a
// previous one (during a rotation).
type Keyring struct {
	current  key
	previous []key
}

// NewKeyring is a keyring of raw keys (tests, and LoadKeyring).
func NewKeyring(current []byte, previous ...[]byte) (*Keyring, error) {
	c, err := newKey(current, "")
	if err != nil {
		return nil, err
	}
	k := &Keyring{current: c}
	for _, p := range previous {
		pk, err := newKey(p, "")
		if err != nil {
			return nil, err
		}
		if pk.id != c.id {
			k.previous = append(k.previous, pk)
		}
	}
	return k, nil
}

func newKey(raw []byte, file string) (key, error) {
	if len(raw) != KeySize {
		return key{}, fmt.Errorf("a secrets key is %d bytes, not %d", KeySize, len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return key{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, err
	}
	sum := sha256.Sum256(raw)
	return key{id: hex.EncodeToString(sum[:8]), aead: aead, file: file}, nil
}

// LoadKeyring reads the current key file and any previous ones. A key file
// holds 32 random bytes, base64-encoded on one line (NewKeyFile writes
// one); only its owner (and its group, to read) may have it.
func LoadKeyring(current string, previous ...string) (*Keyring, error) {
	c, err := readKey(current)
	if err != nil {
		return nil, err
	}
	k := &Keyring{current: c}
	for _, p := range previous {
		pk, err := readKey(p)
		if err != nil {
			return nil, err
		}
		if pk.id != c.id {
			k.previous = append(k.previous, pk)
		}
	}
	return k, nil
}

func readKey(path string) (key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return key{}, fmt.Errorf("secrets key: %w", err)
	}
	// Group read is allowed: Kubernetes mounts a secret 0440 for the
	// pod's fsGroup.
	if st.Mode().Perm()&0o037 != 0 {
		return key{}, fmt.Errorf("secrets key %s: mode %o lets others read or change it; run chmod 600 %s", path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return key{}, fmt.Errorf("secrets key: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(raw) != KeySize {
		return key{}, fmt.Errorf("secrets key %s: want %d random bytes, base64-encoded on one line (make one with: head -c %d /dev/urandom | base64 > %s)", path, KeySize, KeySize, path)
	}
	return newKey(raw, path)
}

// NewKeyFile writes a fresh random key to path (mode 0600) unless a file
// is there already. The key appears whole or not at all: a worker that
// reads it while the daemon makes it, or a start after a crash, never
// finds half a key; of two processes making it at once, one key wins.
func NewKeyFile(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("secrets key: %w", err)
	}
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("secrets key: %w", err)
	}
	err := privfile.Create(path, []byte(base64.StdEncoding.EncodeToString(raw)+"\n"))
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("secrets key: %w", err)
	}
	return nil
}

// ID names the current key (not secret: a hash prefix).
func (k *Keyring) ID() string { return k.current.id }

// Seal encrypts plain under the current key, bound to name (a bucket key,
// a task ID): a sealed value moved under another name does not open.
func (k *Keyring) Seal(name string, plain []byte) []byte {
	nonce := make([]byte, k.current.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	id, _ := hex.DecodeString(k.current.id)
	out := append(append(append([]byte{}, sealMagic...), id...), nonce...)
	return k.current.aead.Seal(out, nonce, plain, []byte(name))
}

// Open decrypts a value Seal made under name. rotated says it was sealed
// under a previous key (seal it again). A value sealed under a key the ring
// does not hold is ErrWrongKey, with the key's ID.
func (k *Keyring) Open(name string, sealed []byte) (plain []byte, rotated bool, err error) {
	n := len(sealMagic) + 8 + k.current.aead.NonceSize()
	if len(sealed) < n || !bytes.Equal(sealed[:len(sealMagic)], sealMagic) {
		return nil, false, fmt.Errorf("%s: not a sealed value", name)
	}
	id := hex.EncodeToString(sealed[len(sealMagic) : len(sealMagic)+8])
	nonce := sealed[len(sealMagic)+8 : n]
	for i, c := range append([]key{k.current}, k.previous...) {
		if c.id != id {
			continue
		}
		plain, err := c.aead.Open(nil, nonce, sealed[n:], []byte(name))
		if err != nil {
			return nil, false, fmt.Errorf("%s: sealed value does not open under key %s: altered, or moved from another name", name, id)
		}
		return plain, i > 0, nil
	}
	return nil, false, fmt.Errorf("%s: %w %s; this keyring holds %s", name, ErrWrongKey, id, k.ids())
}

func (k *Keyring) ids() string {
	ids := []string{k.current.id + " (current)"}
	for _, p := range k.previous {
		ids = append(ids, p.id+" (previous)")
	}
	return strings.Join(ids, ", ")
}
