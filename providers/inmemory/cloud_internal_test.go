package inmemory

import (
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
	for _, m := range []wire.Machine{pool("w-1", "v1"), pool("w-2", "v1"), pool("w-3", "v2"), pool("w-4", "v1")} {
		c.add(m, at)
	}
	other := pool("w-5", "v1")
	other.Labels = map[string]string{"pool": "md-0", "zone": "b"}
	c.add(other, at)
	if len(c.Groups) != 3 || len(c.Groups[0].Machines) != 3 {
		t.Fatalf("groups %+v; want w-1, w-2 and w-4 together, w-3 and w-5 each alone", c.Groups)
	}
	for _, g := range c.Groups {
		if g.Machine.Name != "" || g.Machine.Spec != nil || g.Machine.Bootstrap != nil {
			t.Errorf("a group keeps a name, spec or bootstrap data: %+v", g.Machine)
		}
	}
	got, ok := c.find("w-3")
	want := pool("w-3", "v2")
	want.Spec, want.Bootstrap = nil, nil
	if diff := cmp.Diff(want, got); !ok || diff != "" {
		t.Errorf("find w-3: %v, -want +got:\n%s", ok, diff)
	}
	if _, ok := c.find("w-9"); ok {
		t.Error("found a machine the cluster does not have")
	}
	if !c.remove("w-3") || c.remove("w-3") || len(c.Groups) != 2 {
		t.Errorf("after removing w-3 (twice): %+v; want its group gone", c.Groups)
	}
	if _, ok := c.find("w-4"); !ok || !c.remove("w-1") {
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
