package schemas

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// directValues are values the JSON rules treat apart: numbers at and past
// the edges of each Go type, floats that JSON writes as integers, null,
// strings that are not UTF-8, empty collections, dates and durations.
var directValues = []func() any{
	func() any { return nil }, func() any { return 1.0 }, func() any { return 1e21 }, func() any { return -0.0 },
	func() any { return math.NaN() }, func() any { return math.Inf(1) }, func() any { return int64(math.MaxInt64) },
	func() any { return int64(math.MinInt64) }, func() any { return int64(-1) }, func() any { return int64(4294967296) },
	func() any { return 9.5 }, func() any { return 1e-7 }, func() any { return "\xff" }, func() any { return "a\u2028b<&>" },
	func() any { return []any{} }, func() any { return map[string]any{} }, func() any { return []any{nil, 1.0} },
	func() any { return map[string]any{"a": 2.0, "b": []any{int64(3), 2.5, nil}} }, func() any { return "2026-12-01T00:00:00Z" },
	func() any { return "2026-13-01T00:00:00Z" }, func() any { return "30s" }, func() any { return "1h" }, func() any { return "x" },
	func() any { return "25%" }, func() any { return "200%" }, func() any { return int64(25) }, func() any { return true },
	func() any { return map[string]any{"Name": "x"} }, func() any { return map[string]any{"NAME": "x", "name": "y"} },
}

// directMutant changes m in a few places with values of both lists.
func directMutant(r *rand.Rand, m map[string]any, names []string) map[string]any {
	out := deepCopy(m).(map[string]any)
	if r.IntN(2) == 0 {
		out = mutate(r, m, names, 1)
	}
	var maps []map[string]any
	var walk func(x any)
	walk = func(x any) {
		switch v := x.(type) {
		case map[string]any:
			maps = append(maps, v)
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(out)
	for range 1 + r.IntN(3) {
		mm := maps[r.IntN(len(maps))]
		ks := keys(mm)
		if len(ks) == 0 {
			continue
		}
		k := ks[r.IntN(len(ks))]
		switch v := mm[k].(type) {
		case string:
			if r.IntN(2) == 0 { // a value of the same type, mostly
				mm[k] = []string{"", "x", "é", "30s", "25%", "2026-12-01T00:00:00Z", v + "-2"}[r.IntN(7)]
				continue
			}
		case int64:
			if r.IntN(2) == 0 {
				mm[k] = []any{int64(0), int64(1), v + 1, float64(v), int64(-1)}[r.IntN(5)]
				continue
			}
		}
		if r.IntN(5) == 0 {
			k = strings.ToUpper(k) // a key JSON would match case-insensitively
		}
		mm[k] = directValues[r.IntN(len(directValues))]()
	}
	return out
}

// sameDecoding fails t when decodeDirect's answer for m differs from the
// JSON path's: when it decodes, JSON must decode to the same value, deeply
// (nil apart from empty, json.Number apart from int64).
func sameDecoding(t testing.TB, path, kind string, m map[string]any) bool {
	d := &doc{line: 1}
	v, ok := decodeDirect(path, d, kind, deepCopy(m).(map[string]any))
	if !ok {
		return false
	}
	want, _, derr := decodeViaJSON(path, d, kind, deepCopy(m).(map[string]any))
	if derr != nil {
		t.Fatalf("%s (%s): decoded directly, but JSON says %s\n%#v", path, kind, derr.Message, m)
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("%s (%s): decoded directly to\n%#v\nJSON decodes to\n%#v\nfrom %#v", path, kind, v, want, m)
	}
	return true
}

// TestDecodeDirectIsJSON: every valid document of the fixtures, and the rich
// ones, decodes directly, to what its JSON decodes to; so do the mutants
// the direct path takes (changed anywhere, with values and keys the JSON
// rules treat apart), and it gives up on the others, which take the JSON
// path as before.
func TestDecodeDirectIsJSON(t *testing.T) {
	c, err := compileSchema()
	if err != nil {
		t.Fatal(err)
	}
	corpus := precheckCorpus(t)
	for _, d := range corpus {
		if c.precheck(d.kind, d.m) && !sameDecoding(t, d.path, d.kind, d.m) {
			t.Errorf("%s (%s): a valid document is not decoded directly", d.path, d.kind)
		}
	}
	names := append(precheckFieldNames(), "Name", "KIND")
	r := rand.New(rand.NewPCG(16, 2026))
	direct, viaJSON := 0, 0
	for i := range len(corpus) * 80 {
		d := corpus[i%len(corpus)]
		if sameDecoding(t, d.path, d.kind, directMutant(r, d.m, names)) {
			direct++
		} else {
			viaJSON++
		}
	}
	t.Logf("%d mutants decoded directly, %d through JSON", direct, viaJSON)
	if direct < len(corpus)*4 || viaJSON < len(corpus)*4 {
		t.Errorf("the mutants do not exercise both paths: %d direct, %d through JSON", direct, viaJSON)
	}
}

// FuzzDecodeDirect: any YAML document decodeDirect decodes, JSON decodes
// to the same value.
func FuzzDecodeDirect(f *testing.F) {
	addDocumentSeeds(f, "clusters/dev-1.yaml", "clusters/prod-1.yaml", "classes/standard.yaml", "gitfleet.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		eachFuzzedDocument(data, func(_ *compiled, kind string, m map[string]any) {
			sameDecoding(t, "fuzz.yaml", kind, m)
		})
	})
}
