package schemas

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAppendJSONMatchesEncodingJSON: for values of the shapes docBuilder
// builds — strings JSON must escape, numbers at the edges of encoding/json's
// formats, nesting — appendJSON's text decodes (numbers as json.Number, as
// decodeTyped reads them: the number's text is kept) to what encoding/json's
// does.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	strs := []string{"", "plain", `quote " and \ backslash`, "tab\tnew\nline\rcr", "\x00\x01\x1f\x7f", "<&>", "é ü 日本", "\u2028\u2029", "\ufeff", "null", "1e3"}
	floats := []float64{0, math.Copysign(0, -1), 2, 2.5, -1.25, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 123456789012345678901234.0, math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1, 1.0 / 3}
	ints := []int64{0, -1, 1, math.MaxInt64, math.MinInt64}
	r := rand.New(rand.NewPCG(1, 2))
	var gen func(depth int) any
	gen = func(depth int) any {
		switch k := r.IntN(8); {
		case k == 0:
			return nil
		case k == 1:
			return r.IntN(2) == 0
		case k == 2:
			return ints[r.IntN(len(ints))]
		case k == 3:
			return floats[r.IntN(len(floats))]
		case k == 4 || depth > 3:
			return strs[r.IntN(len(strs))]
		case k == 5 || k == 6:
			m := map[string]any{}
			for range r.IntN(4) {
				m[strs[r.IntN(len(strs))]] = gen(depth + 1)
			}
			return m
		default:
			l := make([]any, r.IntN(4))
			for i := range l {
				l[i] = gen(depth + 1)
			}
			return l
		}
	}
	decode := func(b []byte) any {
		t.Helper()
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return v
	}
	for range 5000 {
		v := map[string]any{"spec": gen(0)}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendJSON(nil, v)
		if !ok {
			t.Fatalf("appendJSON declined %#v", v)
		}
		if d := cmp.Diff(decode(want), decode(got)); d != "" {
			t.Fatalf("%#v: decoded differently (-encoding/json +appendJSON):\n%s", v, d)
		}
	}
	for _, v := range []any{math.NaN(), math.Inf(1), "\xff", map[string]any{"\xfe": 1}, int(1), []string{"x"}} {
		if _, ok := appendJSON(nil, map[string]any{"x": v}); ok {
			t.Errorf("appendJSON wrote %#v; it must leave it to encoding/json", v)
		}
	}
}
