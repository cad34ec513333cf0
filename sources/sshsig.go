package sources

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strings"

	"golang.org/x/crypto/ssh"
)

// The SSH signature format (OpenSSH PROTOCOL.sshsig), as written by
// git commit -S with gpg.format=ssh. x/crypto has no sshsig package, so the
// envelope is parsed here; the cryptography is x/crypto/ssh's.
const (
	sshsigMagic     = "SSHSIG"
	sshsigArmorHead = "-----BEGIN SSH SIGNATURE-----"
	sshsigArmorTail = "-----END SSH SIGNATURE-----"
	// SSHSigNamespace is the namespace Git signs commits in.
	SSHSigNamespace = "git"
)

type sshsigBlob struct {
	Magic     [6]byte
	Version   uint32
	PublicKey []byte
	Namespace string
	Reserved  string
	HashAlg   string
	Signature []byte
}

// parseSSHSig decodes an armored SSH signature.
func parseSSHSig(armored string) (*sshsigBlob, ssh.PublicKey, error) {
	body := strings.TrimSpace(armored)
	if !strings.HasPrefix(body, sshsigArmorHead) || !strings.HasSuffix(body, sshsigArmorTail) {
		return nil, nil, errors.New("not an SSH signature")
	}
	body = strings.TrimSuffix(strings.TrimPrefix(body, sshsigArmorHead), sshsigArmorTail)
	raw, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(body), ""))
	if err != nil {
		return nil, nil, fmt.Errorf("SSH signature: %w", err)
	}
	var sig sshsigBlob
	if err := ssh.Unmarshal(raw, &sig); err != nil {
		return nil, nil, fmt.Errorf("SSH signature: %w", err)
	}
	if string(sig.Magic[:]) != sshsigMagic || sig.Version != 1 {
		return nil, nil, errors.New("SSH signature: not version 1 of the SSHSIG format")
	}
	pub, err := ssh.ParsePublicKey(sig.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("SSH signature: public key: %w", err)
	}
	return &sig, pub, nil
}

func sshsigHash(alg string) (hash.Hash, error) {
	switch alg {
	case "sha256":
		return sha256.New(), nil
	case "sha512":
		return sha512.New(), nil
	}
	return nil, fmt.Errorf("SSH signature: unsupported hash %q", alg)
}

// signedData is what the key actually signs: the envelope with the
// message's hash.
func sshsigSignedData(namespace, reserved, hashAlg string, digest []byte) []byte {
	var b bytes.Buffer
	b.WriteString(sshsigMagic)
	for _, s := range [][]byte{[]byte(namespace), []byte(reserved), []byte(hashAlg), digest} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		b.Write(n[:])
		b.Write(s)
	}
	return b.Bytes()
}

// verifySSHSig checks that sig signs message in the git namespace with pub.
func verifySSHSig(sig *sshsigBlob, pub ssh.PublicKey, message []byte) error {
	if sig.Namespace != SSHSigNamespace {
		return fmt.Errorf("SSH signature is for namespace %q, not %q", sig.Namespace, SSHSigNamespace)
	}
	h, err := sshsigHash(sig.HashAlg)
	if err != nil {
		return err
	}
	h.Write(message)
	var s struct {
		Format string
		Blob   []byte
		Rest   []byte `ssh:"rest"`
	}
	if err := ssh.Unmarshal(sig.Signature, &s); err != nil {
		return fmt.Errorf("SSH signature: %w", err)
	}
	data := sshsigSignedData(sig.Namespace, sig.Reserved, sig.HashAlg, h.Sum(nil))
	return pub.Verify(data, &ssh.Signature{Format: s.Format, Blob: s.Blob, Rest: s.Rest})
}

// SignSSH makes an armored SSH signature of message in the git namespace,
// as git commit -S does with gpg.format=ssh.
func SignSSH(signer ssh.Signer, message []byte) ([]byte, error) {
	h := sha512.Sum512(message)
	data := sshsigSignedData(SSHSigNamespace, "", "sha512", h[:])
	s, err := signer.Sign(nil, data)
	if err != nil {
		return nil, fmt.Errorf("ssh sign: %w", err)
	}
	blob := ssh.Marshal(sshsigBlob{
		Magic:     [6]byte([]byte(sshsigMagic)),
		Version:   1,
		PublicKey: signer.PublicKey().Marshal(),
		Namespace: SSHSigNamespace,
		HashAlg:   "sha512",
		Signature: ssh.Marshal(s),
	})
	enc := base64.StdEncoding.EncodeToString(blob)
	var b strings.Builder
	b.WriteString(sshsigArmorHead + "\n")
	for len(enc) > 70 {
		b.WriteString(enc[:70] + "\n")
		enc = enc[70:]
	}
	b.WriteString(enc + "\n" + sshsigArmorTail + "\n")
	return []byte(b.String()), nil
}
