package docker

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/providertest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

func TestSpec(t *testing.T) {
	for spec, want := range map[string]int64{`{}`: 0, `{"memory": "512Mi"}`: 512 << 20, `{"memory": "2Gi", "cpus": 1.5}`: 2 << 30} {
		s, err := decodeSpec(wire.Machine{Spec: json.RawMessage(spec)})
		if err != nil || s.memoryBytes() != want {
			t.Errorf("%s: %d bytes, %v; want %d", spec, s.memoryBytes(), err, want)
		}
	}
	for _, bad := range []string{`{"memory": "512MB"}`, `{"cpus": -1}`, `{"disk": "1Gi"}`, `{"heartbeatInterval": "10ms"}`} {
		if _, err := decodeSpec(wire.Machine{Spec: json.RawMessage(bad)}); !providers.IsPermanent(err) {
			t.Errorf("%s: %v; want a permanent error", bad, err)
		}
	}
}

// testImage is the node image the tests build once, from this checkout.
const testImage = "gitfleet-node:test"

var (
	imageOnce sync.Once
	imageErr  string
)

// needDocker skips the test, saying why, where no Docker Engine answers;
// otherwise it builds testImage (FROM scratch, nothing pulled) once.
func needDocker(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts containers")
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = cli.Ping(ctx)
		cancel()
		cli.Close()
	}
	if err != nil {
		t.Skipf("skipped: no Docker Engine answers (%v)", err)
	}
	imageOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gitfleet-node-image")
		if err != nil {
			imageErr = err.Error()
			return
		}
		defer os.RemoveAll(dir)
		build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "gitfleet"), "../../cmd/gitfleet")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			imageErr = "go build: " + err.Error() + "\n" + string(out)
			return
		}
		if out, err := exec.Command("docker", "build", "-q", "-t", testImage, "-f", "../../deploy/images/node.Dockerfile", dir).CombinedOutput(); err != nil {
			imageErr = "docker build: " + err.Error() + "\n" + string(out)
		}
	})
	if imageErr != "" {
		t.Fatal(imageErr)
	}
}

// newTestProvider is a provider of its own owner, whose containers and
// networks go when the test ends.
func newTestProvider(t *testing.T) *Provider {
	t.Helper()
	p, err := New(Options{Image: testImage, SeedDir: t.TempDir(), StartTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanup(p); _ = p.Close() })
	return p
}

func cleanup(p *Provider) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, _ := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelOwner+"="+p.o.Owner))})
	for _, c := range cs {
		_ = p.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
	ns, _ := p.cli.NetworkList(ctx, networkListOptions(p.o.Owner))
	for _, n := range ns {
		_ = p.cli.NetworkRemove(ctx, n.ID)
	}
}

func TestConformance(t *testing.T) {
	needDocker(t)
	providertest.Run(t, func(t *testing.T) providers.Provider { return newTestProvider(t) })
}

// A machine is a container on its cluster's network, with the limits its
// spec asks and labels that name it; its address is the container's; a
// container removed behind the provider's back is no longer listed.
func TestMachineIsAContainer(t *testing.T) {
	needDocker(t)
	p := newTestProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := providertest.Machine(p, "c1", "c1-md-0-abcde")
	m.TemplateHash, m.Spec = "3f2a9c", json.RawMessage(`{"cpus": 1.5, "memory": "256Mi"}`)
	inst, err := p.Create(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.cli.ContainerInspect(ctx, ContainerName("c1", m.Name))
	if err != nil {
		t.Fatal(err)
	}
	if c.HostConfig.NanoCPUs != 1_500_000_000 || c.HostConfig.Memory != 256<<20 {
		t.Errorf("limits: %d nano-CPUs, %d bytes; want 1.5 CPUs and 256Mi", c.HostConfig.NanoCPUs, c.HostConfig.Memory)
	}
	for k, v := range map[string]string{LabelCluster: "c1", LabelMachine: m.Name, LabelPool: "md-0", LabelTemplate: "3f2a9c"} {
		if c.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Config.Labels[k], v)
		}
	}
	ep := c.NetworkSettings.Networks[NetworkName("c1")]
	if ep == nil || len(inst.Addresses) != 1 || inst.Addresses[0] != ep.IPAddress {
		t.Errorf("address %v; want the container's IP on %s", inst.Addresses, NetworkName("c1"))
	}
	var seeded bool
	for _, mnt := range c.Mounts {
		seeded = seeded || (mnt.Destination == SeedMount && !mnt.RW)
	}
	if !seeded {
		t.Errorf("no read-only NoCloud seed at %s: %+v", SeedMount, c.Mounts)
	}
	if err := p.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	list, err := p.List(ctx)
	if err != nil || len(list) != 0 {
		t.Errorf("List after docker rm -f: %+v, %v; want nothing", list, err)
	}
	if !strings.HasPrefix(inst.ProviderID, "docker://") {
		t.Errorf("provider ID %q", inst.ProviderID)
	}
}

// TestNodesMustBeAbleToConnect: a worker whose NATS wants credentials but
// that has no node signer is refused at its start, saying what to give:
// its containers' nodes could not connect, and every machine would be
// replaced for want of heartbeats. Without credentials, or with no NATS
// for the nodes, it starts. No Docker Engine is needed: New does not call
// it.
func TestNodesMustBeAbleToConnect(t *testing.T) {
	seed := t.TempDir()
	for _, tc := range []struct {
		name string
		o    Options
		want string // in the error; "" for none
	}{
		{"no credentials", Options{NATSURL: "nats://host.docker.internal:4222"}, ""},
		{"no NATS for the nodes", Options{NATS: natsbus.Options{CredsFile: "worker.creds"}}, ""},
		{"creds file, no signer", Options{NATSURL: "nats://h:4222", NATS: natsbus.Options{CredsFile: "worker.creds"}}, "--nats-node-signer"},
		{"password, no signer", Options{NATSURL: "nats://h:4222", NATS: natsbus.Options{User: "w", Password: "p"}}, "--nats-node-signer"},
		{"token, no signer", Options{NATSURL: "nats://h:4222", NATS: natsbus.Options{Token: "t"}}, "--nats-node-signer"},
	} {
		tc.o.SeedDir = seed
		_, err := New(tc.o)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want a provider", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}
