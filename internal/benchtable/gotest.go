package main

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Benchmarks holds the figures of `go test -bench` output: by benchmark
// name (without its -GOMAXPROCS suffix), by unit ("p99-ms", "ns/op").
// A benchmark that ran more than once keeps its last line.
type Benchmarks map[string]map[string]float64

// procsSuffix is the -GOMAXPROCS suffix go test appends to a name.
var procsSuffix = regexp.MustCompile(`-[0-9]+$`)

// parseBenchmarks reads the benchmark lines of go test output: a name
// starting with Benchmark, an iteration count, then value and unit pairs.
// Every other line (package headers, logs, PASS, FAIL) is passed over, and
// a line's pairs end at the first that does not read as one.
func parseBenchmarks(r io.Reader) (Benchmarks, error) {
	out := Benchmarks{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
			continue
		}
		figures := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			figures[f[i+1]] = v
		}
		if len(figures) > 0 {
			out[procsSuffix.ReplaceAllString(f[0], "")] = figures
		}
	}
	return out, sc.Err()
}

// figure returns a benchmark's value in unit, and whether it is there.
func (b Benchmarks) figure(name, unit string) (float64, bool) {
	v, ok := b[name][unit]
	return v, ok
}
