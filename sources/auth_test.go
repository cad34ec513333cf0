package sources_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/sources"
)

func TestOpenOverSSHWithKeyAndKnownHosts(t *testing.T) {
	ctx := context.Background()
	rm := newRemote(t)
	signer, priv := newSSHKey(t)
	srv := gittest.NewSSHServer(t, filepath.Dir(rm.bare), signer.PublicKey())
	dir := t.TempDir()
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile, known, wrong := filepath.Join(dir, "id"), filepath.Join(dir, "known_hosts"), filepath.Join(dir, "other_hosts")
	other, _ := newSSHKey(t)
	os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600)
	os.WriteFile(known, []byte(srv.KnownHosts()), 0o600)
	os.WriteFile(wrong, []byte(strings.Replace(srv.KnownHosts(), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(srv.HostKey.PublicKey()))), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(other.PublicKey()))), 1)), 0o600)

	r := open(t, srv.URL("fleet.git"), func(o *sources.Options) {
		o.Auth = sources.Auth{SSHKeyFile: keyFile, KnownHostsFile: known}
	})
	if got, err := r.Resolve(ctx, "main"); err != nil || got != rm.work.Head() {
		t.Errorf("Resolve over ssh = %s, %v; want %s", got, err, rm.work.Head())
	}

	_, err = sources.Open(ctx, sources.Options{Location: srv.URL("fleet.git"), DataDir: t.TempDir(),
		Auth: sources.Auth{SSHKeyFile: keyFile, KnownHostsFile: wrong}})
	if !errors.Is(err, sources.ErrFetchFailed) || !strings.Contains(err.Error(), "key mismatch") {
		t.Errorf("Open with a wrong host key = %v, want a fetch failure naming the key mismatch", err)
	}
}

func TestOpenOverHTTPWithBasicAuthAndToken(t *testing.T) {
	ctx := context.Background()
	rm := newRemote(t)
	guarded := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || !(u == "ada" && p == "pw" || p == "tok3n") {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	srv := gittest.NewServerWith(t, filepath.Dir(rm.bare), guarded)
	url := srv.URL + "/fleet.git"
	for name, auth := range map[string]sources.Auth{
		"basic": {Username: "ada", Password: "pw"},
		"token": {Token: "tok3n"},
	} {
		t.Run(name, func(t *testing.T) {
			r := open(t, url, func(o *sources.Options) { o.Auth = auth })
			if got, err := r.Resolve(ctx, "main"); err != nil || got != rm.work.Head() {
				t.Errorf("Resolve = %s, %v", got, err)
			}
		})
	}
	_, err := sources.Open(ctx, sources.Options{Location: url, DataDir: t.TempDir(), Auth: sources.Auth{Token: "wrong"}})
	if !errors.Is(err, sources.ErrFetchFailed) || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("Open with a wrong token = %v, want a fetch failure about credentials", err)
	}
}
