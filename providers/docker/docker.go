// Package docker is the docker provider, like Cluster API's Docker
// provider: each machine is a container of a locally built image
// (gitfleet-node, `gitfleet node` from the static binary) on a network of
// its cluster's, with the CPU and memory its spec asks, labels that name
// its cluster, machine, pool and template, and its bootstrap data mounted
// as a NoCloud seed. What exists is what the Docker Engine lists by label.
package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Name is the provider's name in machine templates.
const Name = "docker"

// DefaultImage is what `make images` builds.
const DefaultImage = "gitfleet-node:dev"

// Labels every container and network of the provider carries.
const (
	LabelProvider = "gitfleet.io/provider" // "docker": the provider's own
	LabelCluster  = "gitfleet.io/cluster"
	LabelMachine  = "gitfleet.io/machine"
	LabelPool     = "gitfleet.io/deployment"
	LabelRole     = "gitfleet.io/role"
	LabelTemplate = "gitfleet.io/template-hash"
	LabelVersion  = "gitfleet.io/kubernetes-version"
	LabelUser     = "gitfleet.io/label." // + the machine's own labels
	// LabelOwner names the provider instance (its seed folder's hash),
	// so two fleets on one Docker Engine never list each other's.
	LabelOwner = "gitfleet.io/owner"
)

// Paths in the container.
const (
	SeedMount  = "/var/lib/cloud/seed/nocloud" // NoCloud's seed folder
	stateMount = "/var/lib/gitfleet"
	healthPort = 10250
)

// Options configure the provider.
type Options struct {
	// Image is the machines' image (default DefaultImage); never pulled.
	Image string
	// SeedDir is where each machine's NoCloud seed is written on this
	// host, mounted read-only into its container.
	SeedDir string
	// NATSURL is the NATS server as the containers reach it (the host is
	// host.docker.internal in them); empty: machines send no heartbeat
	// and their control plane cannot review tokens.
	NATSURL    string
	NATS       natsbus.Options
	NodeSigner *natsbus.NodeSigner
	// Owner tells this provider's containers from another fleet's on the
	// same Engine (default: derived from SeedDir).
	Owner string
	// StartTimeout for a machine's health endpoint (default 60s).
	StartTimeout time.Duration
	Log          zerolog.Logger
}

// Provider makes machines containers.
type Provider struct {
	o        Options
	cli      *client.Client
	http     *http.Client
	mu       sync.Mutex
	locks    map[string]*sync.Mutex
	removing map[string]time.Time // containers (by ID) the provider removes itself: their end is no news
	netsMu   sync.Mutex
	watch    watch
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Watcher  = (*Provider)(nil)
)

// New connects to the Docker Engine the environment names (DOCKER_HOST,
// or the local socket), negotiating its API version.
func New(o Options) (*Provider, error) {
	if o.Image == "" {
		o.Image = DefaultImage
	}
	if o.SeedDir == "" {
		return nil, errors.New("docker: a seed folder is required")
	}
	if err := nodesCanConnect(o); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(o.SeedDir) // a bind mount names an absolute path
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	o.SeedDir = abs
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.Owner == "" {
		o.Owner = ownerOf(o.SeedDir)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	return &Provider{o: o, cli: cli, http: &http.Client{Timeout: 2 * time.Second}, locks: map[string]*sync.Mutex{},
		removing: map[string]time.Time{}, watch: watch{changed: make(chan struct{}, 1)}}, nil
}

// nodesCanConnect refuses options under which the machines' nodes could
// not reach NATS: a container gets the credentials a node signer makes for
// it and no others (never the worker's own). Its nodes would otherwise run
// without heartbeats, and every machine would be judged dead and replaced,
// again and again. (Nor does it get TLS files: docs/providers.md says to
// give --docker-nats-url a listener the containers reach without them; a
// URL cannot tell whether that was done, so that is not checked.)
func nodesCanConnect(o Options) error {
	if o.NATSURL == "" {
		return nil
	}
	n := o.NATS
	if o.NodeSigner == nil && (n.User != "" || n.Password != "" || n.Token != "" || n.NKeySeed != "" || n.CredsFile != "") {
		return errors.New("docker: NATS wants credentials, and the machines' containers get them only from a node signer: " +
			"give --nats-node-signer (the daemon's DATA-DIR/nats-auth/node-signer.nk, docs/operations.md); " +
			"a worker's own credentials are never passed into a container")
	}
	return nil
}

// Ping says whether the Engine answers and has the image.
func (p *Provider) Ping(ctx context.Context) error {
	if _, err := p.cli.Ping(ctx); err != nil {
		return fmt.Errorf("docker: no Docker Engine answers: %w", err)
	}
	if _, err := p.cli.ImageInspect(ctx, p.o.Image); err != nil {
		return fmt.Errorf("docker: image %s: %w (make images builds it)", p.o.Image, err)
	}
	return nil
}

// Close stops watching the Engine's events (Changed) and releases the
// client.
func (p *Provider) Close() error {
	p.stopWatching()
	return p.cli.Close()
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

func (p *Provider) lock(key string) func() {
	p.mu.Lock()
	l := p.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		p.locks[key] = l
	}
	p.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// ContainerName is a machine's container.
func ContainerName(cluster, machine string) string { return "gitfleet-" + cluster + "-" + machine }

// NetworkName is a cluster's network.
func NetworkName(cluster string) string { return "gitfleet-" + cluster }

// ControlPlaneAlias is the name every control-plane container of a
// cluster answers to on its network: the cluster's endpoint host
// (bootstrap.DefaultEndpoint).
func ControlPlaneAlias(cluster string) string { return cluster + "-control-plane" }

// Create implements providers.Provider.
func (p *Provider) Create(ctx context.Context, m wire.Machine) (providers.Instance, error) {
	if !wire.ValidToken(m.Cluster) || !wire.ValidToken(m.Name) {
		return providers.Instance{}, providers.Permanent(fmt.Errorf("docker: %q/%q is not usable as a machine name", m.Cluster, m.Name))
	}
	spec, err := decodeSpec(m)
	if err != nil {
		return providers.Instance{}, err
	}
	defer p.lock(m.Cluster + "/" + m.Name)()
	name := ContainerName(m.Cluster, m.Name)
	if c, err := p.cli.ContainerInspect(ctx, name); err == nil {
		if c.State != nil && c.State.Running {
			return p.waitHealthy(ctx, m, c.ID, spec)
		}
		// Made and stopped (a worker died in between, or the machine
		// died): made again.
		if err := p.remove(ctx, c.ID); err != nil {
			return providers.Instance{}, providers.Transient(fmt.Errorf("docker: remove %s: %w", name, err))
		}
	} else if !errdefs.IsNotFound(err) {
		return providers.Instance{}, providers.Transient(fmt.Errorf("docker: inspect %s: %w", name, err))
	}
	if err := p.ensureNetwork(ctx, m.Cluster); err != nil {
		return providers.Instance{}, err
	}
	seed, err := p.writeSeed(m)
	if err != nil {
		return providers.Instance{}, err
	}
	id, err := p.run(ctx, m, spec, seed)
	if err != nil {
		return providers.Instance{}, err
	}
	return p.waitHealthy(ctx, m, id, spec)
}

// writeSeed writes the machine's NoCloud seed: user-data and meta-data,
// and its NATS credentials, readable by this user only.
func (p *Provider) writeSeed(m wire.Machine) (string, error) {
	dir := filepath.Join(p.o.SeedDir, m.Cluster, m.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("docker: %w", err)
	}
	write := func(name string, data []byte) error {
		return os.WriteFile(filepath.Join(dir, name), data, 0o600)
	}
	if len(m.Bootstrap) > 0 {
		if err := write("user-data", m.Bootstrap); err != nil {
			return "", fmt.Errorf("docker: %w", err)
		}
	}
	if err := write("meta-data", bootstrap.MetaData(m)); err != nil {
		return "", fmt.Errorf("docker: %w", err)
	}
	if p.o.NodeSigner != nil {
		creds, err := p.o.NodeSigner.Creds(m.Cluster, m.Name)
		if err != nil {
			return "", providers.Permanent(fmt.Errorf("docker: %w", err))
		}
		if err := write("nats.creds", creds); err != nil {
			return "", fmt.Errorf("docker: %w", err)
		}
	}
	return dir, nil
}

func (p *Provider) labels(m wire.Machine) map[string]string {
	l := map[string]string{LabelProvider: Name, LabelOwner: p.o.Owner, LabelCluster: m.Cluster, LabelMachine: m.Name,
		LabelRole: string(m.Role), LabelTemplate: m.TemplateHash, LabelVersion: m.Version}
	if m.Deployment != "" {
		l[LabelPool] = m.Deployment
	}
	for k, v := range m.Labels {
		l[LabelUser+k] = v
	}
	return l
}

// run creates and starts the machine's container.
func (p *Provider) run(ctx context.Context, m wire.Machine, spec Spec, seed string) (string, error) {
	cmd := []string{"node", "--cluster", m.Cluster, "--machine", m.Name, "--kubernetes-version", m.Version,
		"--state-dir", stateMount, "--seed-dir", SeedMount, "--listen", "0.0.0.0:" + strconv.Itoa(healthPort),
		"--heartbeat-interval", spec.heartbeat().String(), "--startup-delay", spec.startupDelay().String(), "--log-format", "json"}
	if p.o.NATSURL != "" {
		cmd = append(cmd, "--nats", p.o.NATSURL)
		if p.o.NodeSigner != nil {
			cmd = append(cmd, "--nats-creds", SeedMount+"/nats.creds")
		}
	}
	cfg := &container.Config{Image: p.o.Image, Cmd: cmd, Hostname: m.Name, Labels: p.labels(m)}
	host := &container.HostConfig{
		Binds:      []string{seed + ":" + SeedMount + ":ro"},
		Tmpfs:      map[string]string{stateMount: "rw,size=16m"},
		ExtraHosts: []string{"host.docker.internal:host-gateway"},
		Resources:  container.Resources{NanoCPUs: int64(spec.CPUs * 1e9), Memory: spec.memoryBytes()},
	}
	ep := &network.EndpointSettings{}
	if m.Role == wire.RoleControlPlane {
		ep.Aliases = []string{ControlPlaneAlias(m.Cluster)}
	}
	nets := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{NetworkName(m.Cluster): ep}}
	name := ContainerName(m.Cluster, m.Name)
	created, err := p.cli.ContainerCreate(ctx, cfg, host, nets, nil, name)
	if err != nil {
		switch {
		case errdefs.IsNotFound(err):
			return "", providers.Permanent(fmt.Errorf("docker: image %s is not on this host (make images builds it; nothing is pulled): %w", p.o.Image, err))
		case errdefs.IsInvalidParameter(err):
			// The Engine cannot make this container (more CPUs than the
			// host has): asking again will not help.
			return "", providers.Permanent(fmt.Errorf("docker: create %s: %w", name, err))
		}
		return "", providers.Transient(fmt.Errorf("docker: create %s: %w", name, err))
	}
	if err := p.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return "", providers.Transient(fmt.Errorf("docker: start %s: %w", name, err))
	}
	p.o.Log.Info().Str("cluster", m.Cluster).Str("machine", m.Name).Str("container", created.ID[:12]).Msg("container started")
	return created.ID, nil
}

// waitHealthy waits for the machine's health endpoint on its address; a
// container that exits is refused with the reason its node logged.
func (p *Provider) waitHealthy(ctx context.Context, m wire.Machine, id string, spec Spec) (providers.Instance, error) {
	ctx, cancel := context.WithTimeout(ctx, p.o.StartTimeout+spec.startupDelay())
	defer cancel()
	for {
		c, err := p.cli.ContainerInspect(ctx, id)
		if err != nil {
			return providers.Instance{}, providers.Transient(fmt.Errorf("docker: inspect %s: %w", ContainerName(m.Cluster, m.Name), err))
		}
		if c.State == nil || !c.State.Running {
			if why := p.refusal(ctx, id); why != "" {
				return providers.Instance{}, providers.Permanent(fmt.Errorf("docker: refused by its cluster: %s", why))
			}
			return providers.Instance{}, providers.Transient(fmt.Errorf("docker: container %s exited before it was healthy", ContainerName(m.Cluster, m.Name)))
		}
		ip := addressOf(c.NetworkSettings, m.Cluster)
		if ip != "" && p.healthy(ctx, ip) {
			return instanceOf(c.ID, c.Config.Labels, ip), nil
		}
		select {
		case <-ctx.Done():
			return providers.Instance{}, providers.Transient(fmt.Errorf("docker: machine %s/%s not healthy: %w", m.Cluster, m.Name, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *Provider) healthy(ctx context.Context, ip string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ip+":"+strconv.Itoa(healthPort)+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// refusal is why the container's node was refused, from its log.
func (p *Provider) refusal(ctx context.Context, id string) string {
	rc, err := p.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "50"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	pr, pw := io.Pipe()
	go func() { _, err := stdcopy.StdCopy(pw, pw, rc); pw.CloseWithError(err) }()
	why := ""
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		var line struct {
			Message string `json:"message"`
			Error   string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "refused by the cluster" {
			why = line.Error
		}
	}
	return why
}

func addressOf(ns *container.NetworkSettings, cluster string) string {
	if ns == nil {
		return ""
	}
	if ep := ns.Networks[NetworkName(cluster)]; ep != nil {
		return ep.IPAddress
	}
	return ""
}

func instanceOf(id string, labels map[string]string, ip string) providers.Instance {
	in := providers.Instance{Cluster: labels[LabelCluster], Name: labels[LabelMachine], ProviderID: "docker://" + id,
		Version: labels[LabelVersion], Deployment: labels[LabelPool], Role: wire.Role(labels[LabelRole]),
		TemplateHash: labels[LabelTemplate]}
	if ip != "" {
		in.Addresses = []string{ip}
	}
	for k, v := range labels {
		if name, ok := strings.CutPrefix(k, LabelUser); ok {
			if in.Labels == nil {
				in.Labels = map[string]string{}
			}
			in.Labels[name] = v
		}
	}
	return in
}

// ensureNetwork makes the cluster's network if it has none.
func (p *Provider) ensureNetwork(ctx context.Context, cluster string) error {
	p.netsMu.Lock()
	defer p.netsMu.Unlock()
	name := NetworkName(cluster)
	if _, err := p.cli.NetworkInspect(ctx, name, network.InspectOptions{}); err == nil {
		return nil
	}
	_, err := p.cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge",
		Labels: map[string]string{LabelProvider: Name, LabelOwner: p.o.Owner, LabelCluster: cluster}})
	if err != nil && !errdefs.IsConflict(err) {
		return providers.Transient(fmt.Errorf("docker: network %s: %w", name, err))
	}
	return nil
}

// Delete implements providers.Provider: the container goes, then its
// seed, then the cluster's network once no container is on it.
func (p *Provider) Delete(ctx context.Context, m wire.Machine) error {
	defer p.lock(m.Cluster + "/" + m.Name)()
	name := ContainerName(m.Cluster, m.Name)
	// By ID, which the watch knows the events by (a name is used again by
	// the machine's next container).
	c, err := p.cli.ContainerInspect(ctx, name)
	switch {
	case errdefs.IsNotFound(err):
	case err != nil:
		return providers.Transient(fmt.Errorf("docker: inspect %s: %w", name, err))
	default:
		if err := p.remove(ctx, c.ID); err != nil {
			return providers.Transient(fmt.Errorf("docker: remove %s: %w", name, err))
		}
	}
	if err := os.RemoveAll(filepath.Join(p.o.SeedDir, m.Cluster, m.Name)); err != nil {
		return providers.Transient(fmt.Errorf("docker: %w", err))
	}
	p.netsMu.Lock()
	defer p.netsMu.Unlock()
	left, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelOwner+"="+p.o.Owner), filters.Arg("label", LabelCluster+"="+m.Cluster))})
	if err == nil && len(left) == 0 {
		if err := p.cli.NetworkRemove(ctx, NetworkName(m.Cluster)); err != nil && !errdefs.IsNotFound(err) {
			p.o.Log.Debug().Err(err).Str("network", NetworkName(m.Cluster)).Msg("removing the cluster's network")
		}
	}
	return nil
}

// List implements providers.Provider: this provider's containers, by
// label; a container that is not running is reported with the reason.
func (p *Provider) List(ctx context.Context) ([]providers.Instance, error) {
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelProvider+"="+Name), filters.Arg("label", LabelOwner+"="+p.o.Owner))})
	if err != nil {
		return nil, providers.Transient(fmt.Errorf("docker: list: %w", err))
	}
	out := make([]providers.Instance, 0, len(cs))
	for _, c := range cs {
		ip := ""
		if c.NetworkSettings != nil {
			if ep := c.NetworkSettings.Networks[NetworkName(c.Labels[LabelCluster])]; ep != nil {
				ip = ep.IPAddress
			}
		}
		in := instanceOf(c.ID, c.Labels, ip)
		if c.State != "running" {
			in.Reason, in.Message = "ContainerNotRunning", "container "+strings.TrimPrefix(firstName(c.Names), "/")+" is "+c.State+": "+c.Status
		}
		out = append(out, in)
	}
	return out, nil
}

func firstName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

func networkListOptions(owner string) network.ListOptions {
	return network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelOwner+"="+owner))}
}
