package pki

import (
	"crypto/x509"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func testKey(b byte) []byte { return []byte(strings.Repeat(string(rune('a'+b)), KeySize)) }

// A value opens only under its key and its name; a value sealed under a
// key the ring lacks says which key it needs.
func TestKeyringSealsUnderItsKeyAndName(t *testing.T) {
	a, _ := NewKeyring(testKey(0))
	b, _ := NewKeyring(testKey(1))
	sealed := a.Seal("ca.dev-1", []byte("the CA key"))
	if strings.Contains(string(sealed), "the CA key") {
		t.Fatal("the sealed value holds the plain text")
	}
	if plain, rotated, err := a.Open("ca.dev-1", sealed); err != nil || rotated || string(plain) != "the CA key" {
		t.Fatalf("Open = %q, %v, %v", plain, rotated, err)
	}
	if _, _, err := a.Open("ca.prod-1", sealed); err == nil {
		t.Error("a value moved to another name opened")
	}
	_, _, err := b.Open("ca.dev-1", sealed)
	if !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), a.ID()) || !strings.Contains(err.Error(), b.ID()) {
		t.Errorf("Open under another key: %v; want ErrWrongKey naming %s and %s", err, a.ID(), b.ID())
	}
	rotating, _ := NewKeyring(testKey(1), testKey(0))
	if plain, rotated, err := rotating.Open("ca.dev-1", sealed); err != nil || !rotated || string(plain) != "the CA key" {
		t.Errorf("Open with the sealing key as previous = %q, %v, %v; want it, rotated", plain, rotated, err)
	}
}

// A key file others can read, or that is not a key, is refused with the
// fix; NewKeyFile makes one only its owner reads, and leaves one alone.
func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets.key")
	if err := NewKeyFile(path); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("NewKeyFile made mode %o", st.Mode().Perm())
	}
	first, _ := os.ReadFile(path)
	if err := NewKeyFile(path); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); string(again) != string(first) {
		t.Error("NewKeyFile replaced an existing key")
	}
	if _, err := LoadKeyring(path); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(path, 0o644)
	if _, err := LoadKeyring(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable key: %v; want the chmod fix", err)
	}
	bad := filepath.Join(dir, "bad.key")
	_ = os.WriteFile(bad, []byte(base64.StdEncoding.EncodeToString([]byte("short"))), 0o600)
	if _, err := LoadKeyring(bad); err == nil || !strings.Contains(err.Error(), "/dev/urandom") {
		t.Errorf("a short key: %v; want how to make one", err)
	}
}

// The cluster's CAs are CAs; the hash is kubeadm's; what the CA signs
// verifies against it, for the names asked, and not against another
// cluster's CA.
func TestClusterTrust(t *testing.T) {
	now := time.Now()
	dev, err := NewCluster("dev-1", now)
	if err != nil {
		t.Fatal(err)
	}
	prod, _ := NewCluster("prod-1", now)
	for name, kp := range map[string]KeyPair{"ca": dev.CA, "front-proxy-ca": dev.FrontProxyCA, "etcd-ca": dev.EtcdCA} {
		c, err := ParseCert(kp.Cert)
		if err != nil || !c.IsCA || c.Subject.CommonName != map[string]string{"ca": "kubernetes", "front-proxy-ca": "front-proxy-ca", "etcd-ca": "etcd-ca"}[name] {
			t.Errorf("%s: %v, CA %v, CN %q", name, err, c != nil && c.IsCA, c.Subject.CommonName)
		}
		if !strings.Contains(kp.Key, "PRIVATE KEY") {
			t.Errorf("%s has no private key", name)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(dev.CertificateKey) {
		t.Errorf("certificate key %q is not 32 bytes of hex", dev.CertificateKey)
	}
	hash, err := dev.CAHash()
	if err != nil || !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(hash) {
		t.Errorf("CA hash %q, %v", hash, err)
	}
	if other, _ := prod.CAHash(); other == hash {
		t.Error("two clusters' CAs have one hash")
	}

	serving, err := dev.Sign("kube-apiserver", nil, []string{"127.0.0.1", "dev-1-control-plane"}, true, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := ParseCert(serving.Cert)
	verify := func(ca KeyPair, host string) error {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM([]byte(ca.Cert))
		_, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
		return err
	}
	for _, host := range []string{"127.0.0.1", "dev-1-control-plane"} {
		if err := verify(dev.CA, host); err != nil {
			t.Errorf("serving certificate for %s: %v", host, err)
		}
	}
	if verify(dev.CA, "prod-1-control-plane") == nil {
		t.Error("the serving certificate verifies for a name it was not made for")
	}
	if verify(prod.CA, "127.0.0.1") == nil {
		t.Error("dev-1's serving certificate verifies against prod-1's CA")
	}

	kc, err := dev.AdminKubeconfig("127.0.0.1:6443", now)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Clusters []struct {
			Cluster struct {
				Server string `yaml:"server"`
				CA     string `yaml:"certificate-authority-data"`
			} `yaml:"cluster"`
		} `yaml:"clusters"`
		Users []struct {
			User struct {
				Cert string `yaml:"client-certificate-data"`
			} `yaml:"user"`
		} `yaml:"users"`
	}
	if err := yaml.Unmarshal(kc, &cfg); err != nil || len(cfg.Clusters) != 1 || len(cfg.Users) != 1 {
		t.Fatalf("kubeconfig: %v\n%s", err, kc)
	}
	caData, _ := base64.StdEncoding.DecodeString(cfg.Clusters[0].Cluster.CA)
	certData, _ := base64.StdEncoding.DecodeString(cfg.Users[0].User.Cert)
	if cfg.Clusters[0].Cluster.Server != "https://127.0.0.1:6443" || string(caData) != dev.CA.Cert {
		t.Errorf("kubeconfig cluster: %+v", cfg.Clusters[0])
	}
	client, err := ParseCert(string(certData))
	if err != nil || client.Subject.CommonName != "kubernetes-admin" || client.Subject.Organization[0] != "kubeadm:cluster-admins" {
		t.Errorf("kubeconfig client certificate: %v %+v", err, client)
	}
}

func TestTokens(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tok := NewToken("m", DefaultTokenTTL, time.Now())
		id, secret, err := ParseToken(tok.String())
		if err != nil || id != tok.ID || secret != tok.Secret {
			t.Fatalf("%q: %v", tok.String(), err)
		}
		if seen[tok.ID] {
			t.Fatalf("token ID %s twice in 100", tok.ID)
		}
		seen[tok.ID] = true
		last := "a"
		if tok.Secret[15] == 'a' {
			last = "b"
		}
		if !tok.Matches(tok.Secret) || tok.Matches(tok.Secret[:15]+last) {
			t.Fatal("Matches takes another secret, or refuses its own")
		}
	}
	for _, bad := range []string{"", "abcdef", "abcdef.0123456789abcdeF", "abcde.0123456789abcdef", "abcdef:0123456789abcdef"} {
		if _, _, err := ParseToken(bad); err == nil {
			t.Errorf("ParseToken(%q) accepted it", bad)
		}
	}
}
