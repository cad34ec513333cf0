package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Validity of what this package signs, as kubeadm's defaults.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 365 * 24 * time.Hour
)

// KeyPair is a certificate (or, for the service-account pair, a public
// key) and its private key, PEM-encoded.
type KeyPair struct {
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// Cluster is one cluster's trust material, as kubeadm lays it out under
// /etc/kubernetes/pki: the cluster CA, the front-proxy CA, the etcd CA,
// the service-account signing pair, and the key that encrypts the CA
// material handed to control-plane machines that join.
type Cluster struct {
	Cluster string `json:"cluster"`
	// Endpoint is the control-plane endpoint (host:port), chosen when the
	// material is made and kept with it.
	Endpoint       string    `json:"endpoint"`
	CA             KeyPair   `json:"ca"`
	FrontProxyCA   KeyPair   `json:"frontProxyCA"`
	EtcdCA         KeyPair   `json:"etcdCA"`
	ServiceAccount KeyPair   `json:"serviceAccount"` // Cert holds the public key
	CertificateKey string    `json:"certificateKey"` // 32 bytes, hex, as kubeadm's --certificate-key
	Created        time.Time `json:"created"`
}

// NewCluster makes a cluster's trust material (ECDSA P-256 keys).
func NewCluster(cluster string, now time.Time) (*Cluster, error) {
	return NewClusterAt(cluster, "", now)
}

// NewClusterAt is NewCluster for a control plane at endpoint.
func NewClusterAt(cluster, endpoint string, now time.Time) (*Cluster, error) {
	c := &Cluster{Cluster: cluster, Endpoint: endpoint, Created: now.UTC()}
	var err error
	for _, ca := range []struct {
		dst *KeyPair
		cn  string
	}{{&c.CA, "kubernetes"}, {&c.FrontProxyCA, "front-proxy-ca"}, {&c.EtcdCA, "etcd-ca"}} {
		if *ca.dst, err = newCA(ca.cn, cluster, now); err != nil {
			return nil, err
		}
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	c.ServiceAccount.Cert = string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	if c.ServiceAccount.Key, err = encodeKey(sa); err != nil {
		return nil, err
	}
	ck := make([]byte, 32)
	if _, err := rand.Read(ck); err != nil {
		return nil, err
	}
	c.CertificateKey = hex.EncodeToString(ck)
	return c, nil
}

func newCA(cn, cluster string, now time.Time) (KeyPair, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn, OrganizationalUnit: []string{"gitfleet cluster " + cluster}},
		NotBefore:             now.Add(-5 * time.Minute).UTC(),
		NotAfter:              now.Add(CAValidity).UTC(),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return KeyPair{}, err
	}
	key, err := encodeKey(k)
	return KeyPair{Cert: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), Key: key}, err
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err)
	}
	return n
}

func encodeKey(k *ecdsa.PrivateKey) (string, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})), nil
}

// ParseCert reads one PEM certificate.
func ParseCert(p string) (*x509.Certificate, error) {
	b, _ := pem.Decode([]byte(p))
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

func parseKey(p string) (crypto.Signer, error) {
	b, _ := pem.Decode([]byte(p))
	if b == nil || b.Type != "EC PRIVATE KEY" {
		return nil, errors.New("not a PEM EC private key")
	}
	return x509.ParseECPrivateKey(b.Bytes)
}

// CAHash is kubeadm's discovery hash of a CA certificate: "sha256:" and the
// hex SHA-256 of its DER SubjectPublicKeyInfo. A joining machine pins the
// control plane's CA by it.
func CAHash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CAHash is the hash of the cluster CA (see the function CAHash).
func (c *Cluster) CAHash() (string, error) {
	cert, err := ParseCert(c.CA.Cert)
	if err != nil {
		return "", fmt.Errorf("cluster %s CA: %w", c.Cluster, err)
	}
	return CAHash(cert), nil
}

// Sign issues a certificate from the cluster CA: a server certificate for
// hosts (DNS names or IP addresses) when server, else a client
// certificate for cn in the groups orgs.
func (c *Cluster) Sign(cn string, orgs, hosts []string, server bool, now time.Time) (KeyPair, error) {
	caCert, err := ParseCert(c.CA.Cert)
	if err != nil {
		return KeyPair{}, fmt.Errorf("cluster %s CA: %w", c.Cluster, err)
	}
	caKey, err := parseKey(c.CA.Key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("cluster %s CA: %w", c.Cluster, err)
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    now.Add(-5 * time.Minute).UTC(),
		NotAfter:     now.Add(CertValidity).UTC(),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
	if err != nil {
		return KeyPair{}, err
	}
	key, err := encodeKey(k)
	return KeyPair{Cert: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), Key: key}, err
}
