// Package jsonscan reads JSON of a shape known in advance — an object of
// known keys, each at most once, whose values are strings, whole numbers,
// booleans, times, objects of strings and arrays — without reflection.
// It never decides what a text means when it is not sure: anything else
// (an unknown or repeated key, a key in another case, a null, a number
// with a fraction or an exponent, bytes after the value) makes a reader
// return false, and the caller decodes the text with encoding/json, whose
// results and errors are the reference. Each user holds its fast path to
// encoding/json's with a fuzz test.
//
// gitfleet reads this way what it reads by the hundred thousand: machine
// records at a leader's start, workers' inventories, and the inmemory
// provider's cluster values at every create, delete and inventory.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"
	"unique"
)

// Interner gives the values of many texts one copy of what they have
// alike: strings by their text, objects of strings by their encoding.
type Interner struct {
	strs map[string]string
	maps map[string]map[string]string
}

// NewInterner is an empty Interner.
func NewInterner() *Interner {
	return &Interner{strs: map[string]string{}, maps: map[string]map[string]string{}}
}

// Scanner reads one JSON text from its start.
type Scanner struct {
	b  []byte
	i  int
	in *Interner // nil: nothing shared
}

// New is a Scanner of b; with an Interner, Shared and SharedMap share
// what they read with every other Scanner of the same Interner.
func New(b []byte, in *Interner) Scanner { return Scanner{b: b, in: in} }

// Shared is Str for a string many texts have alike (a cluster, a
// version): the Interner's copy.
func (s *Scanner) Shared() (string, bool) {
	if s.in == nil {
		return s.Str()
	}
	tok, plain, ok := s.quoted()
	if !ok || !plain {
		s.i -= len(tok)
		return s.Str()
	}
	body := tok[1 : len(tok)-1]
	if v, ok := s.in.strs[string(body)]; ok {
		return v, true
	}
	v := unique.Make(string(body)).Value()
	s.in.strs[v] = v
	return v, true
}

// SharedMap is StringMap for labels and annotations: one map for every
// value whose encoding is the same bytes (encoding/json writes a map's
// keys sorted). The map is shared: callers never change it in place.
func (s *Scanner) SharedMap(m *map[string]string) bool {
	if s.in == nil {
		return s.StringMap(m)
	}
	start := s.i
	// Not checked as JSON first: the same bytes as a map read before are
	// as valid as they were, and new ones are read in full below.
	raw, ok := s.extent()
	if !ok || raw[0] != '{' {
		return false
	}
	if shared, ok := s.in.maps[string(raw)]; ok {
		*m = shared
		return true
	}
	end := s.i
	s.i = start
	if !s.StringMap(m) || s.i != end {
		return false
	}
	s.in.maps[string(raw)] = *m
	return true
}

// Keys are the JSON names of a struct's fields, each with its own bit
// for "seen" (at most 64).
type Keys map[string]Key

// Key is one of Keys.
type Key struct {
	name string
	bit  uint64
}

func KeyBits(names ...string) Keys {
	m := Keys{}
	for i, k := range names {
		m[k] = Key{k, 1 << i}
	}
	return m
}

// Object reads an object whose keys are among keys, each at most once,
// handing each key's value to field (with the key's own string, so
// reading a key allocates nothing).
func (s *Scanner) Object(keys Keys, field func(key string) bool) bool {
	if !s.consume('{') {
		return false
	}
	if s.consume('}') {
		return true
	}
	var seen uint64
	for {
		raw, ok := s.plainString()
		if !ok || !s.consume(':') {
			return false
		}
		k, ok := keys[string(raw)]
		if !ok || seen&k.bit != 0 {
			return false
		}
		seen |= k.bit
		if !field(k.name) {
			return false
		}
		if !s.consume(',') {
			return s.consume('}')
		}
	}
}

func (s *Scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// consume skips white space and c, if c is next.
func (s *Scanner) consume(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// End: nothing but white space is left.
func (s *Scanner) End() bool {
	s.space()
	return s.i == len(s.b)
}

// quoted returns the next string token with its quotes, and whether its
// body is plain: no escapes, no control characters, valid UTF-8.
func (s *Scanner) quoted() (tok []byte, plain, ok bool) {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	start := s.i
	plain = true
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			tok = s.b[start:s.i]
			return tok, plain && utf8.Valid(tok), true
		case c == '\\':
			plain = false
			j++ // the escaped byte cannot end the string
		case c < 0x20:
			return nil, false, false // invalid JSON: encoding/json says so
		}
	}
	return nil, false, false
}

// plainString is a string without escapes (a key), without its quotes.
func (s *Scanner) plainString() ([]byte, bool) {
	tok, plain, ok := s.quoted()
	if !ok || !plain {
		return nil, false
	}
	return tok[1 : len(tok)-1], true
}

// Str decodes a string; one with escapes or invalid UTF-8 is unquoted by
// encoding/json.
func (s *Scanner) Str() (string, bool) {
	tok, plain, ok := s.quoted()
	if !ok {
		return "", false
	}
	if plain {
		return string(tok[1 : len(tok)-1]), true
	}
	var v string
	if json.Unmarshal(tok, &v) != nil {
		return "", false
	}
	return v, true
}

func (s *Scanner) Time(t *time.Time) bool {
	tok, plain, ok := s.quoted()
	return ok && plain && t.UnmarshalJSON(tok) == nil
}

func (s *Scanner) Bool(b *bool) bool {
	s.space()
	switch {
	case bytes.HasPrefix(s.b[s.i:], []byte("true")):
		*b, s.i = true, s.i+4
	case bytes.HasPrefix(s.b[s.i:], []byte("false")):
		*b, s.i = false, s.i+5
	default:
		return false
	}
	return true
}

// Int reads a whole number of up to 9 digits (an attempt count).
func (s *Scanner) Int(n *int) bool {
	s.space()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	start, v := s.i, 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' && s.i-start < 9 {
		v = v*10 + int(s.b[s.i]-'0')
		s.i++
	}
	digits := s.i - start
	if digits == 0 || (digits > 1 && s.b[start] == '0') {
		return false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return false
		}
	}
	if neg {
		v = -v
	}
	*n = v
	return true
}

// StringMap reads an object of strings into a new map.
func (s *Scanner) StringMap(m *map[string]string) bool {
	if !s.consume('{') {
		return false
	}
	out := map[string]string{}
	if !s.consume('}') {
		for {
			k, ok := s.Str()
			if !ok || !s.consume(':') {
				return false
			}
			v, ok := s.Str()
			if !ok {
				return false
			}
			if _, dup := out[k]; dup {
				return false
			}
			out[k] = v
			if s.consume(',') {
				continue
			}
			if !s.consume('}') {
				return false
			}
			break
		}
	}
	*m = out
	return true
}

// Strings reads an array of strings.
func (s *Scanner) Strings(l *[]string) bool {
	out := []string{}
	if !s.Array(func() bool {
		v, ok := s.Str()
		out = append(out, v)
		return ok
	}) {
		return false
	}
	*l = out
	return true
}

// Array reads an array, handing each element to item.
func (s *Scanner) Array(item func() bool) bool {
	if !s.consume('[') {
		return false
	}
	if s.consume(']') {
		return true
	}
	for {
		if !item() {
			return false
		}
		if !s.consume(',') {
			return s.consume(']')
		}
	}
}

// RawValue returns the next value, an object or array, as it is; the
// caller gets it only when it is valid JSON.
func (s *Scanner) RawValue() ([]byte, bool) {
	raw, ok := s.extent()
	return raw, ok && json.Valid(raw)
}

// extent is RawValue unchecked: the next object or array as far as its
// brackets and strings say, which may not be valid JSON.
func (s *Scanner) extent() ([]byte, bool) {
	s.space()
	if s.i >= len(s.b) || (s.b[s.i] != '{' && s.b[s.i] != '[') {
		return nil, false
	}
	start, depth := s.i, 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			if _, _, ok := s.quoted(); !ok {
				return nil, false
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				s.i++
				return s.b[start:s.i], true
			}
		}
		s.i++
	}
	return nil, false
}
