package status

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// The status files are written on every planning pass that changes a
// cluster, and all of them by a new leader's first pass: yaml.v3 took
// ~390 µs for a cluster of 13 machines, most of a restart at 10,000
// clusters. fastYAML writes the same bytes as yaml.v3 (two-space indents)
// for the status types — structs of strings, ints, bools, times, pointers
// and slices — in a tenth of the time. How a string is written (plain,
// quoted) is asked of yaml.v3 once per distinct string and remembered;
// a value it cannot write (a string over several lines, a kind the status
// types do not use) makes it return errSlowPath, and the caller uses
// yaml.v3. TestFastYAMLMatchesYAMLv3 holds the two to the same bytes.

var errSlowPath = errors.New("status: value needs yaml.v3")

type fastField struct {
	name      string
	index     []int
	omitEmpty bool
}

var fastFields sync.Map // reflect.Type → []fastField

var timeType = reflect.TypeFor[time.Time]()

// fieldsOf lists t's fields in order, inline structs flattened, as yaml.v3
// sees them.
func fieldsOf(t reflect.Type) ([]fastField, error) {
	if f, ok := fastFields.Load(t); ok {
		return f.([]fastField), nil
	}
	var out []fastField
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts == "inline" {
			if sf.Type.Kind() != reflect.Struct {
				return nil, errSlowPath
			}
			inner, err := fieldsOf(sf.Type)
			if err != nil {
				return nil, err
			}
			for _, f := range inner {
				f.index = append([]int{i}, f.index...)
				out = append(out, f)
			}
			continue
		}
		if opts != "" && opts != "omitempty" {
			return nil, errSlowPath
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		out = append(out, fastField{name: name, index: []int{i}, omitEmpty: opts == "omitempty"})
	}
	fastFields.Store(t, out)
	return out, nil
}

// scalars remembers how yaml.v3 writes a string as a value.
var scalars = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// maxScalars bounds the remembered strings; the map starts over when full.
const maxScalars = 1 << 16

func plainSafe(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	last := len(s) - 1
	for i := range len(s) {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i == 0:
			return false // a digit or a mark first may read as a number or an indicator
		case c >= '0' && c <= '9' || c == '-' || c == '.' || c == '/' || c == '_':
		case c == ':':
			if i == last || s[i+1] == ' ' {
				return false // "key: value"
			}
		case c == ' ':
			if i == last || s[i+1] == ' ' || s[i+1] == '#' || s[i-1] == ':' {
				return false
			}
		default:
			return false
		}
	}
	// Words YAML reads as something else (true, null, yes, a number); none
	// is longer than five letters.
	if len(s) <= 5 {
		for _, w := range yamlWords {
			if strings.EqualFold(s, w) {
				return false
			}
		}
	}
	return true
}

var yamlWords = []string{"true", "false", "yes", "no", "on", "off", "null", "y", "n"}

// scalar is s as a YAML scalar on one line. Most are plain (a name, a
// phase, a version), and plainSafe, which refuses line breaks too, is
// asked first.
func scalar(s string) (string, error) {
	if plainSafe(s) {
		return s, nil
	}
	if strings.ContainsAny(s, "\n\r") {
		return "", errSlowPath
	}
	scalars.Lock()
	out, ok := scalars.m[s]
	scalars.Unlock()
	if ok {
		return out, nil
	}
	b, err := yaml.Marshal(map[string]string{"k": s})
	if err != nil {
		return "", err
	}
	out, ok = strings.CutPrefix(strings.TrimSuffix(string(b), "\n"), "k: ")
	if !ok || strings.Contains(out, "\n") {
		return "", errSlowPath
	}
	scalars.Lock()
	if len(scalars.m) >= maxScalars {
		scalars.m = map[string]string{}
	}
	scalars.m[s] = out
	scalars.Unlock()
	return out, nil
}

type fastEncoder struct{ b bytes.Buffer }

// encoders keep their buffers between files: a status file is written into
// a buffer grown once, then copied out at its exact size (the writer holds
// 10,000 of them until the commit is made).
var encoders = sync.Pool{New: func() any { return new(fastEncoder) }}

func fastYAML(v any) ([]byte, error) {
	e := encoders.Get().(*fastEncoder)
	defer func() {
		if e.b.Cap() <= 1<<20 {
			e.b.Reset()
			encoders.Put(e)
		}
	}()
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return nil, errSlowPath
	}
	if err := e.mapping(rv, 0, false); err != nil {
		return nil, err
	}
	if e.b.Len() == 0 {
		return []byte("{}\n"), nil
	}
	return bytes.Clone(e.b.Bytes()), nil
}

func (e *fastEncoder) indent(n int) {
	for range n {
		e.b.WriteByte(' ')
	}
}

// mapping writes the fields of struct v at indent; inItem: the first key
// follows a "- " already written.
func (e *fastEncoder) mapping(v reflect.Value, indent int, inItem bool) error {
	fields, err := fieldsOf(v.Type())
	if err != nil {
		return err
	}
	first := true
	for _, f := range fields {
		fv := v.FieldByIndex(f.index)
		if f.omitEmpty && isEmpty(fv) {
			continue
		}
		if !(first && inItem) {
			e.indent(indent)
		}
		first = false
		e.b.WriteString(f.name)
		e.b.WriteByte(':')
		if err := e.value(fv, indent); err != nil {
			return err
		}
	}
	return nil
}

// value writes what follows "key:" (at indent) for v.
func (e *fastEncoder) value(v reflect.Value, indent int) error {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			e.b.WriteString(" null\n")
			return nil
		}
		return e.value(v.Elem(), indent)
	case reflect.Struct:
		if v.Type() == timeType {
			e.b.WriteByte(' ')
			return e.scalarOf(v)
		}
		if empty, err := e.emptyMapping(v); err != nil || empty {
			if err == nil {
				e.b.WriteString(" {}\n")
			}
			return err
		}
		e.b.WriteByte('\n')
		return e.mapping(v, indent+2, false)
	case reflect.Slice:
		if v.Len() == 0 {
			e.b.WriteString(" []\n")
			return nil
		}
		e.b.WriteByte('\n')
		for i := range v.Len() {
			if err := e.item(v.Index(i), indent+2); err != nil {
				return err
			}
		}
		return nil
	default:
		e.b.WriteByte(' ')
		return e.scalarOf(v)
	}
}

// item writes one sequence element at indent.
func (e *fastEncoder) item(v reflect.Value, indent int) error {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			e.indent(indent)
			e.b.WriteString("- null\n")
			return nil
		}
		v = v.Elem()
	}
	e.indent(indent)
	e.b.WriteString("- ")
	if v.Kind() == reflect.Struct && v.Type() != timeType {
		if empty, err := e.emptyMapping(v); err != nil || empty {
			if err == nil {
				e.b.WriteString("{}\n")
			}
			return err
		}
		return e.mapping(v, indent+2, true)
	}
	if v.Kind() == reflect.Slice {
		return errSlowPath
	}
	return e.scalarOf(v)
}

// emptyMapping reports whether struct v writes no field.
func (e *fastEncoder) emptyMapping(v reflect.Value) (bool, error) {
	fields, err := fieldsOf(v.Type())
	if err != nil {
		return false, err
	}
	for _, f := range fields {
		if !f.omitEmpty || !isEmpty(v.FieldByIndex(f.index)) {
			return false, nil
		}
	}
	return true, nil
}

// scalarOf writes a scalar and the line's end.
func (e *fastEncoder) scalarOf(v reflect.Value) error {
	switch v.Kind() {
	case reflect.String:
		s, err := scalar(v.String())
		if err != nil {
			return err
		}
		e.b.WriteString(s)
	case reflect.Bool:
		e.b.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		e.b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Struct:
		if v.Type() != timeType {
			return errSlowPath
		}
		e.b.WriteString(v.Interface().(time.Time).Format(time.RFC3339Nano))
	default:
		return errSlowPath
	}
	e.b.WriteByte('\n')
	return nil
}

// isEmpty is yaml.v3's omitempty test for the kinds the status types use.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	case reflect.Struct:
		if z, ok := v.Interface().(interface{ IsZero() bool }); ok {
			return z.IsZero()
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && !isEmpty(v.Field(i)) {
				return false
			}
		}
		return true
	}
	return false
}
