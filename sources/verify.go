package sources

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	pgperrors "github.com/ProtonMail/go-crypto/openpgp/errors"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/crypto/ssh"
)

// Verifier checks that commits are signed by an allowed SSH or OpenPGP key.
// The zero value allows no key, so every commit is refused.
type Verifier struct {
	ssh []ssh.PublicKey
	pgp []string // armored public keys, one per file
}

// NewVerifier reads allowed keys: SSH keys in authorized_keys or
// allowed_signers form (one per line), and armored OpenPGP public keys.
func NewVerifier(sshKeys [][]byte, pgpKeys [][]byte) (*Verifier, error) {
	v := &Verifier{}
	for i, data := range sshKeys {
		keys, err := parseSSHKeys(data)
		if err != nil {
			return nil, fmt.Errorf("ssh keys #%d: %w", i+1, err)
		}
		v.ssh = append(v.ssh, keys...)
	}
	for i, data := range pgpKeys {
		if _, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("openpgp keys #%d: %w (give an armored public key, gpg --export --armor)", i+1, err)
		}
		v.pgp = append(v.pgp, string(data))
	}
	if len(v.ssh) == 0 && len(v.pgp) == 0 {
		return nil, errors.New("signature verification: no allowed keys given")
	}
	return v, nil
}

// LoadVerifier is NewVerifier reading the keys from files.
func LoadVerifier(sshKeyFiles, pgpKeyFiles []string) (*Verifier, error) {
	read := func(files []string) ([][]byte, error) {
		var out [][]byte
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("signature keys: %w", err)
			}
			out = append(out, data)
		}
		return out, nil
	}
	s, err := read(sshKeyFiles)
	if err != nil {
		return nil, err
	}
	p, err := read(pgpKeyFiles)
	if err != nil {
		return nil, err
	}
	return NewVerifier(s, p)
}

// parseSSHKeys accepts authorized_keys lines and allowed_signers lines
// (principal first); blank lines and # comments are skipped.
func parseSSHKeys(data []byte) ([]ssh.PublicKey, error) {
	var keys []ssh.PublicKey
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			if _, rest, ok := strings.Cut(line, " "); ok {
				k, _, _, _, err = ssh.ParseAuthorizedKey([]byte(strings.TrimSpace(rest)))
			}
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: not an SSH public key: %w", n, err)
		}
		keys = append(keys, k)
	}
	return keys, sc.Err()
}

// Verify returns who signed c ("ssh SHA256:…" or "openpgp <key id> <name>"),
// or an error wrapping ErrUnsigned or ErrUntrusted that says why not.
func (v *Verifier) Verify(c *object.Commit) (string, error) {
	short := c.Hash.String()[:12]
	if strings.TrimSpace(c.PGPSignature) == "" {
		return "", fmt.Errorf("commit %s: %w; sign it (git commit -S) with an allowed key", short, ErrUnsigned)
	}
	if strings.HasPrefix(strings.TrimSpace(c.PGPSignature), sshsigArmorHead) {
		return v.verifySSH(c, short)
	}
	return v.verifyPGP(c, short)
}

func (v *Verifier) verifySSH(c *object.Commit, short string) (string, error) {
	sig, pub, err := parseSSHSig(c.PGPSignature)
	if err != nil {
		return "", fmt.Errorf("commit %s: %w: %w", short, ErrUntrusted, err)
	}
	fp := ssh.FingerprintSHA256(pub)
	allowed := false
	for _, k := range v.ssh {
		if bytes.Equal(k.Marshal(), pub.Marshal()) {
			allowed = true
		}
	}
	if !allowed {
		return "", fmt.Errorf("commit %s: %w: signed by SSH key %s, which is not an allowed key", short, ErrUntrusted, fp)
	}
	msg, err := encodeWithoutSignature(c)
	if err != nil {
		return "", err
	}
	if err := verifySSHSig(sig, pub, msg); err != nil {
		return "", fmt.Errorf("commit %s: %w: SSH signature by %s does not match the commit: %w", short, ErrUntrusted, fp, err)
	}
	return "ssh " + fp, nil
}

func (v *Verifier) verifyPGP(c *object.Commit, short string) (string, error) {
	var lastErr error = pgperrors.ErrUnknownIssuer
	for _, ring := range v.pgp {
		e, err := c.Verify(ring)
		if err == nil {
			name := ""
			for n := range e.Identities {
				name = n
				break
			}
			return fmt.Sprintf("openpgp %X %s", e.PrimaryKey.KeyId, name), nil
		}
		if !errors.Is(err, pgperrors.ErrUnknownIssuer) {
			lastErr = err
		}
	}
	if errors.Is(lastErr, pgperrors.ErrUnknownIssuer) {
		return "", fmt.Errorf("commit %s: %w: signed by OpenPGP %s, which is not an allowed key", short, ErrUntrusted, pgpIssuer(c.PGPSignature))
	}
	return "", fmt.Errorf("commit %s: %w: OpenPGP signature does not verify: %w", short, ErrUntrusted, lastErr)
}

func encodeWithoutSignature(c *object.Commit) ([]byte, error) {
	o := &plumbing.MemoryObject{}
	if err := c.EncodeWithoutSignature(o); err != nil {
		return nil, fmt.Errorf("commit %s: %w", c.Hash, err)
	}
	r, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// pgpIssuer names the key an OpenPGP signature says it was made with: its
// fingerprint when the signature carries it, else its key ID.
func pgpIssuer(armored string) string {
	block, err := armor.Decode(strings.NewReader(armored))
	if err != nil {
		return "key (unreadable signature)"
	}
	p, err := packet.Read(block.Body)
	if err != nil {
		return "key (unreadable signature)"
	}
	sig, ok := p.(*packet.Signature)
	switch {
	case !ok:
		return "key (no signature packet)"
	case len(sig.IssuerFingerprint) > 0:
		return fmt.Sprintf("key %X", sig.IssuerFingerprint)
	case sig.IssuerKeyId != nil:
		return fmt.Sprintf("key ID %016X", *sig.IssuerKeyId)
	}
	return "key (the signature names none)"
}
