package schemas

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// TestValueCodecRoundTrips: every fleet document of the fixtures that
// decodes into its Go type reads back from the codec's bytes as the very
// value decoding gave, Source included, as the object cache relies on.
func TestValueCodecRoundTrips(t *testing.T) {
	n := 0
	for _, cd := range precheckCorpus(t) {
		src := v1alpha1.Source{Path: cd.path, Line: 1}
		want, _, derr := decodeTyped(cd.path, &doc{line: 1}, cd.kind, cd.m)
		if derr != nil {
			continue
		}
		b, err := encodeValue(nil, want)
		if err != nil {
			t.Errorf("%s (%s): %v", cd.path, cd.kind, err)
			continue
		}
		got := newKindValue(cd.kind, src)
		if err := decodeValue(got, string(b)); err != nil {
			t.Errorf("%s (%s): %v", cd.path, cd.kind, err)
			continue
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s (%s): read back, the value differs (-decoded +read back):\n%s", cd.path, cd.kind, d)
		}
		n++
	}
	if n < 50 {
		t.Errorf("only %d documents compared", n)
	}
}

// readsOwnJSON sets an unexported field from its JSON: the codec cannot
// see it, so it must refuse the type.
type readsOwnJSON struct{ n int }

func (r *readsOwnJSON) UnmarshalJSON(b []byte) error { r.n = len(b); return nil }

// embedded is promoted into the struct that embeds it by JSON, which fills
// its exported field, but the codec cannot set it.
type embedded struct{ X int }

type codecSample struct {
	B      bool
	I      int
	I8     int8
	U16    uint16
	F32    float32
	F      float64
	S      string
	P      *int
	PP     **string
	NilS   []string
	EmptyS []string
	Arr    [2]int32
	NilM   map[string]int
	EmptyM map[string]int
	Nested map[string][]*codecSample
	Any    any
	Anys   []any
	Dur    v1alpha1.Duration
	IP     *v1alpha1.IntOrPercent
	T      time.Time
	TP     *time.Time
	Skip   string `json:"-"`
	hidden int
}

// TestValueCodecKeepsWhatItIsGiven: nil and empty stay apart, pointers,
// nested and recursive types, extreme numbers and what an `any` holds
// after JSON come back equal; a field JSON skips and an unexported one are
// left as the reader had them.
func TestValueCodecKeepsWhatItIsGiven(t *testing.T) {
	seven := 7
	then, err := time.Parse(time.RFC3339, "2026-12-01T02:00:00+02:00")
	if err != nil {
		t.Fatal(err)
	}
	s := "ü\x00"
	ps := &s
	in := &codecSample{
		B: true, I: math.MinInt64, I8: -128, U16: math.MaxUint16, F32: 1.5, F: -math.MaxFloat64,
		S: "a long string, with \"quotes\" and ☃", P: &seven, PP: &ps,
		EmptyS: []string{}, Arr: [2]int32{-1, math.MaxInt32}, EmptyM: map[string]int{},
		Nested: map[string][]*codecSample{"x": {nil, {I: 1, Any: "inner"}}, "y": nil, "z": {}},
		Any: map[string]any{"a": []any{int64(1), 2.5, nil, true, false, "s", map[string]any{}, []any{}},
			"b": int64(math.MaxInt64)},
		Anys:   []any{nil, map[string]any{"k": []any{map[string]any{"deep": int64(-3)}}}},
		Dur:    v1alpha1.Duration{Duration: 1500 * 1e6},
		IP:     v1alpha1.Percent(25),
		T:      time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		TP:     &then,
		Skip:   "skipped",
		hidden: 3,
	}
	b, err := encodeValue(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	got := &codecSample{Skip: "kept", hidden: 9}
	if err := decodeValue(got, string(b)); err != nil {
		t.Fatal(err)
	}
	want := *in
	want.Skip, want.hidden = "kept", 9
	if !reflect.DeepEqual(&want, got) {
		t.Errorf("read back:\n%#v\nwant:\n%#v", got, &want)
	}
	if got.NilS != nil || got.EmptyS == nil || got.NilM != nil || got.EmptyM == nil || got.Nested["y"] != nil || got.Nested["z"] == nil {
		t.Error("nil and empty were not kept apart")
	}
	if got.Any.(map[string]any)["a"].([]any)[0] != int64(1) {
		t.Error("an integer in an interface did not stay an int64")
	}
}

// TestValueCodecRefuses: what it cannot promise to read back equal is an
// error, so the object cache keeps nothing of that file.
func TestValueCodecRefuses(t *testing.T) {
	for _, v := range []any{
		&struct{ A any }{json.Number("1")},
		&struct{ A any }{int(1)},
		&struct{ A any }{map[string]any(nil)},
		&struct{ A any }{[]string{"x"}},
		&struct{ C chan int }{},
		&struct{ E error }{},
		&struct{ R readsOwnJSON }{},
		&struct{ embedded }{},
		codecSample{},
		(*codecSample)(nil),
	} {
		if b, err := encodeValue(nil, v); !errors.Is(err, errCodec) {
			t.Errorf("%#v: encoded as %q, error %v", v, b, err)
		}
	}
}

// TestValueCodecRefusesDamage: every strict prefix of an encoding fails to
// decode, and no changed byte makes decoding panic.
func TestValueCodecRefusesDamage(t *testing.T) {
	in := &codecSample{S: "text", EmptyS: []string{"a", "b"}, Nested: map[string][]*codecSample{"n": {{I: 300}}},
		Any: map[string]any{"a": []any{2.5, "x", int64(-7)}}}
	b, err := encodeValue(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(b) {
		if err := decodeValue(&codecSample{}, string(b[:n])); err == nil {
			t.Errorf("the first %d of %d bytes decoded", n, len(b))
		}
	}
	if err := decodeValue(&codecSample{}, string(b)+"\x00"); err == nil {
		t.Error("a byte too many decoded")
	}
	for i := range b {
		for _, c := range []byte{0, 1, 0x7f, 0x80, 0xff, b[i] + 1} {
			d := append([]byte(nil), b...)
			d[i] = c
			_ = decodeValue(&codecSample{}, string(d)) // must not panic
		}
	}
}

// FuzzValueCodec: arbitrary bytes decoded as a cluster or a class never
// panic, and whatever does decode encodes and reads back the same.
func FuzzValueCodec(f *testing.F) {
	for _, cd := range precheckCorpus(f) {
		if cd.kind != v1alpha1.KindCluster && cd.kind != v1alpha1.KindClusterClass {
			continue
		}
		v, _, derr := decodeTyped(cd.path, &doc{line: 1}, cd.kind, cd.m)
		if derr != nil {
			continue
		}
		if b, err := encodeValue(nil, v); err == nil {
			f.Add(cd.kind == v1alpha1.KindCluster, b)
		}
	}
	f.Fuzz(func(t *testing.T, cluster bool, data []byte) {
		kind := v1alpha1.KindClusterClass
		if cluster {
			kind = v1alpha1.KindCluster
		}
		v := newKindValue(kind, v1alpha1.Source{})
		if decodeValue(v, string(data)) != nil {
			return
		}
		b, err := encodeValue(nil, v)
		if err != nil {
			t.Fatalf("decoded but does not encode: %v", err)
		}
		again := newKindValue(kind, v1alpha1.Source{})
		if err := decodeValue(again, string(b)); err != nil {
			t.Fatalf("encoded but does not decode: %v", err)
		}
		if d := cmp.Diff(v, again, cmp.Comparer(func(a, b float64) bool {
			return a == b || (math.IsNaN(a) && math.IsNaN(b))
		})); d != "" {
			t.Fatalf("read back differently:\n%s", d)
		}
	})
}
