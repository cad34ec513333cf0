package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/table.md")

func readBenchmarks(t *testing.T) Benchmarks {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "bench.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := parseBenchmarks(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseBenchmarks(t *testing.T) {
	b := readBenchmarks(t)
	for _, c := range []struct {
		name, unit string
		want       float64
	}{
		{"BenchmarkCommitToFirstTask/clusters=20", "p99-ms", 12.76},
		{"BenchmarkCommitToFirstTask/clusters=10000", "p50-ms", 40.1},
		{"BenchmarkVersionBump1000", "raw-msgs/s", 82993},
		{"BenchmarkVersionBump1000", "allocs/op", 143215442},
		{"BenchmarkDaemonMemory10k", "rss-B/machine", 8107},
		{"BenchmarkLoad/clusters=1000", "objects/s", 6669},
	} {
		if got, ok := b.figure(c.name, c.unit); !ok || got != c.want {
			t.Errorf("%s %s = %v, %v; want %v", c.name, c.unit, got, ok, c.want)
		}
	}
	for _, name := range []string{"BenchmarkRestartFirstPlan10k", "BenchmarkBroken", "BenchmarkCommitToFirstTask/clusters=10000-2"} {
		if _, ok := b[name]; ok {
			t.Errorf("%s parsed from a line that has no figures of it", name)
		}
	}
	if _, ok := b.figure("BenchmarkLoad/clusters=1000", "more"); ok {
		t.Error("figures read past a value that is not a number")
	}
}

// TestTable renders the table of testdata/bench.out and fixed
// whole-process figures (10,000 clusters not run, plan warm failed at
// 1,000) against testdata/table.md; go test -update rewrites it.
func TestTable(t *testing.T) {
	procs := Procs{
		{cmdValidate, 1000, cacheCold}:  {Wall: 310 * time.Millisecond, MaxRSS: 82 << 10},
		{cmdValidate, 1000, cacheWarm}:  {Wall: 120 * time.Millisecond, MaxRSS: 70 << 10},
		{cmdCue, 1000, ""}:              {Wall: 480 * time.Millisecond, MaxRSS: 120 << 10},
		{cmdTofu, 1000, ""}:             {Wall: 16 * time.Second, MaxRSS: 520 << 10, Resources: 8000},
		{cmdPlan, 1000, cacheCold}:      {Wall: 1500 * time.Millisecond, MaxRSS: 101 << 10},
		{cmdPlan, 1000, cacheWarm}:      {Err: "gitfleet: exit status 1: base main does not validate"},
		{cmdValidate, 10000, cacheCold}: {Wall: 2 * time.Second, MaxRSS: 190 << 10},
		{cmdCue, 10000, ""}:             {Wall: 5 * time.Second, MaxRSS: 900 << 10},
	}
	var out bytes.Buffer
	if err := render(&out, rows(readBenchmarks(t), procs)); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "table.md")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("table differs from %s (go test -update rewrites it):\n%s", golden, out.String())
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{thousands(0), "0"},
		{thousands(999), "999"},
		{thousands(1000), "1,000"},
		{thousands(130000), "130,000"},
		{thousands(1234567.4), "1,234,567"},
		{thousands(-1500), "-1,500"},
		{seconds(0.0456), "46 ms"},
		{seconds(26.374), "26.37 s"},
		{seconds(0.99996), "999.9 ms"},
		{seconds(0.9994), "999 ms"},
		{seconds(1), "1.00 s"},
		{ms(12.76), "12.8 ms"},
		{ms(430), "430 ms"},
		{cell("a|b\nc"), `a\|b c`},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestParseSizes(t *testing.T) {
	if s, err := parseSizes("1000, 10000"); err != nil || len(s) != 2 || s[1] != 10000 {
		t.Errorf("parseSizes = %v, %v", s, err)
	}
	if s, err := parseSizes("none"); err != nil || s != nil {
		t.Errorf("parseSizes(none) = %v, %v", s, err)
	}
	if _, err := parseSizes("1k"); err == nil {
		t.Error("parseSizes(1k): no error")
	}
}
