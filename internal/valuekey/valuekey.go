// Package valuekey writes a key of a value as YAML or JSON decode it into
// an any: two values have the same key exactly when they are the same
// value of the same Go types, so a key can stand for its value in a map of
// results computed from it.
package valuekey

import (
	"encoding/binary"
	"math"
	"slices"
)

// Append appends the key of v to b: each value tagged with its type,
// numbers in fixed width, strings, lists and maps with their lengths first
// and a map's keys in order. It reports false, and stops, for a value of a
// type it does not know, or when b grows longer than limit (no limit when
// limit is 0).
func Append(b []byte, v any, limit int) ([]byte, bool) {
	b, ok := appendValue(b, v, limit)
	return b, ok && (limit <= 0 || len(b) <= limit)
}

// appendValue is Append, which stops early once b is over limit.
func appendValue(b []byte, v any, limit int) ([]byte, bool) {
	if limit > 0 && len(b) > limit {
		return b, false
	}
	switch x := v.(type) {
	case nil:
		return append(b, 'n'), true
	case bool:
		if x {
			return append(b, 't'), true
		}
		return append(b, 'f'), true
	case int64:
		return binary.BigEndian.AppendUint64(append(b, 'i'), uint64(x)), true
	case int:
		return binary.BigEndian.AppendUint64(append(b, 'j'), uint64(x)), true
	case uint64:
		return binary.BigEndian.AppendUint64(append(b, 'u'), x), true
	case float64:
		return binary.BigEndian.AppendUint64(append(b, 'd'), math.Float64bits(x)), true
	case string:
		return AppendString(append(b, 's'), x), true
	case []any:
		b = binary.AppendUvarint(append(b, 'l'), uint64(len(x)))
		for _, e := range x {
			var ok bool
			if b, ok = appendValue(b, e, limit); !ok {
				return b, false
			}
		}
		return b, true
	case map[string]any:
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		slices.Sort(names)
		b = binary.AppendUvarint(append(b, 'm'), uint64(len(x)))
		for _, k := range names {
			var ok bool
			if b, ok = appendValue(AppendString(b, k), x[k], limit); !ok {
				return b, false
			}
		}
		return b, true
	}
	return b, false
}

// AppendString appends s with its length first, so that no string passes
// for another and what follows it.
func AppendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}
