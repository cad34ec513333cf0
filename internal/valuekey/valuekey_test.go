package valuekey

import (
	"math"
	"reflect"
	"testing"
)

// TestKeyIsTheValue: values of every type YAML and JSON decode, and pairs a
// careless key would confuse (8 and "8", an int and an int64, lists that
// join to the same text, a map's keys against its values, 0 and -0), have
// keys that are equal exactly when the values are deeply equal; a copy has
// its original's key, and a map's order does not matter.
func TestKeyIsTheValue(t *testing.T) {
	values := []any{nil, true, false, "true", "", "8", int64(8), 8, uint64(8), 8.0, 0.0, math.Copysign(0, -1),
		[]any{"as", "c"}, []any{"a", "sc"}, []any{}, []any{nil}, []any{[]any{}},
		map[string]any{"a": "s"}, map[string]any{"as": ""}, map[string]any{"a": map[string]any{}}, map[string]any{},
		map[string]any{"x": int64(1), "y": []any{"z"}}, map[string]any{"y": []any{"z"}, "x": int64(1)}}
	keys := make([]string, len(values))
	for i, v := range values {
		b, ok := Append(nil, v, 0)
		if !ok {
			t.Fatalf("%#v: no key", v)
		}
		keys[i] = string(b)
	}
	for i := range values {
		for j := range i {
			same := reflect.DeepEqual(values[i], values[j]) && math.Signbit(asFloat(values[i])) == math.Signbit(asFloat(values[j]))
			if (keys[i] == keys[j]) != same {
				t.Errorf("%#v and %#v: same key %v, same value %v", values[i], values[j], keys[i] == keys[j], same)
			}
		}
	}
	if _, ok := Append(nil, struct{}{}, 0); ok {
		t.Error("a struct has a key")
	}
	if _, ok := Append(nil, []any{"a long string"}, 4); ok {
		t.Error("a key over its limit was made")
	}
}

func asFloat(v any) float64 {
	f, _ := v.(float64)
	return f
}
