package schemas

import (
	"encoding/binary"
	"fmt"
	"math"
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
		if back, ok := LinesFromEncoding(l.Encoding()); !ok || !back.Equal(l) {
			t.Fatalf("round %d: LinesFromEncoding of its encoding: %v", round, ok)
		}
	}
	if _, ok := (Lines{}).At("spec"); ok {
		t.Error("no lines placed a field")
	}
}

// encodeRaw writes fields as NewLines does, but as given: shared prefix
// lengths and order are the test's to get wrong.
func encodeRaw(fields ...any) string {
	var b []byte
	for i := 0; i < len(fields); i += 4 {
		suffix := fields[i+1].(string)
		b = binary.AppendUvarint(b, uint64(fields[i].(int)))
		b = binary.AppendUvarint(b, uint64(len(suffix)))
		b = append(b, suffix...)
		b = binary.AppendUvarint(b, uint64(fields[i+2].(int)))
		b = binary.AppendUvarint(b, uint64(fields[i+3].(int)))
	}
	return string(b)
}

// TestLinesFromEncodingRefusesWhatNewLinesCannotWrite: a damaged cache
// entry is refused, not read as positions that would place errors on
// the wrong lines.
func TestLinesFromEncodingRefusesWhatNewLinesCannotWrite(t *testing.T) {
	good := encodeRaw(0, "metadata.name", 3, 3, 13, "space", 4, 3)
	if l, ok := LinesFromEncoding(good); !ok || !l.Equal(NewLines([]FieldPos{{"metadata.name", 3, 3}, {"metadata.namespace", 4, 3}})) {
		t.Fatalf("a good encoding refused (%v) or read otherwise", ok)
	}
	for name, enc := range map[string]string{
		"out of order":            encodeRaw(0, "b", 1, 1, 0, "a", 2, 1),
		"a field twice":           encodeRaw(0, "a", 1, 1, 1, "", 2, 1),
		"prefix not the longest":  encodeRaw(0, "ab", 1, 1, 0, "ac", 2, 1),
		"first shares a prefix":   encodeRaw(1, "a", 1, 1),
		"shares more than it has": encodeRaw(0, "a", 1, 1, 5, "b", 2, 1),
		"line beyond int32":       encodeRaw(0, "a", math.MaxInt32+1, 1),
		"column beyond int32":     encodeRaw(0, "a", 1, math.MaxInt32+1),
		"suffix cut short":        good[:3],
		"varint cut short":        "\x80",
		"no column":               good[:len(good)-1],
		"a varint not shortest":   "\x00\x01a\x80\x00\x01",
	} {
		if _, ok := LinesFromEncoding(enc); ok {
			t.Errorf("%s: %q taken", name, enc)
		}
	}
}

// FuzzLinesFromEncoding: whatever LinesFromEncoding takes is what
// NewLines writes for the fields it holds.
func FuzzLinesFromEncoding(f *testing.F) {
	f.Add(encodeRaw(0, "metadata.name", 3, 3, 13, "space", 4, 3))
	f.Add(encodeRaw(0, "", 1, 1, 0, "a", 2, 2))
	f.Add("")
	f.Fuzz(func(t *testing.T, enc string) {
		l, ok := LinesFromEncoding(enc)
		if !ok {
			return
		}
		if again := NewLines(slices.Collect(l.All())); again.Encoding() != enc {
			t.Fatalf("%q taken, but NewLines writes its fields as %q", enc, again.Encoding())
		}
	})
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

// TestLinesOfAMapAreNewLines: a document's positions, kept as a map by the
// parser and encoded without NewLines' copy and stable sort, encode to
// what NewLines makes of the same fields.
func TestLinesOfAMapAreNewLines(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	parts := []string{"spec", "topology", "workers", "machineDeployments[0]", "machineDeployments[1]", "name", "class", "a", "ab", "metadata"}
	for range 500 {
		m := map[string]Pos{}
		for range r.IntN(40) {
			var p []string
			for range 1 + r.IntN(4) {
				p = append(p, parts[r.IntN(len(parts))])
			}
			m[strings.Join(p, ".")] = Pos{Line: r.IntN(100), Col: r.IntN(20)}
		}
		var fields []FieldPos
		for f, p := range m {
			fields = append(fields, FieldPos{f, int32(p.Line), int32(p.Col)})
		}
		if got, want := newLines(m), NewLines(fields); got != want {
			t.Fatalf("positions %v: newLines encodes %q, NewLines %q", m, got.enc, want.enc)
		}
	}
}
