package schemas

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// decodeDirect sets a document's Go value from its decoded YAML values as
// encoding/json would from the document's JSON (appendJSON's), without
// writing and reading that JSON: the round trip was a third of a cold
// validation's parsing. It follows the JSON rules it needs — a field named
// exactly by its tag or name (promoted from embedded structs), numbers read
// from the text appendJSON writes for them (json.Number in an `any`, then
// fixNumbers as decodeJSON does), null leaving a field as it is, a new map
// or slice for each object or array, a json.Unmarshaler given the JSON of
// its own value — and gives up (ok false) at anything else: a key no field
// has exactly (encoding/json also matches case-insensitively), a value of
// the wrong type, a number out of range, a string that is not UTF-8, a type
// it does not know how to fill. The caller then takes the JSON path, which
// words the errors, so what a document decodes to and how it fails are
// encoding/json's. TestDecodeDirectIsJSON and FuzzDecodeDirect hold it to
// that.
func decodeDirect(path string, d *doc, kind string, m map[string]any) (any, bool) {
	v := newKindValue(kind, v1alpha1.Source{Path: path, Line: d.line})
	if v == nil {
		return nil, false
	}
	if !setValue(reflect.ValueOf(v).Elem(), m) {
		return nil, false
	}
	fixNumbers(v)
	return v, true
}

// setValue sets dst (addressable, zero or partly set) from the YAML value x.
func setValue(dst reflect.Value, x any) bool {
	t := dst.Type()
	if x == nil {
		// null: encoding/json sets an interface, map, pointer or slice
		// to nil (they are already) and leaves other kinds as they are,
		// but hands null to an Unmarshaler, which this leaves to it.
		switch t.Kind() {
		case reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
			return dst.IsNil()
		}
		return !reflect.PointerTo(t).Implements(jsonUnmarshaler) && !reflect.PointerTo(t).Implements(textUnmarshaler)
	}
	if t.Kind() == reflect.Pointer {
		p := reflect.New(t.Elem())
		if !setValue(p.Elem(), x) {
			return false
		}
		dst.Set(p)
		return true
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		b, ok := appendJSON(nil, x)
		if !ok {
			return false
		}
		return dst.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(b) == nil
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return false
	}
	switch t.Kind() {
	case reflect.Interface:
		if t != anyType {
			return false
		}
		v, ok := plainValue(x)
		if ok && v != nil {
			dst.Set(reflect.ValueOf(v))
		}
		return ok
	case reflect.String:
		s, ok := x.(string)
		if !ok || !utf8.ValidString(s) {
			return false
		}
		dst.SetString(s)
		return true
	case reflect.Bool:
		b, ok := x.(bool)
		dst.SetBool(b)
		return ok
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		text, ok := numberText(x)
		if !ok {
			return false
		}
		n, err := strconv.ParseInt(text, 10, t.Bits())
		dst.SetInt(n)
		return err == nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		text, ok := numberText(x)
		if !ok {
			return false
		}
		n, err := strconv.ParseUint(text, 10, t.Bits())
		dst.SetUint(n)
		return err == nil
	case reflect.Float32, reflect.Float64:
		text, ok := numberText(x)
		if !ok {
			return false
		}
		f, err := strconv.ParseFloat(text, t.Bits())
		dst.SetFloat(f)
		return err == nil
	case reflect.Slice:
		l, ok := x.([]any)
		if !ok || t.Elem().Kind() == reflect.Uint8 { // []byte is base64 in JSON
			return false
		}
		s := reflect.MakeSlice(t, len(l), len(l))
		for i, e := range l {
			if !setValue(s.Index(i), e) {
				return false
			}
		}
		dst.Set(s)
		return true
	case reflect.Map:
		mx, ok := x.(map[string]any)
		if !ok || t.Key().Kind() != reflect.String || t.Key().PkgPath() != "" {
			return false
		}
		out := reflect.MakeMapWithSize(t, len(mx))
		ev := reflect.New(t.Elem()).Elem()
		for k, e := range mx {
			if !utf8.ValidString(k) {
				return false
			}
			ev.SetZero()
			if !setValue(ev, e) {
				return false
			}
			out.SetMapIndex(reflect.ValueOf(k), ev)
		}
		dst.Set(out)
		return true
	case reflect.Struct:
		mx, ok := x.(map[string]any)
		if !ok {
			return false
		}
		fields := structFields(t)
		if fields == nil {
			return false
		}
		for k, e := range mx {
			idx, ok := fields[k]
			if !ok {
				return false // unknown, or matched only case-insensitively
			}
			if !setValue(dst.FieldByIndex(idx), e) {
				return false
			}
		}
		return true
	}
	return false
}

// numberText is the JSON text appendJSON writes for a number.
func numberText(x any) (string, bool) {
	switch n := x.(type) {
	case int64:
		return strconv.FormatInt(n, 10), true
	case float64:
		b, ok := appendFloat(nil, n)
		return string(b), ok
	}
	return "", false
}

// plainValue is x as encoding/json decodes its JSON into an `any` with
// UseNumber: new maps and slices, numbers as json.Number.
func plainValue(x any) (any, bool) {
	switch v := x.(type) {
	case nil, bool:
		return v, true
	case string:
		return v, utf8.ValidString(v)
	case int64, float64:
		text, ok := numberText(v)
		return json.Number(text), ok
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			var ok bool
			if out[i], ok = plainValue(e); !ok {
				return nil, false
			}
		}
		return out, true
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			p, ok := plainValue(e)
			if !ok || !utf8.ValidString(k) {
				return nil, false
			}
			out[k] = p
		}
		return out, true
	}
	return nil, false
}

// structFields maps a struct type's JSON names to their fields' indexes,
// embedded structs' fields promoted; nil when a name is had twice (which
// encoding/json settles by rules this does not follow) or an embedded
// field is a pointer.
func structFields(t reflect.Type) map[string][]int {
	if f, ok := directFields.Load(t); ok {
		return f.(map[string][]int)
	}
	fields := map[string][]int{}
	var walk func(t reflect.Type, index []int) bool
	walk = func(t reflect.Type, index []int) bool {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if slices.Contains(strings.Split(opts, ","), "string") || (name != "" && !validTag(name)) {
				return false
			}
			idx := append(index[:len(index):len(index)], i)
			if f.Anonymous && name == "" {
				if f.Type.Kind() != reflect.Struct {
					return false // an embedded pointer or other type
				}
				if !walk(f.Type, idx) {
					return false
				}
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := fields[name]; dup {
				return false
			}
			fields[name] = idx
		}
		return true
	}
	if !walk(t, nil) {
		fields = nil
	}
	directFields.Store(t, fields)
	return fields
}

var directFields sync.Map // reflect.Type → map[string][]int

// validTag is encoding/json's rule for a tag's name; it uses the field's
// name for another, which this does not follow.
func validTag(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c) && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return false
		}
	}
	return s != ""
}
