// Command benchtable prints the figures of issue 14 as one Markdown table,
// each beside its goal. It reads the Go benchmarks' output (-gotest) for
// the daemon's rows, and measures the whole-process rows itself: on
// generated fleet repositories, gitfleet validate and gitfleet plan of a
// class bump with a cold and a warm validation cache, cue vet of the same
// cluster files and, at 1,000 clusters, OpenTofu's plan of as many
// replacements: wall time and peak RSS. make bench runs it after the
// benchmarks; docs/reconciler.md says how each figure is measured.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run() error {
	gotest := flag.String("gotest", "", "go test -bench output to read the daemon's figures from (none: those rows are \"not run\")")
	gitfleet := flag.String("gitfleet", "bin/gitfleet", "the gitfleet binary")
	build := flag.Bool("build", false, "build -gitfleet from ./cmd/gitfleet first")
	cue := flag.String("cue", "bin/cue", "the cue binary (make bin/cue)")
	tofu := flag.String("tofu", "bin/tofu", "the OpenTofu binary (make bin/tofu), for the plan beside gitfleet plan's at 1,000 clusters")
	schemaDir := flag.String("schemas", "schemas/cue", "the fleet's CUE schema folder, for cue vet")
	sizesFlag := flag.String("sizes", "1000,10000", "fleet sizes (clusters) of the whole-process rows; none: skip them")
	runs := flag.Int("runs", 3, "runs of each whole-process figure (the median wall time and the largest peak RSS are kept)")
	workDir := flag.String("workdir", "", "where to generate the fleets (default: a temporary folder, removed after)")
	flag.Parse()

	var benchmarks Benchmarks
	if *gotest != "" {
		f, err := os.Open(*gotest)
		if err != nil {
			return err
		}
		benchmarks, err = parseBenchmarks(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", *gotest, err)
		}
	}
	sizes, err := parseSizes(*sizesFlag)
	if err != nil {
		return err
	}
	procs := Procs{}
	if len(sizes) > 0 {
		if *runs < 1 {
			return errors.New("-runs must be at least 1")
		}
		if *build {
			progress("building %s", *gitfleet)
			cmd := exec.Command("go", "build", "-o", *gitfleet, "./cmd/gitfleet")
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("go build: %w", err)
			}
		}
		w := &whole{gitfleet: abs(*gitfleet), cue: abs(*cue), tofu: abs(*tofu), schemas: abs(*schemaDir), runs: *runs, procs: procs}
		if *workDir == "" {
			dir, err := os.MkdirTemp("", "benchtable-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			w.dir = dir
		} else {
			w.dir = abs(*workDir)
		}
		for _, n := range sizes {
			if err := w.measure(n); err != nil {
				return err
			}
		}
	}
	fmt.Println()
	return render(os.Stdout, rows(benchmarks, procs))
}

func parseSizes(s string) ([]int, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	var sizes []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-sizes: %q is not a number of clusters", f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

func abs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchtable: "+format+"\n", args...)
}
