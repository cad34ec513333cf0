package schemas

import (
	"encoding"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"

	"github.com/gitfleet/gitfleet/internal/varint"
)

// The value codec writes an object's decoded Go value as compact bytes
// that read back into an equal value several times faster than its JSON
// decodes: a warm `gitfleet plan` reads every file's objects from the
// object cache, and decoding their JSON was the largest part of its time.
//
// The bytes follow the Go types' layout field by field, with no names or
// types in them: only the build that wrote them can read them, which the
// object cache ensures (it names its build and is empty to any other).
// Exported fields are written in order except those JSON skips (`json:"-"`,
// which decoding sets itself: an object's Source); unexported ones, which
// JSON never fills, stay zero. Refused: an embedded unexported struct
// (JSON fills its exported fields), and a type that decodes its own JSON
// into unexported fields; a type with binary marshalling methods
// (time.Time) is written by them. An `any` holds what decoded JSON holds
// there: nil, bool, string, int64, float64, map[string]any or []any;
// anything else fails the encoding, and the file is then not cached.
// Damaged bytes fail the decoding, never panic: the caller parses the
// file again.

// errCodec is what any encoding or decoding failure wraps.
var errCodec = errors.New("value codec")

// encodeValue appends v's encoding to b.
func encodeValue(b []byte, v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil, fmt.Errorf("%w: %T is not a pointer to a value", errCodec, v)
	}
	c, err := codecOf(rv.Type().Elem())
	if err != nil {
		return nil, err
	}
	return c.enc(b, rv.Elem())
}

// decodeValue reads b, which encodeValue wrote from a value of dst's
// type, into *dst (a pointer to a zero or partly set value). Decoded
// strings are slices of b.
func decodeValue(dst any, b string) error { return decode(dst, b, false) }

// decode is decodeValue; with copied, decoded strings are copies.
func decode(dst any, b string, copied bool) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("%w: %T is not a pointer", errCodec, dst)
	}
	c, err := codecOf(rv.Type().Elem())
	if err != nil {
		return err
	}
	r := &codecReader{s: b, copied: copied}
	c.dec(r, rv.Elem())
	if r.err == nil && r.i != len(r.s) {
		r.fail("%d bytes left over", len(r.s)-r.i)
	}
	return r.err
}

// typeCodec encodes and decodes values of one type.
type typeCodec struct {
	enc func(b []byte, v reflect.Value) ([]byte, error)
	dec func(r *codecReader, v reflect.Value) // v settable
}

var codecs sync.Map // reflect.Type -> *typeCodec

// codecOf returns t's codec, built once. A recursive type refers to its
// own codec while it is being built.
func codecOf(t reflect.Type) (*typeCodec, error) {
	if c, ok := codecs.Load(t); ok {
		return c.(*typeCodec), nil
	}
	building := map[reflect.Type]*typeCodec{}
	c, err := buildCodec(t, building)
	if err != nil {
		return nil, err
	}
	for t, c := range building {
		codecs.LoadOrStore(t, c)
	}
	return c, nil
}

var (
	anyType           = reflect.TypeFor[any]()
	binaryMarshaler   = reflect.TypeFor[encoding.BinaryMarshaler]()
	binaryUnmarshaler = reflect.TypeFor[encoding.BinaryUnmarshaler]()
	jsonUnmarshaler   = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler   = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// readsItself reports whether t decodes its own JSON.
func readsItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler)
}

func buildCodec(t reflect.Type, building map[reflect.Type]*typeCodec) (*typeCodec, error) {
	if c, ok := codecs.Load(t); ok {
		return c.(*typeCodec), nil
	}
	if c, ok := building[t]; ok {
		return c, nil // filled in below, before anything runs it
	}
	c := &typeCodec{}
	building[t] = c
	if t.Implements(binaryMarshaler) && reflect.PointerTo(t).Implements(binaryUnmarshaler) {
		// A type that says how (time.Time, whose fields are unexported).
		c.enc = func(b []byte, v reflect.Value) ([]byte, error) {
			data, err := v.Interface().(encoding.BinaryMarshaler).MarshalBinary()
			if err != nil {
				return nil, fmt.Errorf("%w: %v", errCodec, err)
			}
			return appendCodecString(b, string(data)), nil
		}
		c.dec = func(r *codecReader, v reflect.Value) {
			if err := v.Addr().Interface().(encoding.BinaryUnmarshaler).UnmarshalBinary([]byte(r.string())); err != nil {
				r.fail("%s: %v", t, err)
			}
		}
		return c, nil
	}
	if t.Kind() == reflect.Struct && readsItself(t) {
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				// Its own JSON decoding may set what the codec cannot see.
				return nil, fmt.Errorf("%w: %s decodes its own JSON into unexported fields", errCodec, t)
			}
		}
	}
	var elem *typeCodec // of a pointer, slice, array or map
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		var err error
		if elem, err = buildCodec(t.Elem(), building); err != nil {
			return nil, err
		}
	}
	switch t.Kind() {
	case reflect.Bool:
		c.enc = func(b []byte, v reflect.Value) ([]byte, error) {
			if v.Bool() {
				return append(b, 1), nil
			}
			return append(b, 0), nil
		}
		c.dec = func(r *codecReader, v reflect.Value) { v.SetBool(r.byte() == 1) }
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		c.enc = func(b []byte, v reflect.Value) ([]byte, error) { return binary.AppendVarint(b, v.Int()), nil }
		c.dec = func(r *codecReader, v reflect.Value) {
			if n := r.varint(); !v.OverflowInt(n) {
				v.SetInt(n)
			} else {
				r.fail("%d overflows %s", n, t)
			}
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		c.enc = func(b []byte, v reflect.Value) ([]byte, error) { return binary.AppendUvarint(b, v.Uint()), nil }
		c.dec = func(r *codecReader, v reflect.Value) {
			if n := r.uvarint(); !v.OverflowUint(n) {
				v.SetUint(n)
			} else {
				r.fail("%d overflows %s", n, t)
			}
		}
	case reflect.Float32, reflect.Float64:
		c.enc = func(b []byte, v reflect.Value) ([]byte, error) {
			return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Float())), nil
		}
		c.dec = func(r *codecReader, v reflect.Value) { v.SetFloat(r.float()) }
	case reflect.String:
		c.enc = func(b []byte, v reflect.Value) ([]byte, error) { return appendCodecString(b, v.String()), nil }
		c.dec = func(r *codecReader, v reflect.Value) { v.SetString(r.string()) }
	case reflect.Pointer:
		c.enc = func(b []byte, v reflect.Value) ([]byte, error) {
			if v.IsNil() {
				return append(b, 0), nil
			}
			return elem.enc(append(b, 1), v.Elem())
		}
		c.dec = func(r *codecReader, v reflect.Value) {
			if r.byte() == 0 {
				return
			}
			p := reflect.New(t.Elem())
			elem.dec(r, p.Elem())
			v.Set(p)
		}
	case reflect.Slice:
		c.enc = func(b []byte, v reflect.Value) ([]byte, error) {
			if v.IsNil() {
				return append(b, 0), nil
			}
			return appendElems(binary.AppendUvarint(b, uint64(v.Len())+1), v, elem)
		}
		c.dec = func(r *codecReader, v reflect.Value) {
			if n, ok := r.length(); ok {
				s := reflect.MakeSlice(t, n, n)
				readElems(r, s, elem)
				v.Set(s)
			}
		}
	case reflect.Array:
		c.enc = func(b []byte, v reflect.Value) ([]byte, error) { return appendElems(b, v, elem) }
		c.dec = func(r *codecReader, v reflect.Value) { readElems(r, v, elem) }
	case reflect.Map:
		key, err := buildCodec(t.Key(), building)
		if err != nil {
			return nil, err
		}
		c.enc = func(b []byte, v reflect.Value) ([]byte, error) {
			if v.IsNil() {
				return append(b, 0), nil
			}
			b = binary.AppendUvarint(b, uint64(v.Len())+1)
			for it := v.MapRange(); it.Next(); {
				var err error
				if b, err = key.enc(b, it.Key()); err != nil {
					return nil, err
				}
				if b, err = elem.enc(b, it.Value()); err != nil {
					return nil, err
				}
			}
			return b, nil
		}
		c.dec = func(r *codecReader, v reflect.Value) {
			n, ok := r.length()
			if !ok {
				return
			}
			m := reflect.MakeMapWithSize(t, n)
			k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
			for range n {
				k.SetZero()
				e.SetZero()
				key.dec(r, k)
				elem.dec(r, e)
				if r.err != nil {
					return
				}
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		}
	case reflect.Struct:
		type field struct {
			index int
			codec *typeCodec
		}
		var fields []field
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && !f.IsExported() && f.Tag.Get("json") != "-" {
				// JSON fills an unexported embedded struct's exported
				// fields, which the codec cannot set.
				return nil, fmt.Errorf("%w: %s embeds the unexported %s", errCodec, t, f.Type)
			}
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			fc, err := buildCodec(f.Type, building)
			if err != nil {
				return nil, fmt.Errorf("%w (field %s of %s)", err, f.Name, t)
			}
			fields = append(fields, field{i, fc})
		}
		c.enc = func(b []byte, v reflect.Value) ([]byte, error) {
			for _, f := range fields {
				var err error
				if b, err = f.codec.enc(b, v.Field(f.index)); err != nil {
					return nil, err
				}
			}
			return b, nil
		}
		c.dec = func(r *codecReader, v reflect.Value) {
			for _, f := range fields {
				if r.err != nil {
					return
				}
				f.codec.dec(r, v.Field(f.index))
			}
		}
	case reflect.Interface:
		if t != anyType {
			return nil, fmt.Errorf("%w: cannot encode interface %s", errCodec, t)
		}
		c.enc = func(b []byte, v reflect.Value) ([]byte, error) {
			var x any
			if !v.IsNil() {
				x = v.Elem().Interface()
			}
			return appendAny(b, x, 0)
		}
		c.dec = func(r *codecReader, v reflect.Value) {
			if x := r.any(0); x != nil {
				v.Set(reflect.ValueOf(x))
			}
		}
	default:
		return nil, fmt.Errorf("%w: cannot encode %s", errCodec, t)
	}
	return c, nil
}

// appendElems appends the encoding of each element of slice or array v.
func appendElems(b []byte, v reflect.Value, elem *typeCodec) ([]byte, error) {
	for i := range v.Len() {
		var err error
		if b, err = elem.enc(b, v.Index(i)); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// readElems reads each element of slice or array v.
func readElems(r *codecReader, v reflect.Value, elem *typeCodec) {
	for i := range v.Len() {
		if r.err != nil {
			return
		}
		elem.dec(r, v.Index(i))
	}
}

// The tags of an `any`'s dynamic value.
const (
	anyNil byte = iota
	anyFalse
	anyTrue
	anyString
	anyInt
	anyFloat
	anyMap
	anyList
)

// maxAnyDepth bounds the nesting of `any` values, as the YAML reader
// bounds a document's.
const maxAnyDepth = 10000

func appendAny(b []byte, x any, depth int) ([]byte, error) {
	if depth > maxAnyDepth {
		return nil, fmt.Errorf("%w: values nested deeper than %d", errCodec, maxAnyDepth)
	}
	switch x := x.(type) {
	case nil:
		return append(b, anyNil), nil
	case bool:
		if x {
			return append(b, anyTrue), nil
		}
		return append(b, anyFalse), nil
	case string:
		return appendCodecString(append(b, anyString), x), nil
	case int64:
		return binary.AppendVarint(append(b, anyInt), x), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, anyFloat), math.Float64bits(x)), nil
	case map[string]any:
		if x == nil {
			return nil, fmt.Errorf("%w: a nil map in an interface", errCodec)
		}
		b = binary.AppendUvarint(append(b, anyMap), uint64(len(x)))
		for k, e := range x {
			b = appendCodecString(b, k)
			var err error
			if b, err = appendAny(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case []any:
		if x == nil {
			return nil, fmt.Errorf("%w: a nil list in an interface", errCodec)
		}
		b = binary.AppendUvarint(append(b, anyList), uint64(len(x)))
		for _, e := range x {
			var err error
			if b, err = appendAny(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("%w: cannot encode a %T in an interface", errCodec, x)
}

func appendCodecString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// codecReader reads an encoding; the first failure sticks, and every read
// after it returns a zero value.
type codecReader struct {
	s      string
	i      int
	err    error
	copied bool // strings are copied out of s, not sliced
}

func (r *codecReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: at byte %d: %s", errCodec, r.i, fmt.Sprintf(format, args...))
	}
	r.i = len(r.s)
}

func (r *codecReader) byte() byte {
	if r.i >= len(r.s) {
		r.fail("unexpected end")
		return 0
	}
	c := r.s[r.i]
	r.i++
	return c
}

func (r *codecReader) uvarint() uint64 {
	v, n := varint.Uvarint(r.s[r.i:])
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.i += n
	return v
}

func (r *codecReader) varint() int64 {
	u := r.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (r *codecReader) float() float64 {
	if len(r.s)-r.i < 8 {
		r.fail("unexpected end")
		return 0
	}
	var b [8]byte
	copy(b[:], r.s[r.i:r.i+8])
	r.i += 8
	return math.Float64frombits(binary.LittleEndian.Uint64(b[:]))
}

// count reads a number of elements, each at least a byte long: more than
// the bytes left is damage, not a reason to allocate.
func (r *codecReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.s)-r.i) {
		r.fail("%d elements in %d bytes", n, len(r.s)-r.i)
		return 0
	}
	return int(n)
}

// length reads a slice's or map's length; ok is false for nil.
func (r *codecReader) length() (n int, ok bool) {
	n = r.count()
	if n == 0 || r.err != nil {
		return 0, false
	}
	return n - 1, true
}

func (r *codecReader) string() string {
	n := r.count()
	if r.err != nil {
		return ""
	}
	s := r.s[r.i : r.i+n]
	r.i += n
	if r.copied {
		return strings.Clone(s)
	}
	return s
}

func (r *codecReader) any(depth int) any {
	if depth > maxAnyDepth {
		r.fail("values nested deeper than %d", maxAnyDepth)
		return nil
	}
	switch tag := r.byte(); tag {
	case anyNil:
		return nil
	case anyFalse:
		return false
	case anyTrue:
		return true
	case anyString:
		return r.string()
	case anyInt:
		return r.varint()
	case anyFloat:
		return r.float()
	case anyMap:
		n := r.count()
		m := make(map[string]any, n)
		for range n {
			k := r.string()
			m[k] = r.any(depth + 1)
			if r.err != nil {
				return nil
			}
		}
		return m
	case anyList:
		n := r.count()
		l := make([]any, n)
		for i := range l {
			l[i] = r.any(depth + 1)
			if r.err != nil {
				return nil
			}
		}
		return l
	default:
		r.fail("unknown tag %d", tag)
		return nil
	}
}
