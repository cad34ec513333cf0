package deploy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// compose runs docker compose (or docker-compose) on deploy/compose for
// project, with the fleet repository at repo.
func compose(t *testing.T, project, repo string, args ...string) (string, error) {
	t.Helper()
	tool := strings.Fields(os.Getenv("COMPOSE"))
	if len(tool) == 0 {
		if exec.Command("docker", "compose", "version").Run() == nil {
			tool = []string{"docker", "compose"}
		} else {
			tool = []string{"docker-compose"}
		}
	}
	cmd := exec.Command(tool[0], append(append(tool[1:], "-f", "compose/docker-compose.yaml", "-p", project), args...)...)
	// The stack's secrets key lives beside the repository.
	key := filepath.Join(filepath.Dir(repo), "secrets.key")
	if err := pki.NewKeyFile(key); err != nil {
		return "", err
	}
	cmd.Env = append(os.Environ(), "FLEET_REPO="+repo, "SECRETS_KEY="+key)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func haveDocker() (string, bool) {
	if exec.Command("docker", "info").Run() != nil {
		return "no Docker daemon answers", false
	}
	if exec.Command("docker", "compose", "version").Run() != nil && exec.Command("docker-compose", "version").Run() != nil {
		return "neither docker compose nor docker-compose is installed", false
	}
	return "", true
}

// TestCompose runs deploy/compose (make compose-test, COMPOSE_TEST=1: it
// needs the images of make images): a three-server NATS cluster, two
// daemons and three workers bring a fleet of 4 clusters × 3 inmemory
// machines up; a class bump rolls out while one NATS server and the
// leading daemon are killed; the rollout finishes, and no machine is lost
// or duplicated: the status branch and the inmemory provider's cloud hold
// the same 12 machines, each once, at the new version. Without
// COMPOSE_TEST it only checks that compose reads the file.
func TestCompose(t *testing.T) {
	if why, ok := haveDocker(); !ok {
		t.Skipf("skipped: %s (the compose stack needs Docker)", why)
	}
	if os.Getenv("COMPOSE_TEST") == "" {
		if out, err := compose(t, "gitfleet-check", t.TempDir(), "config", "-q"); err != nil {
			t.Fatalf("compose does not read deploy/compose/docker-compose.yaml: %v\n%s", err, out)
		}
		t.Skip("the stack itself runs with make compose-test (COMPOSE_TEST=1)")
	}
	fleet := newFleet(t)
	repo := fleet.Dir
	project := fmt.Sprintf("gitfleet-test-%d", os.Getpid())
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := compose(t, project, repo, "logs", "--no-color", "--tail", "200")
			t.Logf("compose logs:\n%s", out)
		}
		_, _ = compose(t, project, repo, "down", "-v", "-t", "1")
	})
	if out, err := compose(t, project, repo, "up", "-d"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}
	g, err := git.PlainOpen(repo)
	if err != nil {
		t.Fatal(err)
	}
	waitMachines(t, g, "v1.31.2", 4*time.Minute)

	fleet.Commit("small: v1.32.0", map[string]string{"classes/small.yaml": fmt.Sprintf(smallClass, "v1.32.0")})
	waitFor(t, "the rollout to start", 2*time.Minute, func() (bool, string) {
		s, err := status.Read(g, "gitfleet/status")
		if err != nil {
			return false, err.Error()
		}
		for _, m := range s.Observed() {
			if m.Version == "v1.32.0" {
				return true, ""
			}
		}
		return false, "no machine at v1.32.0 yet"
	})
	// Kill a NATS server and the daemon that leads, the hard way.
	leader := "gitfleet-2"
	if code, body := get("http://127.0.0.1:18080/readyz"); code == http.StatusOK && strings.Contains(body, "leader") {
		leader = "gitfleet-1"
	}
	for _, svc := range []string{"nats-2", leader} {
		if out, err := compose(t, project, repo, "kill", "-s", "SIGKILL", svc); err != nil {
			t.Fatalf("kill %s: %v\n%s", svc, err, out)
		}
	}
	want := waitMachines(t, g, "v1.32.0", 6*time.Minute)

	// The provider's cloud holds exactly the machines the status shows.
	nc, err := nats.Connect("nats://127.0.0.1:14222,nats://127.0.0.1:14224", nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	provider, err := inmemory.New(ctx, js, inmemory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := provider.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cloud []string
	for _, in := range list {
		cloud = append(cloud, in.Cluster+"."+in.Name)
	}
	sort.Strings(cloud)
	if strings.Join(cloud, " ") != strings.Join(want, " ") {
		t.Errorf("the inmemory cloud holds %d machines %v; the status %d %v", len(cloud), cloud, len(want), want)
	}
	t.Logf("killed nats-2 and %s during the rollout; %d machines, each once, at v1.32.0, in the status and the cloud", leader, len(want))
}

const smallClass = `apiVersion: gitfleet.io/v1alpha1
kind: ClusterClass
metadata:
  name: small
spec:
  version: %s
  kubernetesVersions: [v1.31.2, v1.32.0]
  controlPlane:
    machineTemplate:
      provider: inmemory
      spec: {provisioningDelay: 200ms}
  workers:
    machineDeployments:
      - class: worker
        template:
          provider: inmemory
          spec: {provisioningDelay: 200ms}
  rollout:
    waves:
      - name: canary
        selector: {matchLabels: {tier: canary}}
      - name: rest
        selector: {}
`

const smallCluster = `apiVersion: gitfleet.io/v1alpha1
kind: Cluster
metadata:
  name: %s
  labels: {tier: %s}
spec:
  topology:
    classRef: {name: small}
    controlPlane: {replicas: 1}
    workers:
      machineDeployments:
        - {class: worker, name: md-0, replicas: 2}
`

// newFleet makes a fleet repository of 4 clusters (one canary) of 3
// inmemory machines each, committed with the git CLI.
func newFleet(t *testing.T) *gittest.Repo {
	r := gittest.NewRepo(t)
	files := map[string]string{"classes/small.yaml": fmt.Sprintf(smallClass, "v1.31.2")}
	for i, tier := range []string{"canary", "prod", "prod", "prod"} {
		name := fmt.Sprintf("c%d", i)
		files["clusters/"+name+".yaml"] = fmt.Sprintf(smallCluster, name, tier)
	}
	r.Commit("four clusters", files)
	return r
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for time.Now().Before(deadline) {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %s", what, within, last)
}

// waitMachines waits until the status branch shows the 12 machines, each
// once, all Running at version, and returns their keys (cluster.name).
func waitMachines(t *testing.T, g *git.Repository, version string, within time.Duration) []string {
	t.Helper()
	var keys []string
	waitFor(t, "12 machines Running at "+version, within, func() (bool, string) {
		s, err := status.Read(g, "gitfleet/status")
		if err != nil {
			return false, err.Error()
		}
		seen := map[string]bool{}
		keys = keys[:0]
		running := 0
		for _, m := range s.Observed() {
			k := wire.RecordKey(m.Cluster, m.Name)
			if seen[k] {
				return false, "machine " + k + " twice"
			}
			seen[k] = true
			keys = append(keys, k)
			if m.Phase == wire.PhaseRunning && m.Version == version {
				running++
			}
		}
		if running != 12 || len(keys) != 12 {
			return false, fmt.Sprintf("%d machines, %d Running at %s", len(keys), running, version)
		}
		return true, ""
	})
	sort.Strings(keys)
	return keys
}
