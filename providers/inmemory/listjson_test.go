package inmemory

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/internal/jsonscan"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// written are records as Create writes them.
func written(t testing.TB) [][]byte {
	var out [][]byte
	for _, m := range []wire.Machine{
		{Name: "c-1-md-0-abcde", Cluster: "c-1", Role: wire.RoleWorker, Deployment: "md-0", Version: "v1.31.2", Provider: Name,
			TemplateHash: "0123456789abcdef", Labels: map[string]string{"gitfleet.io/cluster": "c-1", "env": "dev"}},
		{Name: "c-1-cp-xyz", Cluster: "c-1", Role: wire.RoleControlPlane, Version: "v1.31.2", Provider: Name, FailureDomain: "eu-1a",
			Labels: map[string]string{"<tag>": "a&b", "ünï": "☃\u2028"}, Annotations: map[string]string{"note": "quote \" and \\ and \n"}},
		{Name: "bare", Cluster: "c"},
	} {
		data, err := json.Marshal(record{Machine: m, Created: time.Date(2026, 11, 28, 4, 5, 6, 7, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// checkListed: whatever fastListed reads, encoding/json reads the same.
func checkListed(t *testing.T, data []byte) (fast bool) {
	got, ok := fastListed(data, jsonscan.NewInterner())
	if !ok {
		return false
	}
	want, wok := decodeListedJSON(data)
	if !wok {
		t.Fatalf("%s: read by the fast path, refused by encoding/json", data)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s: -encoding/json +fast:\n%s", data, diff)
	}
	return true
}

// TestDecodeListedIsJSON: List reads the provider's own records without
// encoding/json and gets what encoding/json gets; other shapes are left
// to encoding/json (and a record that is no record is left out).
func TestDecodeListedIsJSON(t *testing.T) {
	for _, data := range written(t) {
		if !checkListed(t, data) {
			t.Errorf("%s: the provider's own record went to encoding/json", data)
		}
	}
	for _, text := range []string{
		` { "machine" : { "name" : "m" , "cluster" : "c" } } `,
		`{"machine": {"name": "m", "spec": {"cpus": 2}}, "created": "2026-11-28T04:05:06Z"}`,
		`{"machine": {"name": "m", "labels": {}}}`,
	} {
		if !checkListed(t, []byte(text)) {
			t.Errorf("%s: went to encoding/json", text)
		}
	}
	for _, text := range []string{
		`{"machine": {"Name": "m"}}`, `{"machine": {"name": "m", "name": "n"}}`, `{"machine": {"name": "m", "labels": null}}`,
		`{"machine": {"name": "m", "labels": 7}}`, `{"machine": {"name": "m", "labels": {"a": 1}}}`, `{"machine": null}`,
		`{"machine": {"name": "m"}, "other": true}`, `{"machine": {"name": "m", "provider": 1}}`, `{"created": 5}`,
		`{"machine": {"name": "m"}} trailing`, `not json`, `{"machine": {"name": "m", "spec": "s"}}`,
	} {
		if checkListed(t, []byte(text)) {
			t.Errorf("%s: read by the fast path; want encoding/json", text)
		}
	}
	// What decodeListed makes of them is encoding/json's.
	for text, want := range map[string]wire.Machine{
		`{"machine": {"Name": "m", "labels": null}}`: {Name: "m"},
		`{"machine": {"name": "m", "labels": 7}}`:    {Name: "m"},
		`{"machine": {"name": "m", "name": "n"}}`:    {Name: "n"},
	} {
		got, ok := decodeListed([]byte(text), jsonscan.NewInterner())
		if diff := cmp.Diff(want, got); !ok || diff != "" {
			t.Errorf("%s: ok %v, -want +got:\n%s", text, ok, diff)
		}
	}
	if _, ok := decodeListed([]byte(`not json`), jsonscan.NewInterner()); ok {
		t.Error("a value that is not JSON was listed")
	}
}

// FuzzDecodeListed: any bytes the fast path reads, encoding/json reads the
// same.
func FuzzDecodeListed(f *testing.F) {
	for _, data := range written(f) {
		f.Add(data)
	}
	f.Add([]byte(`{"machine": {"name": "m", "labels": {"a": "\u00e9"}, "spec": [1, {"x": null}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) { checkListed(t, data) })
}
