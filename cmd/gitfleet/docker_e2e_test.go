package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/providers/docker"
)

// TestDockerFleet (make docker-test, DOCKER_TEST=1): the demo fleet with
// the docker provider. Both clusters come up as containers, each on its
// cluster's network, joined to its own control plane, with the
// container's address in status; a worker container removed with
// `docker rm -f` is replaced; containers started by hand with another
// cluster's join data are refused, saying why.
func TestDockerFleet(t *testing.T) {
	if os.Getenv("DOCKER_TEST") == "" {
		t.Skip("runs with make docker-test (DOCKER_TEST=1): it starts a fleet of containers")
	}
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skipf("skipped: no Docker Engine answers (%v)", err)
	}
	e := newE2E(t)
	image := "gitfleet-node:e2e"
	ctxDir := t.TempDir()
	static := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(ctxDir, "gitfleet"), ".")
	static.Env = append(os.Environ(), "CGO_ENABLED=0") // FROM scratch: no C library
	if out, err := static.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	build := exec.Command("docker", "build", "-q", "-t", image, "-f", "../../deploy/images/node.Dockerfile", ctxDir)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	seeds, _ := filepath.Abs(filepath.Join(e.data, "docker"))
	owner := docker.OwnerOf(seeds)
	t.Cleanup(func() {
		e.kill()
		ids, _ := exec.Command("docker", "ps", "-aq", "--filter", "label="+docker.LabelOwner+"="+owner).Output()
		if f := strings.Fields(string(ids)); len(f) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, f...)...).Run()
		}
		nets, _ := exec.Command("docker", "network", "ls", "-q", "--filter", "label="+docker.LabelOwner+"="+owner).Output()
		if f := strings.Fields(string(nets)); len(f) > 0 {
			_ = exec.Command("docker", append([]string{"network", "rm"}, f...)...).Run()
		}
	})
	e.edit("classes/standard.yaml", func(s string) string { return strings.ReplaceAll(s, "provider: local", "provider: docker") })
	e.edit("clusters/prod-1.yaml", func(s string) string { return strings.Replace(s, "value: 4", "value: 1", 1) })
	e.commit("Ada Lovelace", "machines as containers")
	e.upArgs = []string{"--docker", "--docker-image", image}
	e.start()
	e.waitConverged("both clusters as containers", fleetWant{"dev-1": {3, "v1.31.2"}, "prod-1": {6, "v1.31.2"}})

	// Every machine is its container, at the container's address, joined.
	inspect := func(name string) (ip, network, state string) {
		out, err := exec.Command("docker", "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$v.IPAddress}} {{$k}}{{end}} {{.State.Status}}", name).Output()
		if err != nil {
			return "", "", "gone"
		}
		f := strings.Fields(string(out))
		if len(f) != 3 {
			return "", "", strings.TrimSpace(string(out))
		}
		return f[0], f[1], f[2]
	}
	s := e.status()
	for _, cluster := range []string{"dev-1", "prod-1"} {
		for _, m := range s.Cluster(cluster).Machines {
			ip, network, state := inspect(docker.ContainerName(cluster, m.Name))
			if state != "running" || network != docker.NetworkName(cluster) || len(m.Addresses) != 1 || m.Addresses[0] != ip {
				t.Errorf("%s/%s: container %s on %s at %s; status says %v", cluster, m.Name, state, network, ip, m.Addresses)
				continue
			}
			_, body := httpGet("http://" + ip + ":10250/healthz")
			var h struct {
				Joined bool `json:"joined"`
			}
			if json.Unmarshal([]byte(body), &h) != nil || !h.Joined {
				t.Errorf("%s/%s has not joined its cluster: %s", cluster, m.Name, body)
			}
		}
	}

	// A worker container removed behind gitfleet's back is replaced.
	var victim string
	for _, m := range s.Cluster("dev-1").Machines {
		if m.Role == "worker" {
			victim = m.Name
		}
	}
	if out, err := exec.Command("docker", "rm", "-f", docker.ContainerName("dev-1", victim)).CombinedOutput(); err != nil {
		t.Fatalf("docker rm -f: %v\n%s", err, out)
	}
	e.waitFor("the removed container replaced", 2*time.Minute, func() (bool, string) {
		ok, why := e.converged(fleetWant{"dev-1": {3, "v1.31.2"}, "prod-1": {6, "v1.31.2"}})
		if !ok {
			return false, why
		}
		for _, m := range e.status().Cluster("dev-1").Machines {
			if m.Name == victim {
				return false, victim + " is still in status"
			}
		}
		return true, ""
	})

	// Containers started by hand with prod-1's join data on dev-1's
	// network: pinned to prod-1's CA, one refuses dev-1's control plane;
	// pinned to dev-1's CA, the other presents a token dev-1 never issued,
	// and dev-1's control plane refuses it.
	seed := func(cluster string) (string, *bootstrap.Data) {
		for _, m := range e.status().Cluster(cluster).Machines {
			if m.Role != "worker" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(seeds, cluster, m.Name, "user-data"))
			if err != nil {
				t.Fatal(err)
			}
			d, err := bootstrap.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			return string(b), d
		}
		t.Fatalf("no worker in %s", cluster)
		return "", nil
	}
	prodData, prod := seed("prod-1")
	_, dev := seed("dev-1")
	atDev := strings.ReplaceAll(prodData, prod.Endpoint, dev.Endpoint)
	for _, c := range []struct{ name, data, want string }{
		{"pinned-to-prod", atDev, "it is another cluster's"},
		{"prod-token", strings.ReplaceAll(atDev, prod.CACertHashes[0], dev.CACertHashes[0]), "no machine " + prod.Node + " in cluster dev-1"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "user-data"), []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		name := "gitfleet-intruder-" + c.name + "-" + owner
		t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
		run := exec.Command("docker", "run", "--name", name, "--network", docker.NetworkName("dev-1"),
			"-v", dir+":"+docker.SeedMount+":ro", image, "node", "--cluster", "prod-1", "--machine", "intruder",
			"--state-dir", "/tmp", "--seed-dir", docker.SeedMount, "--log-format", "json")
		out, err := run.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: exit %v, want refused: %s\n%s", c.name, err, c.want, out)
		}
	}
}
