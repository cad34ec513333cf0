package wire

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
)

// MarshalJSON returns what encoding/json's Marshal returns for v, byte for
// byte and error for error: a machine spec's JSON goes into its pool's
// template hash, so other bytes would replace every machine. It writes
// itself what decoded YAML and the class's patches hold — maps with string
// keys (sorted, as Marshal sorts them), lists, int64, finite float64, bool,
// nil and plain printable ASCII strings — and hands anything else, value by
// value, to Marshal, whose output for a value is the same alone as inside
// a map or a list. Marshal's reflection and key sorting were half of a
// pool's cost when a plan expands 1,000 clusters.
func MarshalJSON(v any) ([]byte, error) {
	return appendJSON(make([]byte, 0, 256), v)
}

func appendJSON(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case float64:
		if !math.IsInf(x, 0) && !math.IsNaN(x) {
			return AppendFloat(b, x), nil
		}
	case string:
		if plainString(x) {
			return appendPlain(b, x), nil
		}
	case []any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		if x == nil {
			return append(b, "null"...), nil
		}
		var buf [16]string
		b = append(b, '{')
		for i, k := range sortedKeys(buf[:0], x) {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(append(appendString(b, k), ':'), x[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, out...), nil
}

// sortedKeys appends m's keys to keys, sorted as Marshal sorts a map's.
func sortedKeys[V any](keys []string, m map[string]V) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// plainString reports whether s is written as itself between quotes:
// printable ASCII with no quote, backslash or HTML's <, > and &.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// appendPlain writes a plainString.
func appendPlain(b []byte, s string) []byte {
	return append(append(append(b, '"'), s...), '"')
}

// AppendFloat writes a finite f as encoding/json does: plain decimals
// between 1e-6 and 1e21, exponents outside them, a one-digit negative
// exponent without its leading zero.
func AppendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
