package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The whole `plan` and `validate` commands in the test process, over a
// fleet repository at $GITFLEET_BENCH_FLEET with branches main and bump
// (`go run ./internal/benchtable -workdir DIR` leaves fleet-1000 and
// fleet-10000 there), so that -cpuprofile and -memprofile see them.
// Skipped without it. `make bench-table` times the built binary instead.

func BenchmarkPlanFleetCold(b *testing.B) {
	benchFleetCommand(b, false, "plan", "--repo", "FLEET", "--base", "main", "--head", "bump")
}

func BenchmarkPlanFleetWarm(b *testing.B) {
	benchFleetCommand(b, true, "plan", "--repo", "FLEET", "--base", "main", "--head", "bump")
}

func BenchmarkValidateFleetCold(b *testing.B) {
	benchFleetCommand(b, false, "validate", "FLEET")
}

// benchFleetCommand runs the command, FLEET standing for the fleet's
// folder; each run cold has a new validation cache, warm ones share one
// filled before the timer starts.
func benchFleetCommand(b *testing.B, warm bool, args ...string) {
	dir := os.Getenv("GITFLEET_BENCH_FLEET")
	if dir == "" {
		b.Skip("GITFLEET_BENCH_FLEET names no fleet repository")
	}
	for i, a := range args {
		if a == "FLEET" {
			args[i] = dir
		}
	}
	run1 := func() {
		var out, errb bytes.Buffer
		// 2: plan found changes.
		if code := run(b.Context(), args, &cmdEnv{stdout: &out, stderr: &errb}); code != 0 && code != 2 {
			b.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
	}
	b.Setenv("GITFLEET_CACHE", filepath.Join(b.TempDir(), "validation"))
	if warm {
		run1()
	}
	for b.Loop() {
		if !warm {
			b.Setenv("GITFLEET_CACHE", filepath.Join(b.TempDir(), "validation"))
		}
		run1()
	}
}
