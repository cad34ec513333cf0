package gittest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHServer serves the bare repositories under Root over SSH on loopback,
// running the real git-upload-pack and git-receive-pack for each session,
// as a forge does. Only ClientKey may log in.
type SSHServer struct {
	Root    string
	Addr    string     // 127.0.0.1:port
	HostKey ssh.Signer // the server's identity, for known_hosts
	ln      net.Listener
	wg      sync.WaitGroup
}

// NewSSHServer starts an SSH server that accepts only clientKey; it stops
// when the test ends.
func NewSSHServer(t testing.TB, root string, clientKey ssh.PublicKey) *SSHServer {
	t.Helper()
	host, _ := NewSSHKey(t)
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) == string(clientKey.Marshal()) {
			return nil, nil
		}
		return nil, errors.New("unknown key")
	}}
	cfg.AddHostKey(host)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &SSHServer{Root: root, Addr: ln.Addr().String(), HostKey: host, ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(c, cfg) })
		}
	})
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

// NewSSHKey makes an ed25519 key pair: the signer and the private key (for
// ssh.MarshalPrivateKey when a key file is needed).
func NewSSHKey(t testing.TB) (ssh.Signer, ed25519.PrivateKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, priv
}

// KnownHosts is a known_hosts line for this server.
func (s *SSHServer) KnownHosts() string {
	return knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, s.HostKey.PublicKey()) + "\n"
}

// URL is the ssh:// URL of repository name (e.g. fleet.git).
func (s *SSHServer) URL(name string) string { return "ssh://git@" + s.Addr + "/" + name }

func (s *SSHServer) serve(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	conn, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, reqs, err := nc.Accept()
		if err != nil {
			return
		}
		s.session(ch, reqs)
	}
}

// session runs one git command: exec "git-upload-pack '/fleet.git'".
func (s *SSHServer) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" || len(req.Payload) < 4 {
			req.Reply(false, nil)
			continue
		}
		n := binary.BigEndian.Uint32(req.Payload)
		line := string(req.Payload[4 : 4+n])
		prog, arg, _ := strings.Cut(line, " ")
		if prog != "git-upload-pack" && prog != "git-receive-pack" {
			req.Reply(false, nil)
			continue
		}
		req.Reply(true, nil)
		repo := filepath.Join(s.Root, filepath.Clean("/"+strings.Trim(arg, "'\"")))
		cmd := exec.Command("git", strings.TrimPrefix(prog, "git-"), repo)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
		code := uint32(0)
		if err := cmd.Run(); err != nil {
			code = 1
		}
		ch.CloseWrite()
		ch.SendRequest("exit-status", false, ssh.Marshal(struct{ C uint32 }{code}))
		return
	}
}
