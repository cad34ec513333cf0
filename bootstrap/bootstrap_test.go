package bootstrap

import (
	"flag"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// normalize replaces what is random in bootstrap data (keys, certificates,
// the token, hashes) with placeholders, so the rest compares byte for byte.
func normalize(b []byte, trust *pki.Cluster, tok pki.Token) string {
	s := string(b)
	s = regexp.MustCompile(`(?s)-----BEGIN ([A-Z ]+)-----.*?-----END [A-Z ]+-----\n?`).ReplaceAllString(s, "<$1>\n")
	hash, _ := trust.CAHash()
	return strings.NewReplacer(tok.String(), "<token>", hash, "<ca-hash>", trust.CertificateKey, "<certificate-key>").Replace(s)
}

// The three kinds of bootstrap data, as golden files: the first control
// plane's kubeadm init with the CA material, a control-plane join with the
// certificate key, a worker join with neither.
func TestUserDataGolden(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	trust, err := pki.NewCluster("dev-1", now)
	if err != nil {
		t.Fatal(err)
	}
	tok := pki.NewToken("m", pki.DefaultTokenTTL, now)
	net := NetworkOf([]string{"10.244.0.0/16"}, nil, "")
	for _, c := range []struct {
		golden string
		m      wire.Machine
		init   bool
	}{
		{"init.yaml", wire.Machine{Cluster: "dev-1", Name: "dev-1-cp-a1b2c", Role: wire.RoleControlPlane, Version: "v1.31.2"}, true},
		{"join-control-plane.yaml", wire.Machine{Cluster: "dev-1", Name: "dev-1-cp-d3e4f", Role: wire.RoleControlPlane, Version: "v1.31.2"}, false},
		{"join-worker.yaml", wire.Machine{Cluster: "dev-1", Name: "dev-1-md-0-g5h6i", Role: wire.RoleWorker, Deployment: "md-0", Version: "v1.31.2"}, false},
	} {
		ud, err := UserData(Input{Machine: c.m, Init: c.init, Endpoint: DefaultEndpoint("dev-1", "docker"), Network: net, Token: tok, Trust: trust, Now: now.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		got := normalize(ud, trust, tok)
		path := filepath.Join("testdata", c.golden)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(string(want), got); d != "" {
			t.Errorf("%s (-want +got; go test ./bootstrap -update rewrites it):\n%s", c.golden, d)
		}

		// What the machine reads back is what was meant.
		d, err := Parse(ud)
		if err != nil {
			t.Fatalf("%s: %v", c.golden, err)
		}
		hash, _ := trust.CAHash()
		if d.Node != c.m.Name || d.Init != c.init || d.ControlPlane != (c.m.Role == wire.RoleControlPlane) || d.Token != tok.String() || d.Endpoint != "dev-1-control-plane:6443" {
			t.Errorf("%s parsed: %+v", c.golden, d)
		}
		if c.init {
			if d.Cluster != "dev-1" || d.Version != "v1.31.2" || d.Network.PodSubnet != "10.244.0.0/16" || d.Files[PKIDir+"/ca.key"] != trust.CA.Key {
				t.Errorf("init parsed: %+v", d)
			}
		} else {
			if len(d.CACertHashes) != 1 || d.CACertHashes[0] != hash {
				t.Errorf("%s: CA hashes %v, want %s", c.golden, d.CACertHashes, hash)
			}
			if d.Network != (Network{}) {
				// gitfleet plan says a new spec.clusterNetwork reaches no
				// machine but a cluster's first control plane.
				t.Errorf("%s: a joining machine's data carries the cluster's network %+v", c.golden, d.Network)
			}
			if strings.Contains(string(ud), "PRIVATE KEY") {
				t.Errorf("%s: a joining machine's data holds a private key", c.golden)
			}
			if (d.CertificateKey != "") != (c.m.Role == wire.RoleControlPlane) {
				t.Errorf("%s: certificate key %q", c.golden, d.CertificateKey)
			}
		}
	}
}

func TestDefaultEndpoint(t *testing.T) {
	if got := DefaultEndpoint("dev-1", "docker"); got != "dev-1-control-plane:6443" {
		t.Errorf("docker: %s", got)
	}
	// Local ports are drawn below Linux's ports for outgoing connections
	// (32768 and up by default), where a connection of the host could hold
	// the port the control plane must listen on.
	ports := map[string]bool{}
	for range 2000 {
		a := DefaultEndpoint("dev-1", "local")
		host, port, err := net.SplitHostPort(a)
		if n, _ := strconv.Atoi(port); err != nil || host != "127.0.0.1" || n < 20000 || n >= 32768 {
			t.Fatalf("local: %s; want 127.0.0.1 and a port from 20000 to 32767", a)
		}
		ports[a] = true
	}
	if len(ports) < 1000 {
		t.Errorf("local endpoints are not drawn at random: %v", ports)
	}
}

func TestParseRefusesWhatIsNotBootstrapData(t *testing.T) {
	for name, in := range map[string]string{
		"not yaml":      "#cloud-config\n: :\n",
		"no kubeadm":    "#cloud-config\nwrite_files: []\n",
		"other version": "#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm.yaml\n  content: |\n    apiVersion: kubeadm.k8s.io/v1beta3\n    kind: JoinConfiguration\n",
	} {
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
