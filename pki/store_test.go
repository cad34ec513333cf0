package pki

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

func testStore(t *testing.T) (jetstream.JetStream, context.Context) {
	t.Helper()
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv.ClientURL())
	if err := natsbus.Ensure(t.Context(), js); err != nil {
		t.Fatal(err)
	}
	return js, t.Context()
}

// A cluster's material is made once and read back the same; tokens are
// issued, read and revoked; a deleted cluster leaves nothing; nothing in
// the bucket is plain text.
func TestStore(t *testing.T) {
	js, ctx := testStore(t)
	keys, _ := NewKeyring(testKey(0))
	s, _, err := OpenStore(ctx, js, keys)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c1, err := s.Cluster(ctx, "dev-1", "127.0.0.1:6443", now)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := s.Cluster(ctx, "dev-1", "elsewhere:1", now.Add(time.Hour))
	if err != nil || c2.CA.Cert != c1.CA.Cert || c2.Endpoint != "127.0.0.1:6443" || c2.CertificateKey != c1.CertificateKey {
		t.Fatalf("the second ask made other material: %v", err)
	}
	tok, err := s.IssueToken(ctx, "dev-1", "dev-1-md-0-abcde", DefaultTokenTTL, now)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.Token(ctx, "dev-1", "dev-1-md-0-abcde"); err != nil || !ok || got.String() != tok.String() {
		t.Fatalf("Token = %v %v %v", got, ok, err)
	}
	if !tok.Expires.Equal(now.Add(DefaultTokenTTL).UTC()) {
		t.Errorf("token expires %v", tok.Expires)
	}

	kv, _ := js.KeyValue(ctx, wire.BucketPKI)
	lister, _ := kv.ListKeys(ctx)
	for k := range lister.Keys() {
		e, _ := kv.Get(ctx, k)
		for _, plain := range []string{"PRIVATE KEY", "CERTIFICATE", tok.Secret, c1.CertificateKey, "dev-1-md-0"} {
			if strings.Contains(string(e.Value()), plain) {
				t.Errorf("bucket key %s holds %q in plain text", k, plain)
			}
		}
	}

	if err := s.RevokeToken(ctx, "dev-1", "dev-1-md-0-abcde"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Token(ctx, "dev-1", "dev-1-md-0-abcde"); ok {
		t.Error("a revoked token is still there")
	}
	if _, err := s.IssueToken(ctx, "dev-1", "dev-1-cp-xyz", DefaultTokenTTL, now); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCluster(ctx, "dev-1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.HasCluster(ctx, "dev-1"); ok {
		t.Error("a deleted cluster's CA is still there")
	}
	if _, ok, _ := s.Token(ctx, "dev-1", "dev-1-cp-xyz"); ok {
		t.Error("a deleted cluster's token is still there")
	}
	if err := s.DeleteCluster(ctx, "never"); err != nil {
		t.Errorf("deleting a cluster with nothing stored: %v", err)
	}
}

// A restart under another key fails, says how to go on, and changes
// nothing; the documented rotation (new key current, old key previous)
// reseals every value, after which the new key alone opens them.
func TestStoreKeyRotation(t *testing.T) {
	js, ctx := testStore(t)
	old, _ := NewKeyring(testKey(0))
	s, _, err := OpenStore(ctx, js, old)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := s.Cluster(ctx, "dev-1", "127.0.0.1:6443", time.Now())
	tok, _ := s.IssueToken(ctx, "dev-1", "m1", DefaultTokenTTL, time.Now())

	other, _ := NewKeyring(testKey(1))
	_, _, err = OpenStore(ctx, js, other)
	if err == nil || !strings.Contains(err.Error(), "--secrets-previous-key-file") || !strings.Contains(err.Error(), old.ID()) {
		t.Fatalf("opening under another key: %v; want an error naming the sealing key and the rotation flag", err)
	}
	if s, _, err := OpenStore(ctx, js, old); err != nil {
		t.Fatalf("the old key after a refused start: %v", err)
	} else if got, _, _ := s.HasCluster(ctx, "dev-1"); got.CA.Cert != c.CA.Cert {
		t.Fatal("a refused start changed the cluster's CA")
	}

	rotating, _ := NewKeyring(testKey(1), testKey(0))
	s, resealed, err := OpenStore(ctx, js, rotating)
	if err != nil || resealed != 2 {
		t.Fatalf("rotation: resealed %d, %v; want 2 (a CA, a token)", resealed, err)
	}
	s, resealed, err = OpenStore(ctx, js, other)
	if err != nil || resealed != 0 {
		t.Fatalf("the new key alone after the rotation: %d, %v", resealed, err)
	}
	if got, ok, err := s.HasCluster(ctx, "dev-1"); err != nil || !ok || got.CA.Key != c.CA.Key {
		t.Errorf("the CA after the rotation: %v %v", ok, err)
	}
	if got, ok, err := s.Token(ctx, "dev-1", "m1"); err != nil || !ok || got.String() != tok.String() {
		t.Errorf("the token after the rotation: %v %v", ok, err)
	}
	if _, _, err := OpenStore(ctx, js, old); err == nil {
		t.Error("the old key still opens the bucket after the rotation")
	}
}
