package reconciler

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"
)

// TestInternerSharesWhatMachinesHaveAlike: two records read from the store
// for machines of one pool end up with one labels map and one spec, and
// keep their values.
func TestInternerSharesWhatMachinesHaveAlike(t *testing.T) {
	decode := func(name string) *Record {
		data, _ := json.Marshal(&Record{Name: name, Cluster: "c", Deployment: "md-0", Version: "v1.31.2",
			Labels: map[string]string{"a": "1", "b": "2"}, Spec: json.RawMessage(`{"cpus":2}`)})
		r, err := decodeRecord("c."+name, data)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b, other := decode("m1"), decode("m2"), decode("m3")
	other.Labels = map[string]string{"a": "1"}
	in := newInterner()
	for _, r := range []*Record{a, b, other} {
		in.record(r)
	}
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("two machines of a pool keep a labels map each")
	}
	if &a.Spec[0] != &b.Spec[0] {
		t.Error("two machines of a pool keep a spec each")
	}
	if len(other.Labels) != 1 || len(a.Labels) != 2 || a.Labels["b"] != "2" || string(b.Spec) != `{"cpus":2}` {
		t.Errorf("values changed: %v %v %s", a.Labels, other.Labels, b.Spec)
	}
}

// TestDecodingSharesWhatMachinesHaveAlike: records read at start by the
// fast decoder with one interner share a pool's labels map, spec and
// strings, and keep their values.
func TestDecodingSharesWhatMachinesHaveAlike(t *testing.T) {
	in := newInterner()
	decode := func(name string, labels map[string]string) *Record {
		data, _ := json.Marshal(&Record{Name: name, Cluster: "c", Deployment: "md-0", Version: "v1.31.2",
			Labels: labels, Spec: json.RawMessage(`{"cpus":2}`)})
		r, err := decodeShared("c."+name, data, in)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := decode("m1", map[string]string{"a": "1", "b": "2"})
	b := decode("m2", map[string]string{"b": "2", "a": "1"})
	other := decode("m3", map[string]string{"a": "1"})
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("two machines of a pool keep a labels map each")
	}
	if &a.Spec[0] != &b.Spec[0] {
		t.Error("two machines of a pool keep a spec each")
	}
	if unsafe.StringData(a.Version) != unsafe.StringData(b.Version) {
		t.Error("two machines of a pool keep a version string each")
	}
	if len(other.Labels) != 1 || len(a.Labels) != 2 || a.Labels["b"] != "2" || string(b.Spec) != `{"cpus":2}` || b.Name != "m2" {
		t.Errorf("values changed: %v %v %s %s", a.Labels, other.Labels, b.Spec, b.Name)
	}
}
