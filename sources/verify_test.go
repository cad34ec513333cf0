package sources_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	git "github.com/go-git/go-git/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/sources"
)

// sshSigner signs commits for go-git in the format git uses with
// gpg.format=ssh.
type sshSigner struct{ ssh.Signer }

func (s sshSigner) Sign(msg io.Reader) ([]byte, error) {
	data, err := io.ReadAll(msg)
	if err != nil {
		return nil, err
	}
	return sources.SignSSH(s.Signer, data)
}

func newSSHKey(t *testing.T) (ssh.Signer, ed25519.PrivateKey) { return gittest.NewSSHKey(t) }

func newPGPKey(t *testing.T, name string) (*openpgp.Entity, []byte) {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", name+"@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return e, buf.Bytes()
}

func TestSignedCommits(t *testing.T) {
	ctx := context.Background()
	allowedSSH, _ := newSSHKey(t)
	otherSSH, _ := newSSHKey(t)
	allowedPGP, allowedPGPPub := newPGPKey(t, "release")
	otherPGP, _ := newPGPKey(t, "mallory")
	v, err := sources.NewVerifier(
		[][]byte{[]byte("# release signers\nops@example.com " + string(ssh.MarshalAuthorizedKey(allowedSSH.PublicKey())))},
		[][]byte{allowedPGPPub})
	if err != nil {
		t.Fatal(err)
	}
	work := gittest.NewRepo(t)
	files := func(n string) map[string]string {
		return map[string]string{"classes/standard.yaml": classYAML, "clusters/" + n + ".yaml": cluster(n)}
	}
	for _, tc := range []struct {
		name   string
		opts   git.CommitOptions
		want   error
		signer string
	}{
		{"unsigned", git.CommitOptions{}, sources.ErrUnsigned, ""},
		{"ssh allowed", git.CommitOptions{Signer: sshSigner{allowedSSH}}, nil, "ssh " + ssh.FingerprintSHA256(allowedSSH.PublicKey())},
		{"ssh unknown key", git.CommitOptions{Signer: sshSigner{otherSSH}}, sources.ErrUntrusted, ""},
		{"openpgp allowed", git.CommitOptions{SignKey: allowedPGP}, nil, "openpgp"},
		{"openpgp unknown key", git.CommitOptions{SignKey: otherPGP}, sources.ErrUntrusted, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := work.CommitGo(tc.name, files(strings.ReplaceAll(tc.name, " ", "-")), tc.opts)
			r := open(t, work.Dir, func(o *sources.Options) { o.Verify = v })
			rev, err := r.Revision(ctx, "main")
			if err != nil {
				t.Fatal(err)
			}
			if rev.Commit != head {
				t.Fatalf("revision %s, want head %s", rev.Commit, head)
			}
			if !errors.Is(rev.Err, tc.want) || (tc.want == nil) == rev.Rejected() {
				t.Fatalf("Err = %v, want %v", rev.Err, tc.want)
			}
			if tc.want != nil && (rev.Fleet != nil || !strings.Contains(rev.Err.Error(), head[:12])) {
				t.Errorf("rejected revision: fleet %v, err %q should name the commit", rev.Fleet, rev.Err)
			}
			if !strings.HasPrefix(rev.Signer, tc.signer) {
				t.Errorf("Signer = %q, want prefix %q", rev.Signer, tc.signer)
			}
			// A refusal names the key that signed, so the operator knows
			// whose key to add, or whom to ask.
			if tc.name == "openpgp unknown key" && !strings.Contains(rev.Err.Error(), fmt.Sprintf("%X", otherPGP.PrimaryKey.Fingerprint)) &&
				!strings.Contains(rev.Err.Error(), fmt.Sprintf("%016X", otherPGP.PrimaryKey.KeyId)) {
				t.Errorf("refusal %q does not name the signing key %X", rev.Err, otherPGP.PrimaryKey.Fingerprint)
			}
			if tc.name == "ssh unknown key" && !strings.Contains(rev.Err.Error(), ssh.FingerprintSHA256(otherSSH.PublicKey())) {
				t.Errorf("refusal %q does not name the signing key", rev.Err)
			}
		})
	}
}

// A commit signed by the git CLI itself (gpg.format=ssh, ssh-keygen -Y sign)
// verifies: the SSHSIG envelope is the one real users produce.
func TestCommitSignedByGitCLIWithSSHKey(t *testing.T) {
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("ssh-keygen not installed")
	}
	signer, priv := newSSHKey(t)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	work := gittest.NewRepo(t)
	work.Git("config", "gpg.format", "ssh")
	work.Git("config", "user.signingkey", keyFile)
	work.Write(map[string]string{"clusters/a.yaml": cluster("a"), "classes/standard.yaml": classYAML})
	work.Git("add", "-A")
	work.Git("commit", "-q", "-S", "-m", "signed by git")
	v, err := sources.NewVerifier([][]byte{ssh.MarshalAuthorizedKey(signer.PublicKey())}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := open(t, work.Dir, func(o *sources.Options) { o.Verify = v })
	rev, err := r.Revision(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	if rev.Rejected() || rev.Signer != "ssh "+ssh.FingerprintSHA256(signer.PublicKey()) {
		t.Errorf("git-signed commit: Err %v, Signer %q", rev.Err, rev.Signer)
	}
}

// TestVerifyModeAll: with --verify-mode all, an unsigned commit between the
// last applied one and a signed head is refused, and named; head mode
// checks the head alone, as Flux does. A fully signed history passes.
func TestVerifyModeAll(t *testing.T) {
	ctx := context.Background()
	signer, _ := newSSHKey(t)
	v, err := sources.NewVerifier([][]byte{ssh.MarshalAuthorizedKey(signer.PublicKey())}, nil)
	if err != nil {
		t.Fatal(err)
	}
	signed := git.CommitOptions{Signer: sshSigner{signer}}
	work := gittest.NewRepo(t)
	files := func(n string) map[string]string {
		return map[string]string{"classes/standard.yaml": classYAML, "clusters/" + n + ".yaml": cluster(n)}
	}
	applied := work.CommitGo("applied", files("a"), signed)
	sneaked := work.CommitGo("unsigned", files("b"), git.CommitOptions{})
	head := work.CommitGo("signed on top", files("c"), signed)

	all := open(t, work.Dir, func(o *sources.Options) { o.Verify, o.VerifyMode = v, sources.VerifyAll })
	rev, err := all.RevisionSince(ctx, head, applied)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(rev.Err, sources.ErrUnsigned) || !strings.Contains(rev.Err.Error(), sneaked[:12]) {
		t.Errorf("all: %v; want a refusal naming the unsigned commit %s", rev.Err, sneaked[:12])
	}
	headOnly := open(t, work.Dir, func(o *sources.Options) { o.Verify = v })
	if rev, err := headOnly.RevisionSince(ctx, head, applied); err != nil || rev.Rejected() {
		t.Errorf("head: %v %v; want the signed head applied", err, rev.Err)
	}
	// Signed from here on: the next revision after a signed one passes.
	next := work.CommitGo("signed again", files("d"), signed)
	if rev, err := all.RevisionSince(ctx, next, head); err != nil || rev.Rejected() {
		t.Errorf("all, signed since the applied commit: %v %v", err, rev.Err)
	}
	if _, err := sources.Open(ctx, sources.Options{Location: work.Dir, VerifyMode: "some"}); err == nil {
		t.Error("Open accepted verify mode \"some\"")
	}
}
