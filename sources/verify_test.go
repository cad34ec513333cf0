package sources_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/pem"
	"errors"
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

	"github.com/gitfleet/gitfleet/sources"
	"github.com/gitfleet/gitfleet/sources/internal/gittest"
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
