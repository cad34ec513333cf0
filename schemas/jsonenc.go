package schemas

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// appendJSON appends v — a document as docBuilder builds it: maps with
// string keys, lists, strings, int64, finite float64, bool and nil — as
// JSON, for decodeTyped. It writes map keys in the map's order, which a
// decoder into a struct does not care about; encoding/json's Marshal sorts
// them, and that was a third of decoding a known-good file. Numbers are
// written as encoding/json writes them, so a json.Number decoded from
// either reads the same. ok is false for anything else (another type, a
// string that is not UTF-8, a NaN or an infinity): the caller uses
// encoding/json then. TestAppendJSONMatchesEncodingJSON holds the two to
// the same decoded value.
func appendJSON(b []byte, v any) (_ []byte, ok bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, x), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case float64:
		return appendFloat(b, x)
	case string:
		return appendString(b, x)
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendJSON(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		b = append(b, '{')
		first := true
		for k, e := range x {
			if !first {
				b = append(b, ',')
			}
			first = false
			if b, ok = appendString(b, k); !ok {
				return b, false
			}
			b = append(b, ':')
			if b, ok = appendJSON(b, e); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

// appendFloat writes f as encoding/json does; ok is false for a NaN or an
// infinity, which it refuses.
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	return wire.AppendFloat(b, f), true
}

// appendString writes s as a JSON string; ok is false when s is not UTF-8
// (encoding/json would change it).
func appendString(b []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return b, false
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}
