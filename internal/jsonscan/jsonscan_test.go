package jsonscan

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sample is what the tests read, by both ways.
type sample struct {
	Name   string            `json:"name"`
	N      int               `json:"n"`
	OK     bool              `json:"ok"`
	Labels map[string]string `json:"labels"`
	List   []string          `json:"list"`
	Raw    json.RawMessage   `json:"raw"`
}

var sampleKeys = KeyBits("name", "n", "ok", "labels", "list", "raw")

func read(text string) (v sample, ok bool) {
	s := New([]byte(text), NewInterner())
	ok = s.Object(sampleKeys, func(key string) bool {
		var ok bool
		switch key {
		case "name":
			v.Name, ok = s.Shared()
		case "n":
			ok = s.Int(&v.N)
		case "ok":
			ok = s.Bool(&v.OK)
		case "labels":
			ok = s.SharedMap(&v.Labels)
		case "list":
			ok = s.Strings(&v.List)
		case "raw":
			v.Raw, ok = s.RawValue()
		}
		return ok
	}) && s.End()
	return v, ok
}

// TestReadersGiveUpWhereTheyAreNotSure: what the readers accept they read
// as encoding/json does; what they do not follow they refuse, leaving the
// text to encoding/json.
func TestReadersGiveUpWhereTheyAreNotSure(t *testing.T) {
	for _, text := range []string{
		`{}`, ` { "name" : "a\u00e9\n" , "n": -12, "ok": false } `, `{"labels": {"b": "2", "a": ""}, "list": ["x", ""]}`,
		`{"raw": {"x": [1, 2.5, null]}}`, `{"n": 0, "ok": true}`, `{"n": 999999999, "list": []}`, `{"labels": {}}`,
	} {
		got, ok := read(text)
		if !ok {
			t.Errorf("%s: refused", text)
			continue
		}
		var want sample
		if err := json.Unmarshal([]byte(text), &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: -encoding/json +jsonscan:\n%s", text, diff)
		}
	}
	for _, text := range []string{
		`{"name": "a", "name": "b"}`, `{"Name": "a"}`, `{"other": 1}`, `{"name": null}`, `{"n": 1.5}`, `{"n": 1e3}`,
		`{"n": 01}`, `{"n": 1234567890}`, `{"n": -}`, `{"ok": tru}`, `{"labels": {"a": "1", "a": "2"}}`,
		`{"labels": null}`, `{"list": ["a", 1]}`, `{"raw": {"x": [1,]}}`, `{"raw": "s"}`, `{"name": "a"} x`,
		`{"name": "a",}`, "{\"name\": \"tab\tin\"}", `{"name": "a"`, `[]`,
	} {
		if got, ok := read(text); ok {
			t.Errorf("%s: read as %+v; want it left to encoding/json", text, got)
		}
	}
}

// TestSharedValuesAreOneCopy: strings and objects of strings read through
// one Interner are one copy each.
func TestSharedValuesAreOneCopy(t *testing.T) {
	in := NewInterner()
	var maps []map[string]string
	for range 2 {
		s := New([]byte(`{"env": "dev"}`), in)
		var m map[string]string
		if !s.SharedMap(&m) || !s.End() {
			t.Fatal("refused")
		}
		maps = append(maps, m)
	}
	maps[0]["x"] = "changed"
	if maps[1]["x"] != "changed" {
		t.Error("two reads of the same labels gave two maps")
	}
}
