package schemas

import (
	"fmt"
	"io/fs"
	"runtime"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/fixtures"
)

// BenchmarkLoad validates a fleet of one class and n generated clusters of
// ~30 lines, each in its own file, with Load (parallel ParseFile + Check +
// the init fleet's policy). It reports objects/s and peak-heap-MiB: the
// largest heap (live and not yet swept objects, runtime/metrics
// /memory/classes/heap/objects:bytes) seen by a sampler every millisecond
// during the run, and sys-MiB: memory obtained from the OS by the end.
// objects/cpu-s divides by the CPU time used instead of the wall time.
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			files := generatedFleet(b, n)
			runtime.GC()
			peak := startPeakSampler()
			b.ResetTimer()
			cpu0 := cpuTime()
			start := time.Now()
			for range b.N {
				if _, errs := Load(files); len(errs) > 0 {
					b.Fatalf("generated fleet has errors:\n%v", errs[:min(len(errs), 5)])
				}
			}
			elapsed := time.Since(start)
			cpu := cpuTime() - cpu0
			b.StopTimer()
			heap := peak()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "objects/s")
			// Load-independent: on a busy shared machine objects/s drops,
			// objects per CPU-second does not.
			b.ReportMetric(float64(n*b.N)/cpu.Seconds(), "objects/cpu-s")
			b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MiB")
		})
	}
}

// cpuTime is the user+system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startPeakSampler samples the heap every millisecond until the returned
// function is called, which returns the largest sample.
func startPeakSampler() func() uint64 {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var peak uint64
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(stop)
		wg.Wait()
		return peak
	}
}

// generatedFleet is the init fleet plus n clusters of the standard class.
func generatedFleet(tb testing.TB, n int) []File {
	var files []File
	err := fs.WalkDir(fixtures.Init(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fixtures.Init(), p)
		files = append(files, File{Path: p, Data: data})
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		files = append(files, File{Path: fmt.Sprintf("clusters/gen/c-%05d.yaml", i), Data: fixtures.GeneratedCluster(i, "v1.31.2")})
	}
	return files
}

// BenchmarkDecodeKnown reads the objects of 1,000 generated cluster files
// back as a warm `gitfleet plan` does, from the object cache's bytes
// (codec), beside decoding the same documents' JSON into the same types
// (json), which the cache kept before the codec.
func BenchmarkDecodeKnown(b *testing.B) {
	files := generatedFleet(b, 1000)
	var docs [][]KnownDoc
	var paths []string
	var jsons [][]byte
	var kinds []string
	for _, f := range files {
		_, d, errs := ParseKnownGoodDocs(f)
		if len(errs) > 0 || d == nil {
			continue
		}
		docs, paths = append(docs, d), append(paths, f.Path)
		split, _ := splitYAML(f.Path, f.Data)
		for _, sd := range split {
			m := sd.value.(map[string]any)
			kind, _ := m["kind"].(string)
			_, js, derr := decodeViaJSON(f.Path, sd, kind, m)
			if derr != nil {
				b.Fatal(derr)
			}
			jsons, kinds = append(jsons, js), append(kinds, kind)
		}
	}
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i, d := range docs {
				if _, ok := DecodeKnown(paths[i], d); !ok {
					b.Fatal("not decoded")
				}
			}
		}
		b.ReportMetric(float64(len(jsons)*b.N)/b.Elapsed().Seconds(), "objects/s")
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i, js := range jsons {
				if _, err := decodeJSON("c.yaml", &doc{line: 1}, kinds[i], js); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(len(jsons)*b.N)/b.Elapsed().Seconds(), "objects/s")
	})
}
