package local

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// joinFailedFile is written by a node that was refused, with why; the
// worker reports it as the machine's failure.
const joinFailedFile = "join-failed"

// refused is a join that must not be tried again: a wrong or expired
// token, a control plane that presents another cluster's CA.
type refused struct{ reason string }

func (r *refused) Error() string { return r.reason }

// joinRequest is what a joining machine sends its control plane over TLS.
type joinRequest struct {
	Node         string `json:"node"`
	Token        string `json:"token"`
	ControlPlane bool   `json:"controlPlane,omitempty"`
}

// joinResponse: joined, or refused for Reason; a control-plane machine
// also gets the cluster CA sealed under the certificate key (as kubeadm's
// kubeadm-certs secret).
type joinResponse struct {
	Joined bool   `json:"joined"`
	Reason string `json:"reason,omitempty"`
	Certs  []byte `json:"certs,omitempty"`
}

// member is a node's part in its cluster, from its bootstrap data: it
// joins (or, as the first control plane, initialises) the cluster and, as
// a control plane, serves the control-plane endpoint where others join.
type member struct {
	o  NodeOptions
	d  *bootstrap.Data
	ca pki.KeyPair // a control plane's, once it has joined

	mu     sync.Mutex
	joined []string // the machines that joined through this control plane
	nc     *nats.Conn
}

// joinCluster plays kubeadm init or join for the node's bootstrap data.
// It returns once the node is part of its cluster; a *refused error is
// final.
func (mb *member) joinCluster(ctx context.Context) error {
	d := mb.d
	if d.Init {
		mb.ca = pki.KeyPair{Cert: d.Files[bootstrap.PKIDir+"/ca.crt"], Key: d.Files[bootstrap.PKIDir+"/ca.key"]}
		// The first control plane registers itself, with its own token.
		if err := mb.review(ctx, d.Node, d.Token); err != nil {
			return err
		}
		mb.note(d.Node)
		return nil
	}
	for {
		resp, err := mb.askToJoin(ctx)
		var r *refused
		switch {
		case errors.As(err, &r):
			return err
		case err == nil && resp.Joined:
			if d.ControlPlane {
				if mb.ca, err = openCerts(d.CertificateKey, resp.Certs); err != nil {
					return &refused{"the control plane's certificates do not open with this machine's certificate key: " + err.Error()}
				}
			}
			return nil
		case err == nil:
			return &refused{resp.Reason}
		}
		mb.o.Log.Info().Err(err).Str("endpoint", d.Endpoint).Msg("control plane not reachable yet; retrying")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// askToJoin presents the node's token to the control-plane endpoint,
// trusting it only if it presents the pinned CA.
func (mb *member) askToJoin(ctx context.Context) (*joinResponse, error) {
	host, _, _ := net.SplitHostPort(mb.d.Endpoint)
	var pinErr error
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // replaced by VerifyConnection: the CA is pinned by hash
		VerifyConnection: func(cs tls.ConnectionState) error {
			pinErr = verifyPinned(cs.PeerCertificates, mb.d.CACertHashes, host)
			return pinErr
		},
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	defer client.CloseIdleConnections()
	body, _ := json.Marshal(joinRequest{Node: mb.d.Node, Token: mb.d.Token, ControlPlane: mb.d.ControlPlane})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+mb.d.Endpoint+"/join", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	res, err := client.Do(req)
	if pinErr != nil {
		return nil, &refused{pinErr.Error()}
	}
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var jr joinResponse
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&jr); err != nil {
		return nil, fmt.Errorf("control plane answered %s: %w", res.Status, err)
	}
	if res.StatusCode == http.StatusServiceUnavailable {
		return nil, errors.New(jr.Reason)
	}
	return &jr, nil
}

// verifyPinned accepts a chain whose CA (its last certificate) has one of
// the pinned hashes and signed the serving certificate for host.
func verifyPinned(chain []*x509.Certificate, pins []string, host string) error {
	if len(chain) < 2 {
		return errors.New("the control plane presents no CA certificate")
	}
	ca := chain[len(chain)-1]
	if h := pki.CAHash(ca); !slices.Contains(pins, h) {
		return fmt.Errorf("the control plane presents CA %s, not the pinned %v: it is another cluster's", h, pins)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, DNSName: host}); err != nil {
		return fmt.Errorf("the control plane's certificate: %w", err)
	}
	return nil
}

// serve makes the node's serving certificate from the cluster CA and
// serves the control-plane endpoint until ctx ends. Where another control
// plane holds the address (local machines share 127.0.0.1), it stands by
// and takes over when that one goes.
func (mb *member) serve(ctx context.Context) {
	host, port, _ := net.SplitHostPort(mb.d.Endpoint)
	cl := &pki.Cluster{Cluster: mb.o.Cluster, CA: mb.ca}
	kp, err := cl.Sign("kube-apiserver", nil, []string{host, mb.d.Node, "127.0.0.1", "localhost"}, true, time.Now())
	if err != nil {
		mb.o.Log.Error().Err(err).Msg("control plane: serving certificate")
		return
	}
	cert, err := tls.X509KeyPair([]byte(kp.Cert+mb.ca.Cert), []byte(kp.Key))
	if err != nil {
		mb.o.Log.Error().Err(err).Msg("control plane: serving certificate")
		return
	}
	addr := mb.d.Endpoint
	if net.ParseIP(host) == nil {
		addr = ":" + port // a name that resolves to this machine, among others
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /join", mb.handleJoin)
	mux.HandleFunc("GET /nodes", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(mb.nodes())
	})
	for standby := false; ctx.Err() == nil; standby = true {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if !standby {
				mb.o.Log.Info().Err(err).Str("endpoint", addr).Msg("control plane: the endpoint is served by another; standing by")
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		mb.o.Log.Info().Str("endpoint", addr).Msg("control plane: serving the endpoint")
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
			TLSConfig: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}}}
		go func() { <-ctx.Done(); _ = srv.Close() }()
		_ = srv.ServeTLS(ln, "", "")
	}
}

// handleJoin asks the leader to review a joining machine's token.
func (mb *member) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req joinRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil || req.Node == "" {
		writeJoin(w, http.StatusBadRequest, joinResponse{Reason: "a join request names the node and its token"})
		return
	}
	err := mb.review(r.Context(), req.Node, req.Token)
	var ref *refused
	switch {
	case errors.As(err, &ref):
		mb.o.Log.Warn().Str("node", req.Node).Str("reason", ref.reason).Msg("control plane: join refused")
		writeJoin(w, http.StatusForbidden, joinResponse{Reason: ref.reason})
		return
	case err != nil:
		writeJoin(w, http.StatusServiceUnavailable, joinResponse{Reason: err.Error()})
		return
	}
	resp := joinResponse{Joined: true}
	if req.ControlPlane {
		if resp.Certs, err = sealCerts(mb.d.CertificateKey, mb.ca); err != nil {
			writeJoin(w, http.StatusServiceUnavailable, joinResponse{Reason: err.Error()})
			return
		}
	}
	mb.note(req.Node)
	mb.o.Log.Info().Str("node", req.Node).Msg("control plane: node joined")
	writeJoin(w, http.StatusOK, resp)
}

func writeJoin(w http.ResponseWriter, code int, r joinResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(r)
}

// review asks the leader, over NATS, whether node may join with token: the
// token's ID and its secret's hash travel, never the secret.
func (mb *member) review(ctx context.Context, node, token string) error {
	req, err := bootstrap.ReviewOf(mb.o.Cluster, node, token)
	if err != nil {
		return &refused{"the bootstrap token is malformed: " + err.Error()}
	}
	data, err := wire.Encode(&req)
	if err != nil {
		return err
	}
	nc, err := mb.conn(ctx)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	msg, err := nc.RequestWithContext(rctx, wire.JoinSubject(mb.o.Cluster, mb.o.Machine), data)
	if err != nil {
		return fmt.Errorf("join review: %w", err)
	}
	v, err := wire.DecodeJoinVerdict(msg.Data)
	switch {
	case err != nil:
		return fmt.Errorf("join review: %w", err)
	case v.Joined:
		return nil
	case v.Retry:
		return errors.New(v.Reason)
	}
	return &refused{v.Reason}
}

// conn is the node's connection for reviews, with the inbox its
// credentials let it hear.
func (mb *member) conn(ctx context.Context) (*nats.Conn, error) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.nc != nil {
		return mb.nc, nil
	}
	opts := mb.o.NATS
	opts.InboxPrefix = wire.NodeInboxPrefix(mb.o.Cluster, mb.o.Machine)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	nc, err := natsbus.Connect(cctx, opts.URL, opts, mb.o.Log)
	if err != nil {
		return nil, err
	}
	mb.nc = nc
	return nc, nil
}

func (mb *member) close() {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if mb.nc != nil {
		mb.nc.Close()
	}
}

func (mb *member) note(node string) {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if !slices.Contains(mb.joined, node) {
		mb.joined = append(mb.joined, node)
	}
}

// nodes are the machines that joined through this control plane.
func (mb *member) nodes() []string {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return slices.Clone(mb.joined)
}

// sealCerts and openCerts pass the cluster CA to a joining control plane
// under the cluster's certificate key, as kubeadm's --certificate-key.
func sealCerts(certKey string, ca pki.KeyPair) ([]byte, error) {
	aead, err := certAEAD(certKey)
	if err != nil {
		return nil, err
	}
	plain, _ := json.Marshal(ca)
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, plain, nil), nil
}

func openCerts(certKey string, sealed []byte) (pki.KeyPair, error) {
	var ca pki.KeyPair
	aead, err := certAEAD(certKey)
	if err != nil {
		return ca, err
	}
	if len(sealed) < aead.NonceSize() {
		return ca, errors.New("no certificates")
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], nil)
	if err != nil {
		return ca, err
	}
	return ca, json.Unmarshal(plain, &ca)
}

func certAEAD(certKey string) (cipher.AEAD, error) {
	key, err := hex.DecodeString(certKey)
	if err != nil || len(key) != 32 {
		return nil, errors.New("the certificate key is not 32 bytes of hex")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// failJoin records why the node was refused, for the worker to report.
func failJoin(dir string, err error) {
	_ = writeFileAtomic(filepath.Join(dir, joinFailedFile), []byte(err.Error()+"\n"))
}
