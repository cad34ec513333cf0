package reconciler

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
	"github.com/gitfleet/gitfleet/sources"
)

// benchClass is an inmemory class; clusters have 3 control-plane machines
// and 10 workers.
const benchClass = `apiVersion: gitfleet.io/v1alpha1
kind: ClusterClass
metadata:
  name: bench
spec:
  version: %s
  kubernetesVersions: [v1.30.6, v1.31.2, v1.32.0]
  controlPlane:
    machineTemplate:
      provider: inmemory
  workers:
    machineDeployments:
      - class: worker
        template:
          provider: inmemory
`

const benchCluster = `apiVersion: gitfleet.io/v1alpha1
kind: Cluster
metadata:
  name: %s
spec:
  topology:
    class: bench
    controlPlane:
      replicas: 3
    workers:
      machineDeployments:
        - class: worker
          name: md-0
          replicas: %d
`

// benchRepo is a fleet repository of n clusters, committed with the git CLI.
type benchRepo struct {
	tb  testing.TB
	dir string
}

func newBenchRepo(tb testing.TB, n int) *benchRepo {
	tb.Helper()
	r := &benchRepo{tb: tb, dir: tb.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.write("classes/bench.yaml", fmt.Sprintf(benchClass, "v1.31.2"))
	for i := range n {
		r.write(fmt.Sprintf("clusters/c%05d.yaml", i), fmt.Sprintf(benchCluster, clusterName(i), 10))
	}
	r.commit("fleet of " + fmt.Sprint(n))
	return r
}

func clusterName(i int) string { return fmt.Sprintf("c%05d", i) }

func (r *benchRepo) git(args ...string) {
	r.tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com", "HOME="+r.dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		r.tb.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func (r *benchRepo) write(path, content string) {
	r.tb.Helper()
	p := filepath.Join(r.dir, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.tb.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.tb.Fatal(err)
	}
}

func (r *benchRepo) commit(msg string) {
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
}

// benchDaemon is the daemon's wiring, in process: sources, a real embedded
// NATS, the reconciler, the status writer and, optionally, inmemory workers.
type benchDaemon struct {
	srv    *natstest.Server
	conn   *nats.Conn
	writer *status.Writer
	cancel context.CancelFunc
	done   chan struct{}
}

func startBenchDaemon(tb testing.TB, repoDir string, workers int) *benchDaemon {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &benchDaemon{srv: natstest.Start(tb), cancel: cancel, done: make(chan struct{})}
	conn, js := natstest.Connect(tb, d.srv.ClientURL())
	d.conn = conn
	log := zerolog.Nop()
	repo, err := sources.Open(ctx, sources.Options{Location: repoDir})
	if err != nil {
		tb.Fatal(err)
	}
	src, err := sources.Watch(ctx, repo, sources.WatchOptions{Branch: "main", Interval: time.Hour, Log: &log})
	if err != nil {
		tb.Fatal(err)
	}
	g, err := git.PlainOpen(repoDir)
	if err != nil {
		tb.Fatal(err)
	}
	d.writer, err = status.NewWriter(ctx, status.Options{Repo: g, Interval: 200 * time.Millisecond, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	for range workers {
		p, err := inmemory.New(ctx, js, inmemory.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		w, err := providers.NewWorker(ctx, js, p, providers.WorkerOptions{Concurrency: 64})
		if err != nil {
			tb.Fatal(err)
		}
		go func() { _ = w.Run(ctx) }()
	}
	rec, err := New(Options{Revisions: src.Revisions(), JS: js, Status: d.writer, Log: log})
	if err != nil {
		tb.Fatal(err)
	}
	go func() {
		defer close(d.done)
		_ = rec.Run(ctx)
	}()
	tb.Cleanup(func() {
		cancel()
		<-d.done
		_ = d.writer.Close()
		_ = src.Close()
		_ = repo.Close()
	})
	return d
}

// BenchmarkCommitToFirstTask: a commit to a local repository (git CLI)
// that scales one cluster of a fleet of 20 or 1,000, until the daemon's
// first task for it is on NATS. A revision plans only the clusters it
// changes, so the fleet's size should barely show.
func BenchmarkCommitToFirstTask(b *testing.B) {
	for _, n := range []int{20, 1000} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) { commitToFirstTask(b, n) })
	}
}

func commitToFirstTask(b *testing.B, n int) {
	repo := newBenchRepo(b, n)
	d := startBenchDaemon(b, repo.dir, 1)
	tasks := make(chan *nats.Msg, 1024)
	if _, err := d.conn.ChanSubscribe(wire.SubjectTasks+".>", tasks); err != nil {
		b.Fatal(err)
	}
	drain := func(wait time.Duration) {
		for {
			select {
			case <-tasks:
			case <-time.After(wait):
				return
			}
		}
	}
	drain(3 * time.Second) // the initial fleet's tasks
	const commits = 40
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N * commits {
		repo.write("clusters/c00000.yaml", fmt.Sprintf(benchCluster, clusterName(0), 11+i))
		start := time.Now()
		repo.commit(fmt.Sprintf("scale to %d", 11+i))
		select {
		case <-tasks:
			lat = append(lat, time.Since(start))
		case <-time.After(10 * time.Second):
			b.Fatalf("commit %d: no task within 10s", i)
		}
		drain(20 * time.Millisecond)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkVersionBump1000: 1,000 clusters of 3 + 10 inmemory machines with
// no provisioning delay; the class's version goes up one minor. Wall time
// until every machine runs the new version, and the status commits written.
func BenchmarkVersionBump1000(b *testing.B) {
	benchVersionBump(b, 1000)
}

func benchVersionBump(b *testing.B, n int) {
	for range b.N {
		b.StopTimer()
		repo := newBenchRepo(b, n)
		d := startBenchDaemon(b, repo.dir, 2)
		g, err := git.PlainOpen(repo.dir)
		if err != nil {
			b.Fatal(err)
		}
		waitFleet(b, g, n, "v1.31.2", 5*time.Minute)
		before := d.writer.Stats().Commits
		repo.write("classes/bench.yaml", fmt.Sprintf(benchClass, "v1.32.0"))
		b.StartTimer()
		start := time.Now()
		repo.commit("bench: v1.32.0")
		waitFleet(b, g, n, "v1.32.0", 10*time.Minute)
		wall := time.Since(start)
		b.StopTimer()
		b.ReportMetric(wall.Seconds(), "s-to-converged")
		b.ReportMetric(float64(d.writer.Stats().Commits-before), "status-commits")
		b.ReportMetric(float64(n*13)/wall.Seconds(), "machines/s")
		b.ReportMetric(0, "ns/op")
	}
}

// waitFleet waits until the status branch shows n clusters whose 13
// machines all run version.
func waitFleet(tb testing.TB, g *git.Repository, n int, version string, within time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for time.Now().Before(deadline) {
		s, err := status.Read(g, "gitfleet/status")
		if err == nil {
			if ok, why := fleetAt(s, n, version); ok {
				return
			} else {
				last = why
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	tb.Fatalf("fleet not at %s within %s: %s", version, within, last)
}

func fleetAt(s *status.Snapshot, n int, version string) (bool, string) {
	if len(s.Clusters) != n {
		return false, fmt.Sprintf("%d clusters on the status branch", len(s.Clusters))
	}
	for _, c := range s.Clusters {
		if len(c.Machines) != 13 {
			return false, fmt.Sprintf("%s has %d machines", c.Name, len(c.Machines))
		}
		for _, m := range c.Machines {
			if m.Phase != string(wire.PhaseRunning) || m.Version != version {
				return false, fmt.Sprintf("%s/%s %s %s", c.Name, m.Name, m.Phase, m.Version)
			}
		}
	}
	return true, ""
}

// BenchmarkDaemonMemory10k: the heap of a daemon holding 10,000 clusters of
// 13 machines (desired state, records, summaries), once every machine is
// recorded. The embedded server and two inmemory workers run in the same
// process, as in gitfleet up, so their share is in the figure too. Workers
// are needed: the planner creates workers only once a control plane runs.
func BenchmarkDaemonMemory10k(b *testing.B) {
	for range b.N {
		b.StopTimer()
		repo := newBenchRepo(b, 10000)
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		d := startBenchDaemon(b, repo.dir, 2)
		_, js := natstest.Connect(b, d.srv.ClientURL())
		kv, err := js.KeyValue(context.Background(), wire.BucketMachines)
		if err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Minute)
		for {
			st, err := kv.Status(context.Background())
			if err == nil && st.Values() >= 130000 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("machines not all recorded within 10 minutes")
			}
			time.Sleep(time.Second)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc-min(base.HeapAlloc, ms.HeapAlloc))/(1<<20), "heap-MiB")
		b.ReportMetric(0, "ns/op")
	}
}
