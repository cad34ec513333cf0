package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestSurvivesANATSNode: on three routed nats-servers with every stream and
// bucket at three replicas, the daemon rolls a class change out while the
// server that leads the machines bucket is killed; the rollout finishes
// and no machine is lost or duplicated: the status and the inmemory
// provider's cloud hold the same 12 machines, each once, at the new
// version.
func TestSurvivesANATSNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nats-servers and the daemon's parts")
	}
	srvs, url, js := replicatedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	repo := &benchRepo{tb: t, dir: t.TempDir()}
	repo.git("init", "-q", "-b", "main")
	// One cluster at a time, machines that take 100 ms to start: the
	// rollout lasts long enough for the kill to land in its middle.
	class := strings.Replace(fmt.Sprintf(loopClass, "inmemory"), "  version: v1.31.2\n",
		"  version: %s\n  kubernetesVersions: [v1.31.2, v1.32.0]\n  rollout:\n    waves:\n      - name: all\n        maxConcurrent: 1\n", 1)
	repo.write("classes/small.yaml", fmt.Sprintf(class, "v1.31.2"))
	for i := range 4 {
		repo.write(fmt.Sprintf("clusters/c%d.yaml", i), fmt.Sprintf(loopCluster, fmt.Sprintf("c%d", i), 1, 2))
	}
	repo.commit("four clusters")
	startBenchDaemonOn(t, url, repo.dir, 2, inmemory.Options{ProvisioningDelay: 100 * time.Millisecond, Replicas: 3}, nil)
	g, err := git.PlainOpen(repo.dir)
	if err != nil {
		t.Fatal(err)
	}
	machinesAt(t, g, "v1.31.2", 2*time.Minute)

	repo.write("classes/small.yaml", fmt.Sprintf(class, "v1.32.0"))
	repo.commit("small: v1.32.0")
	// Kill the machines bucket's leader once the rollout has begun.
	deadline := time.Now().Add(time.Minute)
	upgraded := 0
	for upgraded == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the rollout did not start")
		}
		time.Sleep(50 * time.Millisecond)
		if s, err := status.Read(g, "gitfleet/status"); err == nil {
			for _, m := range s.Observed() {
				if m.Version == "v1.32.0" {
					upgraded++
				}
			}
		}
	}
	if upgraded >= 12 {
		t.Fatal("the rollout was over before the kill")
	}
	leader := natstest.StreamLeader(t, js, srvs, "KV_"+wire.BucketMachines)
	if leader == nil {
		t.Fatal("no server leads the machines bucket")
	}
	leader.Shutdown()
	t.Logf("killed %s, leader of the machines bucket, with %d of 12 machines at the new version", leader.Name(), upgraded)
	// A task whose answer the kill lost is published again after
	// DefaultTaskTimeout, by design: the rollout must finish within it and
	// a margin (on a loaded CI machine one was seen to need it).
	killed := time.Now()
	want := machinesAt(t, g, "v1.32.0", DefaultTaskTimeout+time.Minute)
	t.Logf("the rollout finished %s after the kill", time.Since(killed).Round(time.Second))

	cloud, err := inmemory.New(ctx, js, inmemory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Just after the kill the bucket may still be choosing where reads go
	// ("no responders"): the provider says so as transient, and a worker
	// lists again; so does the test, for at most 30 s.
	var list []providers.Instance
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if list, err = cloud.List(ctx); err == nil {
			break
		}
		if !errors.Is(err, providers.ErrTransient) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	var keys []string
	for _, in := range list {
		keys = append(keys, in.Cluster+"."+in.Name)
	}
	sort.Strings(keys)
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("the inmemory cloud holds %v; the status %v", keys, want)
	}
}

// machinesAt waits, at most within, until the status shows 12 machines,
// each once, all Running at version, and returns their keys.
func machinesAt(t *testing.T, g *git.Repository, version string, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	last := "no status"
	for time.Now().Before(deadline) {
		if s, err := status.Read(g, "gitfleet/status"); err == nil {
			seen := map[string]bool{}
			var keys []string
			running, twice := 0, ""
			for _, m := range s.Observed() {
				k := wire.RecordKey(m.Cluster, m.Name)
				if seen[k] {
					twice = k
				}
				seen[k] = true
				keys = append(keys, k)
				if m.Phase == wire.PhaseRunning && m.Version == version {
					running++
				}
			}
			if running == 12 && len(keys) == 12 && twice == "" {
				sort.Strings(keys)
				return keys
			}
			var each []string
			for _, m := range s.Observed() {
				each = append(each, fmt.Sprintf("%s %s %s", m.Name, m.Phase, m.Version))
			}
			last = fmt.Sprintf("%d machines, %d Running at %s, twice: %q: %s", len(keys), running, version, twice, strings.Join(each, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("not 12 machines Running at %s within %s: %s", version, within, last)
	return nil
}

// replicatedCluster starts three routed nats-servers with every stream and
// bucket gitfleet uses at three replicas, and returns them, their URLs and
// a connection's JetStream.
func replicatedCluster(t *testing.T) ([]*server.Server, string, jetstream.JetStream) {
	t.Helper()
	srvs := natstest.StartCluster(t, 3)
	url := natstest.ClusterURLs(srvs)
	_, js := natstest.Connect(t, url)
	// A cluster just formed elects its meta leader first: on a loaded
	// machine the first stream can take longer than the 10 s a start
	// gives it by default.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := natsbus.DefaultLimits().EnsureReplicated(ctx, js, natsbus.Replication{Replicas: 3, Set: true}); err != nil {
		t.Fatal(err)
	}
	return srvs, url, js
}
