package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// jsonSamples are values as decoded YAML and patches leave them in a
// machine spec, and some they do not.
func jsonSamples() []any {
	strs := []any{"", "plain", "with space and {{ .template }}", "<b>&amp;</b>", "quote \" and \\", "tab\tnew\nline\r",
		"\b\f\x00\x1f\x7f", "ünïcödé ☃", "\u2028\u2029", "bad \xff utf-8", "'single'"}
	nums := []any{int64(0), int64(-1), int64(math.MaxInt64), int64(math.MinInt64), 0.0, -0.0, 1.5, 1e-6, 9.99e-7,
		1e20, 1e21, 123456789.125, -2.5e-10, math.MaxFloat64, math.SmallestNonzeroFloat64, 3.0}
	others := []any{nil, true, false, 7, int32(-3), uint8(9), float32(0.1), json.Number("12"), time.Duration(5),
		[]string{"x"}, map[string]int{"b": 1, "a": 2}, struct{ A string }{"<"}, []any(nil), map[string]any(nil),
		[]any{}, map[string]any{}}
	var out []any
	out = append(out, strs...)
	out = append(out, nums...)
	out = append(out, others...)
	all := map[string]any{}
	for i, v := range out {
		all[string(rune('a'+i%26))+strs[i%len(strs)].(string)] = v
	}
	return append(out, all, []any{all, out, map[string]any{"nested": map[string]any{"list": out}}})
}

// TestMarshalJSONIsEncodingJSON: the same bytes as encoding/json for every
// sample and for a spec of each, and the same errors.
func TestMarshalJSONIsEncodingJSON(t *testing.T) {
	for _, v := range jsonSamples() {
		for _, x := range []any{v, map[string]any{"spec": v, "cpus": int64(2)}, []any{v, v}} {
			want, werr := json.Marshal(x)
			got, err := MarshalJSON(x)
			if werr != nil || err != nil {
				if werr == nil || err == nil || werr.Error() != err.Error() {
					t.Errorf("%#v: error %v, encoding/json's %v", x, err, werr)
				}
				continue
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%#v:\n got %s\nwant %s", x, got, want)
			}
		}
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), map[string]any{"a": []any{math.Inf(-1)}}, make(chan int)} {
		want, werr := json.Marshal(bad)
		got, err := MarshalJSON(bad)
		if err == nil || werr == nil || err.Error() != werr.Error() {
			t.Errorf("%v: %q, error %v; encoding/json: %q, %v", bad, got, err, want, werr)
		}
	}
}

// FuzzMarshalJSON: any string, float and integer, alone and in a spec,
// come out as encoding/json writes them.
func FuzzMarshalJSON(f *testing.F) {
	f.Add("plain", 1.5, int64(3))
	f.Add("<&>\u2028\xff", 1e21, int64(-1))
	f.Add("", 1e-7, int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, s string, x float64, n int64) {
		v := map[string]any{s: []any{s, x, n, map[string]any{"k": s, s: x}}, "n": n}
		want, werr := json.Marshal(v)
		got, err := MarshalJSON(v)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%#v:\n got %s (%v)\nwant %s (%v)", v, got, err, want, werr)
		}
	})
}

// BenchmarkMarshalJSON writes a machine spec as the example class's
// patches leave it, beside encoding/json's Marshal.
func BenchmarkMarshalJSON(b *testing.B) {
	spec := map[string]any{"cpus": int64(2), "memory": "512Mi", "heartbeatInterval": "2s", "startupDelay": "100ms"}
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := MarshalJSON(spec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(spec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
