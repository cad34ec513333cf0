package main

import (
	"bytes"
	"os"
	"testing"
)

func BenchmarkZZPlanWarm(b *testing.B) {
	dir := os.Getenv("PLAN_DIR")
	if dir == "" {
		b.Skip()
	}
	b.Setenv("XDG_CACHE_HOME", "/tmp/xdgwarm")
	for i := 0; ; i++ {
		if i == 1 {
			b.ResetTimer()
		}
		if i > 0 && !b.Loop() {
			break
		}
		var out, errb bytes.Buffer
		if code := run(b.Context(), []string{"plan", "--repo", dir, "--base", "main", "--head", "bump"}, &cmdEnv{stdout: &out, stderr: &errb}); code != 0 && code != 2 {
			b.Fatalf("%d %s", code, errb.String())
		}
	}
}

func BenchmarkZZValidateCold(b *testing.B) {
	dir := os.Getenv("PLAN_DIR")
	if dir == "" {
		b.Skip()
	}
	for b.Loop() {
		b.Setenv("GITFLEET_CACHE", b.TempDir()+"/v")
		var out, errb bytes.Buffer
		if code := run(b.Context(), []string{"validate", dir}, &cmdEnv{stdout: &out, stderr: &errb}); code != 0 {
			b.Fatalf("%d %s", code, errb.String())
		}
	}
}
