package inmemory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// A cluster's key holds its machines in groups of those alike: a pool's
// machines are one group, a machine that differs in anything but its name
// is in another, and a group whose last machine goes goes with it.
func TestClusterKeyGroupsMachinesAlike(t *testing.T) {
	at := time.Date(2026, 11, 28, 4, 5, 6, 0, time.UTC)
	pool := func(name, version string) wire.Machine {
		return wire.Machine{Name: name, Cluster: "c1", Role: wire.RoleWorker, Deployment: "md-0", Version: version,
			Provider: Name, TemplateHash: "h1", Labels: map[string]string{"pool": "md-0"}, Spec: []byte(`{"x":1}`),
			Bootstrap: []byte("secret")}
	}
	var c cloudCluster
	add := func(m wire.Machine) {
		t.Helper()
		g, err := groupMachine(m)
		if err != nil {
			t.Fatal(err)
		}
		c.add(g, m.Name, at)
	}
	for _, m := range []wire.Machine{pool("w-1", "v1"), pool("w-2", "v1"), pool("w-3", "v2"), pool("w-4", "v1")} {
		add(m)
	}
	other := pool("w-5", "v1")
	other.Labels = map[string]string{"pool": "md-0", "zone": "b"}
	add(other)
	if len(c.Groups) != 3 || len(c.Groups[0].Machines) != 3 {
		t.Fatalf("groups %+v; want w-1, w-2 and w-4 together, w-3 and w-5 each alone", c.Groups)
	}
	for i := range c.Groups {
		g, err := c.Groups[i].machine("")
		if err != nil || g.Name != "" || g.Spec != nil || g.Bootstrap != nil {
			t.Errorf("a group keeps a name, spec or bootstrap data: %s", c.Groups[i].Machine)
		}
	}
	got, ok, err := c.find("w-3")
	want := pool("w-3", "v2")
	want.Spec, want.Bootstrap = nil, nil
	if diff := cmp.Diff(want, got); !ok || err != nil || diff != "" {
		t.Errorf("find w-3: %v %v, -want +got:\n%s", ok, err, diff)
	}
	if _, ok, _ := c.find("w-9"); ok {
		t.Error("found a machine the cluster does not have")
	}
	if !c.remove("w-3") || c.remove("w-3") || len(c.Groups) != 2 {
		t.Errorf("after removing w-3 (twice): %+v; want its group gone", c.Groups)
	}
	if _, ok, _ := c.find("w-4"); !ok || !c.remove("w-1") {
		t.Error("w-4 lost or w-1 not removed")
	}
}

// Machines the provider wrote under keys of their own are read as they
// were; a value that is not such a record is left out, and labels that
// are not strings are dropped.
func TestDecodeLegacy(t *testing.T) {
	for text, want := range map[string]wire.Machine{
		`{"machine": {"name": "m", "cluster": "c", "role": "worker", "deployment": "md-0", "labels": {"a": "b"}}, "created": "2026-11-28T04:05:06Z"}`: {
			Name: "m", Cluster: "c", Role: wire.RoleWorker, Deployment: "md-0", Labels: map[string]string{"a": "b"}},
		`{"machine": {"name": "m", "labels": 7}}`:             {Name: "m"},
		`{"machine": {"name": "m", "annotations": {"a": 1}}}`: {Name: "m"},
	} {
		got, ok := decodeLegacy([]byte(text))
		if diff := cmp.Diff(want, got); !ok || diff != "" {
			t.Errorf("%s: ok %v, -want +got:\n%s", text, ok, diff)
		}
	}
	if _, ok := decodeLegacy([]byte(`not json`)); ok {
		t.Error("a value that is not JSON was listed")
	}
}

// sampleClusters are cluster values as the provider writes them: pools of
// machines alike, names with what JSON escapes, times with and without
// fractions of a second, groups emptied and filled again.
func sampleClusters(tb testing.TB) []cloudCluster {
	tb.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"w-1", "cp-0", `a"b`, `a\b`, "a<b>&c", "x<y", "p>q", "r&s", "ä-1", "tab\there", "line\u2028sep", "x\x01y"}
	var out []cloudCluster
	for range 200 {
		var c cloudCluster
		for j := range r.IntN(30) {
			m := wire.Machine{Cluster: "c1", Role: wire.RoleWorker, Deployment: fmt.Sprintf("md-%d", r.IntN(3)),
				Version: fmt.Sprintf("v1.3%d.0", r.IntN(2)), Provider: Name, TemplateHash: "h1"}
			if r.IntN(2) == 0 {
				m.Labels = map[string]string{"pool": m.Deployment, "z<one": "a&b"}
			}
			if r.IntN(4) == 0 {
				m.Annotations = map[string]string{"note": `quoted "text"`}
			}
			g, err := groupMachine(m)
			if err != nil {
				tb.Fatal(err)
			}
			at := time.Date(2026, 12, 2, 4, r.IntN(60), r.IntN(60), r.IntN(3)*r.IntN(1e9), time.UTC)
			c.add(g, fmt.Sprintf("%s-%d", names[r.IntN(len(names))], j), at)
			if r.IntN(5) == 0 {
				c.remove(c.Groups[r.IntN(len(c.Groups))].Machines[0].Name)
			}
		}
		out = append(out, c)
	}
	return append(out, cloudCluster{}, cloudCluster{Groups: []group{}})
}

// A cluster's value is written as encoding/json writes it, and read back
// as it was: the provider's own encoder and reader change no byte of what
// other versions of it wrote and read.
func TestClusterEncodingIsEncodingJSONs(t *testing.T) {
	fast := 0
	for _, c := range sampleClusters(t) {
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		got := c.appendJSON(nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("encoded\n%s\nencoding/json:\n%s", got, want)
		}
		back, err := decodeCluster(got)
		if err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if len(c.Groups) == 0 && len(back.Groups) == 0 {
			continue // nil and empty are both "no machines"
		}
		if diff := cmp.Diff(c, back); diff != "" {
			t.Fatalf("%s read back (-written +read):\n%s", got, diff)
		}
		if checkClusterDecoding(t, got) {
			fast++
		}
	}
	if fast < 150 {
		t.Errorf("the fast path read %d of the samples; want nearly all", fast)
	}
}

// FuzzDecodeCluster holds decodeCluster's fast path to encoding/json's.
func FuzzDecodeCluster(f *testing.F) {
	for i, c := range sampleClusters(f) {
		if i%20 == 0 {
			f.Add(c.appendJSON(nil))
		}
	}
	f.Add([]byte(`{"groups":[{"machine":{"name":""},"machines":[{"name":"m","created":"2026-12-02T04:05:06Z"}]}]}`))
	f.Add([]byte(` { "groups" : [ { "machines" : [ ] , "machine" : [ ] } ] } `))
	f.Fuzz(func(t *testing.T, data []byte) { checkClusterDecoding(t, data) })
}

// checkClusterDecoding compares decodeCluster with encoding/json on data;
// true when the fast path read it.
func checkClusterDecoding(t *testing.T, data []byte) bool {
	t.Helper()
	fast, ok := scanCluster(data)
	var ref cloudCluster
	err := json.Unmarshal(data, &ref)
	got, gerr := decodeCluster(data)
	if (gerr == nil) != (err == nil) {
		t.Errorf("%q: decodeCluster says %v, encoding/json %v", data, gerr, err)
	}
	if err == nil {
		if diff := cmp.Diff(ref, got); diff != "" {
			t.Errorf("%q: decodeCluster differs from encoding/json (-json +decodeCluster):\n%s", data, diff)
		}
	}
	if !ok {
		return false
	}
	if err != nil {
		t.Errorf("%q: the fast path read what encoding/json refuses (%v)", data, err)
	} else if diff := cmp.Diff(ref, fast); diff != "" {
		t.Errorf("%q: the fast path differs from encoding/json (-json +fast):\n%s", data, diff)
	}
	return true
}
