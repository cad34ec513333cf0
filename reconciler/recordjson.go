package reconciler

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"
	"unique"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A restarting leader decodes every machine record: 130,000 at 10,000
// clusters, which with encoding/json's reflection was most of a restart's
// CPU. fastDecodeRecord reads the shape Record's own encoding has — one
// object of its known keys, each once, strings, whole numbers, booleans,
// objects of strings, arrays of strings — directly. Anything else (an
// unknown or repeated key, a null, a number with a fraction, a key in
// another case, bytes after the object) makes it give up, and
// decodeRecord falls back to encoding/json, whose result and errors are
// the reference: FuzzDecodeRecord checks that whatever the fast path
// accepts, encoding/json decodes to the same Record.

// fastDecodeRecord decodes data into r; false means "not this shape", not
// an error: r is then to be decoded by encoding/json from scratch. With an
// interner, the strings, labels and spec that the machines of a pool have
// alike are shared as they are read, from their encoded bytes: most
// records then cost no allocation but their own name, task and times.
func fastDecodeRecord(data []byte, r *Record, in *interner) bool {
	s := scanner{b: data, in: in}
	return s.object(recordKeys, func(key string) bool { return s.field(key, r) }) && s.end()
}

// recordKeys are the JSON names of Record's fields, each with a bit for
// "seen".
var recordKeys = keyBits("name", "cluster", "deployment", "role", "provider", "version", "templateHash",
	"labels", "annotations", "spec", "failureDomain", "init", "phase", "reason", "message", "created",
	"running", "joined", "providerID", "addresses", "worker", "taskID", "attempt", "published", "health",
	"sourceCommit", "planID", "cause", "heartbeats")

// field decodes the value of key into r.
func (s *scanner) field(key string, r *Record) bool {
	var str *string
	switch key {
	case "name":
		str = &r.Name
	case "cluster":
		str = &r.Cluster
	case "deployment":
		str = &r.Deployment
	case "role":
		v, ok := s.str()
		r.Role = wire.Role(v)
		return ok
	case "provider":
		str = &r.Provider
	case "version":
		str = &r.Version
	case "templateHash":
		str = &r.TemplateHash
	case "failureDomain":
		str = &r.FailureDomain
	case "phase":
		v, ok := s.str()
		r.Phase = wire.Phase(v)
		return ok
	case "reason":
		str = &r.Reason
	case "message":
		str = &r.Message
	case "providerID":
		str = &r.ProviderID
	case "worker":
		str = &r.Worker
	case "taskID":
		str = &r.TaskID
	case "sourceCommit":
		str = &r.SourceCommit
	case "planID":
		str = &r.PlanID
	case "cause":
		str = &r.Cause
	case "labels":
		return s.sharedMap(&r.Labels)
	case "annotations":
		return s.sharedMap(&r.Annotations)
	case "spec":
		raw, ok := s.rawValue()
		if !ok {
			return false
		}
		if s.in == nil {
			r.Spec = bytes.Clone(raw)
		} else if r.Spec, ok = s.in.specs[string(raw)]; !ok {
			r.Spec = bytes.Clone(raw)
			s.in.specs[string(r.Spec)] = r.Spec
		}
		return true
	case "init":
		return s.boolean(&r.Init)
	case "heartbeats":
		return s.boolean(&r.Heartbeats)
	case "created":
		return s.time(&r.Created)
	case "running":
		return s.time(&r.Running)
	case "joined":
		return s.time(&r.Joined)
	case "published":
		return s.time(&r.Published)
	case "attempt":
		return s.integer(&r.Attempt)
	case "addresses":
		return s.strings(&r.Addresses)
	case "health":
		raw, ok := s.rawValue()
		if !ok || raw[0] != '{' {
			return false // a null is encoding/json's to read
		}
		var h Health
		if json.Unmarshal(raw, &h) != nil {
			return false
		}
		r.Health = &h
		return true
	default:
		return false
	}
	if key == "name" || key == "taskID" || key == "providerID" {
		v, ok := s.str() // the machine's own
		*str = v
		return ok
	}
	v, ok := s.shared()
	*str = v
	return ok
}

type scanner struct {
	b  []byte
	i  int
	in *interner // nil: nothing shared
}

// shared is str for a string machines have alike (cluster, version,
// cause): the interner's copy.
func (s *scanner) shared() (string, bool) {
	if s.in == nil {
		return s.str()
	}
	tok, plain, ok := s.quoted()
	if !ok || !plain {
		s.i -= len(tok)
		return s.str()
	}
	body := tok[1 : len(tok)-1]
	if v, ok := s.in.strs[string(body)]; ok {
		return v, true
	}
	v := unique.Make(string(body)).Value()
	s.in.strs[v] = v
	return v, true
}

// sharedMap is stringMap for labels and annotations: one map for every
// record whose encoding of it is the same bytes (encoding/json writes a
// map's keys sorted). The map is never changed in place (Record.clone).
func (s *scanner) sharedMap(m *map[string]string) bool {
	if s.in == nil {
		return s.stringMap(m)
	}
	start := s.i
	raw, ok := s.rawValue()
	if !ok || raw[0] != '{' {
		return false
	}
	if shared, ok := s.in.maps[string(raw)]; ok {
		*m = shared
		return true
	}
	end := s.i
	s.i = start
	if !s.stringMap(m) || s.i != end {
		return false
	}
	s.in.maps[string(raw)] = *m
	return true
}

// jsonKeys are the JSON names of a struct's fields, each with its own bit
// for "seen" (at most 64).
type jsonKeys map[string]jsonKey

type jsonKey struct {
	name string
	bit  uint64
}

func keyBits(names ...string) jsonKeys {
	m := jsonKeys{}
	for i, k := range names {
		m[k] = jsonKey{k, 1 << i}
	}
	return m
}

// object reads an object whose keys are among keys, each at most once,
// handing each key's value to field (with the key's own string, so
// reading a key allocates nothing).
func (s *scanner) object(keys jsonKeys, field func(key string) bool) bool {
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

func (s *scanner) space() {
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
func (s *scanner) consume(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end: nothing but white space is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

// quoted returns the next string token with its quotes, and whether its
// body is plain: no escapes, no control characters, valid UTF-8.
func (s *scanner) quoted() (tok []byte, plain, ok bool) {
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
func (s *scanner) plainString() ([]byte, bool) {
	tok, plain, ok := s.quoted()
	if !ok || !plain {
		return nil, false
	}
	return tok[1 : len(tok)-1], true
}

// str decodes a string; one with escapes or invalid UTF-8 is unquoted by
// encoding/json.
func (s *scanner) str() (string, bool) {
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

func (s *scanner) time(t *time.Time) bool {
	tok, plain, ok := s.quoted()
	return ok && plain && t.UnmarshalJSON(tok) == nil
}

func (s *scanner) boolean(b *bool) bool {
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

// integer reads a whole number of up to 9 digits (an attempt count).
func (s *scanner) integer(n *int) bool {
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

// stringMap reads an object of strings into a new map.
func (s *scanner) stringMap(m *map[string]string) bool {
	if !s.consume('{') {
		return false
	}
	out := map[string]string{}
	if !s.consume('}') {
		for {
			k, ok := s.str()
			if !ok || !s.consume(':') {
				return false
			}
			v, ok := s.str()
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

// strings reads an array of strings.
func (s *scanner) strings(l *[]string) bool {
	out := []string{}
	if !s.array(func() bool {
		v, ok := s.str()
		out = append(out, v)
		return ok
	}) {
		return false
	}
	*l = out
	return true
}

// array reads an array, handing each element to item.
func (s *scanner) array(item func() bool) bool {
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

// rawValue returns the next value, an object or array, as it is; the
// caller gets it only when it is valid JSON.
func (s *scanner) rawValue() ([]byte, bool) {
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
				raw := s.b[start:s.i]
				return raw, json.Valid(raw)
			}
		}
		s.i++
	}
	return nil, false
}
