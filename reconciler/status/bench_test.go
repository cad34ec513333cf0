package status

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/storage/memory"
)

// benchDir is a temporary folder on /dev/shm when there is one: the
// benchmark writes 10,000 loose objects and the root file system is slow to
// create files after many deletes.
func benchDir(b *testing.B) string {
	b.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "gitfleet-status-bench-")
		if err == nil {
			b.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return b.TempDir()
}

// BenchmarkWriterCommit10kClusters measures one status commit (one cluster
// changed, fleet.yaml recounted) on a branch of 10,000 cluster files, in a
// repository on disk (loose objects, zlib) and in memory (an in-memory
// clone). ms/commit is Flush alone; ms/set is SetCluster (encoding) alone.
// On disk, KiB/commit is what each commit adds to the repository's
// objects (loose, as the writer leaves them until a `git gc`).
func BenchmarkWriterCommit10kClusters(b *testing.B) {
	b.Run("disk", func(b *testing.B) {
		dir := benchDir(b)
		objects := func() int64 { return treeBytes(b, filepath.Join(dir, ".git", "objects")) }
		benchCommits(b, newRepo(b, dir), objects)
	})
	b.Run("memory", func(b *testing.B) {
		r, err := git.Init(memory.NewStorage(), nil)
		if err != nil {
			b.Fatal(err)
		}
		benchCommits(b, r, nil)
	})
}

// treeBytes is the size of the files under dir.
func treeBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		n += info.Size()
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func benchCommits(b *testing.B, repo *git.Repository, objects func() int64) {
	const clusters = 10_000
	w := newWriter(b, Options{Repo: repo, Interval: time.Hour})
	start := time.Now()
	for i := range clusters {
		w.SetCluster(cluster(fmt.Sprintf("c%05d", i), 12, "Running"), origin)
	}
	flush(b, w)
	first := time.Since(start) // reported at the end: ResetTimer drops metrics reported before it
	const perIter = 50
	var set, commit time.Duration
	var before int64
	if objects != nil {
		before = objects()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range perIter {
			n := i*perIter + j
			phase := "Provisioning" // every cluster starts Running: each set is a change
			if (n/clusters)%2 == 1 {
				phase = "Running"
			}
			t0 := time.Now()
			w.SetCluster(cluster(fmt.Sprintf("c%05d", n%clusters), 12, phase), origin)
			t1 := time.Now()
			flush(b, w)
			set += t1.Sub(t0)
			commit += time.Since(t1)
		}
	}
	b.StopTimer()
	ops := float64(b.N * perIter)
	b.ReportMetric(float64(commit.Microseconds())/1000/ops, "ms/commit")
	b.ReportMetric(float64(set.Microseconds())/1000/ops, "ms/set")
	b.ReportMetric(float64(first.Milliseconds()), "ms/first-commit-10k")
	if objects != nil {
		b.ReportMetric(float64(objects()-before)/1024/ops, "KiB/commit")
	}
	if got := w.Stats().Commits; got != 1+b.N*perIter {
		b.Fatalf("%d commits, want %d", got, 1+b.N*perIter)
	}
}
