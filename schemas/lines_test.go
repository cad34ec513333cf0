package schemas

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestLinesPlaceEveryField: every field given to NewLines is found at its
// position, fields not given are not found (also between and beyond the
// ones given), and All gives them back sorted.
func TestLinesPlaceEveryField(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	parts := []string{"spec", "topology", "workers", "machineDeployments[0]", "machineDeployments[1]", "metadata",
		"labels", "name", "class", "replicas", "a", "b", "x.y", strings.Repeat("long", 60)}
	for round := range 200 {
		var fields []FieldPos
		seen := map[string]bool{}
		for range rng.IntN(60) {
			var p []string
			for range 1 + rng.IntN(5) {
				p = append(p, parts[rng.IntN(len(parts))])
			}
			f := strings.Join(p, ".")
			if seen[f] {
				continue
			}
			seen[f] = true
			fields = append(fields, FieldPos{Field: f, Line: int32(rng.IntN(1 << 20)), Col: int32(rng.IntN(300))})
		}
		l := NewLines(fields)
		for _, f := range fields {
			if got, ok := l.At(f.Field); !ok || got != (Pos{int(f.Line), int(f.Col)}) {
				t.Fatalf("round %d: %s at %v %v, want %d:%d", round, f.Field, got, ok, f.Line, f.Col)
			}
		}
		probes := []string{"", "0", "spec.", "zzz", "spec.topology.zz", "metadata.labels.a.b.c.d.e", "~"}
		for range 100 {
			var p []string
			for range 1 + rng.IntN(5) {
				p = append(p, parts[rng.IntN(len(parts))])
			}
			probe := strings.Join(p, ".")
			probes = append(probes, probe, probe+"x", probe[:len(probe)-1])
		}
		for _, p := range probes {
			if _, ok := l.At(p); ok != seen[p] {
				t.Fatalf("round %d: %q found %v, given %v", round, p, ok, seen[p])
			}
		}
		want := slices.Clone(fields)
		slices.SortFunc(want, func(a, b FieldPos) int { return strings.Compare(a.Field, b.Field) })
		got := slices.Collect(l.All())
		if !slices.Equal(got, want) || l.Len() != len(want) {
			t.Fatalf("round %d: All gave %v, want %v", round, got, want)
		}
		if !NewLines(got).Equal(l) {
			t.Fatalf("round %d: Lines made from All's fields differ", round)
		}
	}
	if _, ok := (Lines{}).At("spec"); ok {
		t.Error("no lines placed a field")
	}
}

// BenchmarkLinesAt: placing an error's field among a cluster file's
// positions.
func BenchmarkLinesAt(b *testing.B) {
	var fields []FieldPos
	for i := range 40 {
		fields = append(fields, FieldPos{Field: fmt.Sprintf("spec.topology.workers.machineDeployments[%d].replicas", i), Line: int32(i), Col: 9})
	}
	l := NewLines(fields)
	for b.Loop() {
		if _, ok := l.At("spec.topology.workers.machineDeployments[7].replicas"); !ok {
			b.Fatal("not found")
		}
	}
}
