// Package bootstrap writes a machine's bootstrap data the way Cluster
// API's kubeadm bootstrap provider does: cloud-init user-data that writes
// a kubeadm configuration (kubeadm.k8s.io/v1beta4) and runs kubeadm init
// or join, plus NoCloud meta-data. A real provider passes it to a VM as
// is; `gitfleet node` reads it back (Parse) and plays kubeadm's part.
package bootstrap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Defaults of a cluster that does not set spec.clusterNetwork, as
// kubeadm's (the pod subnet as Cluster API's quick start uses).
const (
	DefaultPodSubnet     = "192.168.0.0/16"
	DefaultServiceSubnet = "10.96.0.0/12"
	DefaultDNSDomain     = "cluster.local"
	APIServerPort        = 6443
)

// Paths the user-data writes, as Cluster API's kubeadm bootstrap does.
const (
	ConfigPath   = "/run/kubeadm/kubeadm.yaml"
	PKIDir       = "/etc/kubernetes/pki"
	SentinelPath = "/run/cluster-api/bootstrap-success.complete"
)

// Network is the cluster's network as kubeadm takes it.
type Network struct {
	PodSubnet, ServiceSubnet, DNSDomain string
}

// NetworkOf fills the defaults in: pods and services are comma-separated
// lists of the cluster's blocks (dual stack), as kubeadm takes them.
func NetworkOf(pods, services []string, domain string) Network {
	n := Network{PodSubnet: strings.Join(pods, ","), ServiceSubnet: strings.Join(services, ","), DNSDomain: domain}
	if n.PodSubnet == "" {
		n.PodSubnet = DefaultPodSubnet
	}
	if n.ServiceSubnet == "" {
		n.ServiceSubnet = DefaultServiceSubnet
	}
	if n.DNSDomain == "" {
		n.DNSDomain = DefaultDNSDomain
	}
	return n
}

// Input is what one machine's bootstrap data is made of.
type Input struct {
	Machine wire.Machine // cluster, name, role, version
	// Init: the cluster's first control-plane machine, which runs kubeadm
	// init with the cluster's CA material; every other machine joins.
	Init     bool
	Endpoint string // the control-plane endpoint, host:port
	Network  Network
	Token    pki.Token
	// Trust is the cluster's material: its CA hash and certificate key go
	// to every machine, its keys only to the init machine.
	Trust *pki.Cluster
	Now   time.Time // for the token's remaining TTL
}

// DefaultEndpoint is the control-plane endpoint gitfleet gives a cluster
// whose control plane runs on provider, when it makes the cluster's PKI
// (which keeps it): for docker, a network alias every control-plane
// container of the cluster carries; for local, a port of 127.0.0.1 drawn
// at random from localPorts; otherwise the cluster's name as a host.
func DefaultEndpoint(cluster, provider string) string {
	switch provider {
	case "local":
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(localPorts.first+mrand.IntN(localPorts.last-localPorts.first+1)))
	default:
		return net.JoinHostPort(cluster+"-control-plane", strconv.Itoa(APIServerPort))
	}
}

// localPorts are where a local cluster's endpoint port is drawn: below
// the ports Linux hands out to outgoing connections (32768–60999 by
// default, net.ipv4.ip_local_port_range). A port drawn among those could be
// held by any connection of the host — the workers' own to NATS — and the
// control plane could then never listen on it: its cluster's machines
// would wait for it until their creates failed.
var localPorts = struct{ first, last int }{20000, 32767}

type arg struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value"`
}

type nodeRegistration struct {
	Name             string `yaml:"name"`
	KubeletExtraArgs []arg  `yaml:"kubeletExtraArgs,omitempty"`
}

type bootstrapToken struct {
	Token  string   `yaml:"token"`
	TTL    string   `yaml:"ttl"`
	Usages []string `yaml:"usages"`
	Groups []string `yaml:"groups"`
}

type initConfiguration struct {
	APIVersion       string           `yaml:"apiVersion"`
	Kind             string           `yaml:"kind"`
	BootstrapTokens  []bootstrapToken `yaml:"bootstrapTokens"`
	NodeRegistration nodeRegistration `yaml:"nodeRegistration"`
	CertificateKey   string           `yaml:"certificateKey"`
}

type clusterConfiguration struct {
	APIVersion           string `yaml:"apiVersion"`
	Kind                 string `yaml:"kind"`
	ClusterName          string `yaml:"clusterName"`
	KubernetesVersion    string `yaml:"kubernetesVersion"`
	ControlPlaneEndpoint string `yaml:"controlPlaneEndpoint"`
	Networking           struct {
		PodSubnet     string `yaml:"podSubnet"`
		ServiceSubnet string `yaml:"serviceSubnet"`
		DNSDomain     string `yaml:"dnsDomain"`
	} `yaml:"networking"`
	APIServer struct {
		CertSANs []string `yaml:"certSANs"`
	} `yaml:"apiServer"`
	CertificatesDir     string `yaml:"certificatesDir"`
	EncryptionAlgorithm string `yaml:"encryptionAlgorithm"`
}

type joinConfiguration struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Discovery  struct {
		BootstrapToken struct {
			APIServerEndpoint string   `yaml:"apiServerEndpoint"`
			Token             string   `yaml:"token"`
			CACertHashes      []string `yaml:"caCertHashes"`
		} `yaml:"bootstrapToken"`
	} `yaml:"discovery"`
	NodeRegistration nodeRegistration `yaml:"nodeRegistration"`
	ControlPlane     *struct {
		CertificateKey string `yaml:"certificateKey"`
	} `yaml:"controlPlane,omitempty"`
}

type writeFile struct {
	Path        string `yaml:"path"`
	Owner       string `yaml:"owner"`
	Permissions string `yaml:"permissions"`
	Content     string `yaml:"content"`
}

type cloudConfig struct {
	WriteFiles []writeFile `yaml:"write_files"`
	RunCmd     []string    `yaml:"runcmd"`
}

const kubeadmAPI = "kubeadm.k8s.io/v1beta4"

// nodeArgs are the kubelet's arguments: the machine's gitfleet identity
// as node labels.
func nodeArgs(m wire.Machine) []arg {
	labels := "gitfleet.io/cluster=" + m.Cluster + ",gitfleet.io/machine=" + m.Name
	if m.Deployment != "" {
		labels += ",gitfleet.io/deployment=" + m.Deployment
	}
	return []arg{{Name: "node-labels", Value: labels}}
}

// UserData is the machine's cloud-init user-data.
func UserData(in Input) ([]byte, error) {
	m := in.Machine
	if in.Trust == nil || in.Endpoint == "" || in.Token.ID == "" {
		return nil, errors.New("bootstrap: the cluster's trust material, endpoint and the machine's token are required")
	}
	caHash, err := in.Trust.CAHash()
	if err != nil {
		return nil, err
	}
	var docs [][]byte
	var cmd string
	var files []writeFile
	if in.Init {
		host, _, _ := net.SplitHostPort(in.Endpoint)
		cc := clusterConfiguration{APIVersion: kubeadmAPI, Kind: "ClusterConfiguration", ClusterName: m.Cluster,
			KubernetesVersion: m.Version, ControlPlaneEndpoint: in.Endpoint, CertificatesDir: PKIDir,
			EncryptionAlgorithm: "ECDSA-P256"}
		cc.Networking.PodSubnet, cc.Networking.ServiceSubnet, cc.Networking.DNSDomain = in.Network.PodSubnet, in.Network.ServiceSubnet, in.Network.DNSDomain
		cc.APIServer.CertSANs = []string{host, m.Name, "127.0.0.1", "localhost"}
		ic := initConfiguration{APIVersion: kubeadmAPI, Kind: "InitConfiguration",
			BootstrapTokens: []bootstrapToken{{Token: in.Token.String(), TTL: ttlOf(in.Token, in.Now), Usages: []string{"signing", "authentication"},
				Groups: []string{"system:bootstrappers:kubeadm:default-node-token"}}},
			NodeRegistration: nodeRegistration{Name: m.Name, KubeletExtraArgs: nodeArgs(m)},
			CertificateKey:   in.Trust.CertificateKey}
		for _, d := range []any{ic, cc} {
			b, err := marshal(d)
			if err != nil {
				return nil, err
			}
			docs = append(docs, b)
		}
		t := in.Trust
		for _, f := range []struct{ name, content, mode string }{
			{"ca.crt", t.CA.Cert, "0640"}, {"ca.key", t.CA.Key, "0600"},
			{"front-proxy-ca.crt", t.FrontProxyCA.Cert, "0640"}, {"front-proxy-ca.key", t.FrontProxyCA.Key, "0600"},
			{"etcd/ca.crt", t.EtcdCA.Cert, "0640"}, {"etcd/ca.key", t.EtcdCA.Key, "0600"},
			{"sa.pub", t.ServiceAccount.Cert, "0640"}, {"sa.key", t.ServiceAccount.Key, "0600"},
		} {
			files = append(files, writeFile{Path: PKIDir + "/" + f.name, Owner: "root:root", Permissions: f.mode, Content: f.content})
		}
		cmd = "kubeadm init --config " + ConfigPath + " --upload-certs"
	} else {
		jc := joinConfiguration{APIVersion: kubeadmAPI, Kind: "JoinConfiguration",
			NodeRegistration: nodeRegistration{Name: m.Name, KubeletExtraArgs: nodeArgs(m)}}
		jc.Discovery.BootstrapToken.APIServerEndpoint = in.Endpoint
		jc.Discovery.BootstrapToken.Token = in.Token.String()
		jc.Discovery.BootstrapToken.CACertHashes = []string{caHash}
		if m.Role == wire.RoleControlPlane {
			jc.ControlPlane = &struct {
				CertificateKey string `yaml:"certificateKey"`
			}{in.Trust.CertificateKey}
		}
		b, err := marshal(jc)
		if err != nil {
			return nil, err
		}
		docs = append(docs, b)
		cmd = "kubeadm join --config " + ConfigPath
	}
	files = append(files, writeFile{Path: ConfigPath, Owner: "root:root", Permissions: "0600",
		Content: string(bytes.Join(docs, []byte("---\n")))})
	cfg := cloudConfig{WriteFiles: files, RunCmd: []string{cmd, "mkdir -p /run/cluster-api && echo success > " + SentinelPath}}
	body, err := marshal(cfg)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	// cloud-init tells the format by the first line.
	out.WriteString("#cloud-config\n# gitfleet bootstrap data: machine " + m.Cluster + "/" + m.Name + "\n")
	out.Write(body)
	return out.Bytes(), nil
}

// marshal writes YAML indented by two spaces, as Kubernetes' examples.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// ttlOf is the token's remaining life as kubeadm writes durations.
func ttlOf(t pki.Token, now time.Time) string {
	return max(t.Expires.Sub(now), 0).Truncate(time.Second).String()
}

// MetaData is the NoCloud meta-data of the machine.
func MetaData(m wire.Machine) []byte {
	return fmt.Appendf(nil, "instance-id: %s\nlocal-hostname: %s\n", m.Cluster+"-"+m.Name, m.Name)
}

// Data is what a machine reads back from its user-data.
type Data struct {
	Cluster, Node, Version string
	Init, ControlPlane     bool
	Endpoint               string
	Token                  string
	CACertHashes           []string
	CertificateKey         string
	Network                Network
	// Files are the files the user-data writes (path → content), among
	// them the CA material of an init machine.
	Files map[string]string
}

// Parse reads user-data UserData made.
func Parse(userData []byte) (*Data, error) {
	var cfg cloudConfig
	if err := yaml.Unmarshal(userData, &cfg); err != nil {
		return nil, fmt.Errorf("bootstrap data: %w", err)
	}
	d := &Data{Files: map[string]string{}}
	for _, f := range cfg.WriteFiles {
		d.Files[f.Path] = f.Content
	}
	conf, ok := d.Files[ConfigPath]
	if !ok {
		return nil, fmt.Errorf("bootstrap data: no %s", ConfigPath)
	}
	dec := yaml.NewDecoder(strings.NewReader(conf))
	for {
		var node yaml.Node
		if err := dec.Decode(&node); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("bootstrap data: %s: %w", ConfigPath, err)
		}
		var head struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
		}
		if err := node.Decode(&head); err != nil || head.APIVersion != kubeadmAPI {
			return nil, fmt.Errorf("bootstrap data: %s: want %s documents", ConfigPath, kubeadmAPI)
		}
		switch head.Kind {
		case "InitConfiguration":
			var ic initConfiguration
			if err := node.Decode(&ic); err != nil {
				return nil, err
			}
			d.Init, d.ControlPlane, d.Node, d.CertificateKey = true, true, ic.NodeRegistration.Name, ic.CertificateKey
			if len(ic.BootstrapTokens) > 0 {
				d.Token = ic.BootstrapTokens[0].Token
			}
		case "ClusterConfiguration":
			var cc clusterConfiguration
			if err := node.Decode(&cc); err != nil {
				return nil, err
			}
			d.Cluster, d.Version, d.Endpoint = cc.ClusterName, cc.KubernetesVersion, cc.ControlPlaneEndpoint
			d.Network = Network{cc.Networking.PodSubnet, cc.Networking.ServiceSubnet, cc.Networking.DNSDomain}
		case "JoinConfiguration":
			var jc joinConfiguration
			if err := node.Decode(&jc); err != nil {
				return nil, err
			}
			bt := jc.Discovery.BootstrapToken
			d.Node, d.Endpoint, d.Token, d.CACertHashes = jc.NodeRegistration.Name, bt.APIServerEndpoint, bt.Token, bt.CACertHashes
			if jc.ControlPlane != nil {
				d.ControlPlane, d.CertificateKey = true, jc.ControlPlane.CertificateKey
			}
		default:
			return nil, fmt.Errorf("bootstrap data: %s: unknown kind %q", ConfigPath, head.Kind)
		}
	}
	if d.Node == "" || d.Endpoint == "" || d.Token == "" {
		return nil, fmt.Errorf("bootstrap data: %s has no node name, endpoint or token", ConfigPath)
	}
	return d, nil
}
