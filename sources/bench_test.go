package sources_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/sources"
)

// BenchmarkCommitToRevision measures how long after a branch moves in a
// local repository its Source delivers the new, validated revision (ref
// update by git update-ref, a process of ~1.5 ms → revision on the
// channel). Goal: p99 ≤ 100 ms.
func BenchmarkCommitToRevision(b *testing.B) {
	const commits = 100
	work := gittest.NewRepo(b)
	work.Commit("fleet", map[string]string{"classes/standard.yaml": classYAML, "clusters/a.yaml": cluster("a"), "clusters/b.yaml": cluster("b")})
	// Prepare the commits on another branch, so only update-ref is timed.
	work.Git("checkout", "-q", "-b", "prep")
	var hashes []string
	for i := range commits * b.N {
		hashes = append(hashes, work.Commit(fmt.Sprintf("scale %d", i), map[string]string{
			"clusters/a.yaml": strings.Replace(cluster("a"), "topology:", fmt.Sprintf("paused: %v\n  topology:", i%2 == 0), 1),
		}))
	}
	r := open(b, work.Dir)
	s, err := sources.Watch(context.Background(), r, sources.WatchOptions{Branch: "main", Interval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	<-s.Revisions()
	lat := make([]time.Duration, 0, len(hashes))
	b.ResetTimer()
	for _, h := range hashes {
		// Commits a person makes are further apart than the debounce
		// window; ref moves inside one are delivered at its end.
		time.Sleep(2 * sources.DefaultDebounce)
		start := time.Now()
		work.Git("update-ref", "refs/heads/main", h)
		for rev := range s.Revisions() {
			if rev.Rejected() {
				b.Fatalf("revision rejected: %v", rev.Err)
			}
			if rev.Commit == h {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// fleet10k writes a repository of one class and 10,000 clusters, committed
// with the git CLI.
func fleet10k(b *testing.B) *gittest.Repo {
	b.Helper()
	work := gittest.NewRepoInMemory(b)
	if err := os.MkdirAll(filepath.Join(work.Dir, "clusters"), 0o755); err != nil {
		b.Fatal(err)
	}
	work.Write(map[string]string{"classes/standard.yaml": classYAML})
	// Folders of 100 clusters, as docs/operations.md advises for large
	// fleets.
	for i := range 10_000 {
		p := filepath.Join(work.Dir, filepath.FromSlash(clusterFile10k(i)))
		if i%100 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(p, []byte(cluster(fmt.Sprintf("c%05d", i))), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	work.Git("add", "-A")
	work.Git("commit", "-q", "-m", "10,000 clusters")
	work.Git("repack", "-adq") // as a clone or a gc leaves it
	return work
}

// clusterFile10k is where fleet10k keeps cluster i.
func clusterFile10k(i int) string { return fmt.Sprintf("clusters/c%03d/c%05d.yaml", i/100, i) }

// BenchmarkFullRead10k reads and validates a 10,000-cluster revision with
// cold caches (a daemon's first read).
func BenchmarkFullRead10k(b *testing.B) {
	work := fleet10k(b)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		r, err := sources.Open(ctx, sources.Options{Location: work.Dir})
		if err != nil {
			b.Fatal(err)
		}
		rev, err := r.Revision(ctx, "main")
		if err != nil || rev.Rejected() || len(rev.Fleet.Clusters) != 10_000 {
			b.Fatalf("revision: %v %v", err, rev.Err)
		}
		r.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/read")
}

// BenchmarkOneFileCommit10k reads and validates the revision after a commit
// that changes one cluster of 10,000, with the caches of the previous one.
// Goal: ≤ 100 ms, the cost of the change and not of the fleet.
func BenchmarkOneFileCommit10k(b *testing.B) {
	work := fleet10k(b)
	ctx := context.Background()
	r := open(b, work.Dir)
	if rev, err := r.Revision(ctx, "main"); err != nil || rev.Rejected() {
		b.Fatalf("first revision: %v %v", err, rev.Err)
	}
	runtime.GC() // the first read's garbage is not the commit's cost
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		work.Commit("pause one", map[string]string{
			clusterFile10k(42): strings.Replace(cluster("c00042"), "topology:", fmt.Sprintf("paused: %v\n  topology:", i%2 == 0), 1),
		})
		b.StartTimer()
		start := time.Now()
		rev, err := r.Revision(ctx, "main")
		total += time.Since(start)
		if err != nil || rev.Rejected() {
			b.Fatalf("revision: %v %v", err, rev.Err)
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/commit")
}
