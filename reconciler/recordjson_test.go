package reconciler

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// recordSamples are records as the daemon writes them, and hand-written
// variants of their encoding the fast path must read or hand over.
func recordSamples(tb testing.TB) [][]byte {
	tb.Helper()
	at := time.Date(2026, 11, 25, 18, 0, 0, 123456789, time.UTC)
	recs := []*Record{
		{Name: "c1-md-0-abcde", Shape: &Shape{Cluster: "c1", Deployment: "md-0", Role: "worker", Provider: "inmemory",
			Version: "v1.31.2", TemplateHash: "3f2a", Labels: map[string]string{"pool": "md-0", "tier": "web"},
			Spec:         json.RawMessage(`{"cpus":2,"disk":{"size":"20Gi"},"tags":["a","b\"c"]}`),
			SourceCommit: "0123456789abcdef", PlanID: "0123456-7", Cause: "scale up md-0 from 2 to 3", FailureDomain: "fd-2"}, Phase: "Running",
			Created: StampOf(at), Running: StampOf(at.Add(time.Second)), Addresses: &[]string{"10.0.0.1", "fd00::1"},
			ProviderID: "inmemory://c1/", NamedID: true, Worker: "w1", TaskID: "create.c1.c1-md-0-abcde", Attempt: 3, Published: StampOf(at), Heartbeats: true},
		{Name: "c1-cp-xyz12", Shape: &Shape{Cluster: "c1", Role: "control-plane", Provider: "local", Version: "v1.31.2",
			Annotations: map[string]string{}, Reason: "MachineMissing", Message: "exit status 1: \"kubeadm\" <failed> & é \u2028"},
			Init: true, Phase: "Failed",
			Addresses: &[]string{}, Created: StampOf(at), Joined: StampOf(at),
			Health: &Health{Healthy: false, Reason: ReasonHeartbeatMissing, Message: "no heartbeat for 31s", Since: at}},
		{Name: "m", Shape: &Shape{Cluster: "c"}},
	}
	var out [][]byte
	for _, r := range recs {
		data, err := json.Marshal(r)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, data)
	}
	return append(out,
		[]byte(` { "name" : "m" , "cluster":"c", "attempt": -0, "init": false } `),
		[]byte(`{"name":"m","cluster":"c","attempt":1.5}`),
		[]byte(`{"name":"m","cluster":"c","attempt":1e3}`),
		[]byte(`{"name":"m","cluster":"c","attempt":12345678901}`),
		[]byte(`{"name":"m","cluster":"c","Name":"n"}`),
		[]byte(`{"name":"m","cluster":"c","name":"m"}`),
		[]byte(`{"name":"m","cluster":"c","labels":{"a":"1","a":"2"}}`),
		[]byte(`{"name":"m","cluster":"c","labels":null,"spec":null,"health":null}`),
		[]byte(`{"name":"m","cluster":"c","unknown":{"x":[1,2]}}`),
		[]byte(`{"name":"m","cluster":"c","spec":{"a":}}`),
		[]byte(`{"name":"m","cluster":"c","created":"not a time"}`),
		[]byte(`{"name":"m","cluster":"c","created":"2026-11-25T19:00:00.5+01:00","running":"1970-01-01T00:00:00Z"}`),
		[]byte(`{"name":"m","cluster":"c","created":"3000-01-01T00:00:00Z"}`),
		[]byte(`{"name":"m","cluster":"c","published":"1600-01-01T00:00:00Z"}`),
		[]byte(`{"name":"m","cluster":"c","joined":null}`),
		[]byte(`{"name":"m\u0041","cluster":"c"}`),
		[]byte("{\"name\":\"m\xff\",\"cluster\":\"c\"}"),
		[]byte(`{"name":"m","cluster":"c"} x`),
		[]byte(`{"name":"m","cluster":"c",}`),
		[]byte(`[]`),
		[]byte(``),
	)
}

// TestFastRecordDecoding: every sample decodes to what encoding/json
// makes of it, or fails as it does.
func TestFastRecordDecoding(t *testing.T) {
	fast := 0
	for _, data := range recordSamples(t) {
		if checkRecordDecoding(t, data) {
			fast++
		}
	}
	if fast < 4 {
		t.Errorf("the fast path read %d samples; the daemon's own records (3) and the spaced one must be read by it", fast)
	}
}

// FuzzDecodeRecord: whatever the fast path accepts, encoding/json accepts
// and decodes to the same Record.
func FuzzDecodeRecord(f *testing.F) {
	for _, data := range recordSamples(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkRecordDecoding(t, data) })
}

// checkRecordDecoding compares the fast path with encoding/json on data;
// true when the fast path read it.
func checkRecordDecoding(t *testing.T, data []byte) bool {
	t.Helper()
	return checkFastDecoding(t, data, fastDecodeRecord)
}

// checkFastDecoding compares a fast decoder, with and without an
// interner, with encoding/json on data; true when the fast path read it.
func checkFastDecoding[T any](t *testing.T, data []byte, decode func([]byte, *T, *interner) bool) bool {
	t.Helper()
	var fast, shared, ref T
	ok := decode(data, &fast, nil)
	if okShared := decode(data, &shared, newInterner()); okShared != ok {
		t.Errorf("%q: the fast path with an interner read it: %v, without: %v", data, okShared, ok)
	} else if d := cmp.Diff(fast, shared); ok && d != "" {
		t.Errorf("%q: the fast path with an interner differs (-without +with):\n%s", data, d)
	}
	err := json.Unmarshal(data, &ref)
	if !ok {
		return false
	}
	if err != nil {
		t.Errorf("%q: the fast path read what encoding/json refuses (%v)", data, err)
		return true
	}
	if d := cmp.Diff(ref, fast); d != "" {
		t.Errorf("%q: the fast path differs from encoding/json (-json +fast):\n%s", data, d)
	}
	return true
}

// TestProviderIDIsSharedAndStoredWhole: a provider ID that ends with the
// machine's name (inmemory://<cluster>/<name>) is kept as a head the
// cluster's machines share, read back whole, stored whole and decoded to
// the same; any other ID is kept as it is. Addresses are kept only when
// there are some.
func TestProviderIDIsSharedAndStoredWhole(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r := clockedReconciler(t, &now)
	record := func(name string) *Record {
		rec := &Record{Name: name, Shape: &Shape{Cluster: "c1", Provider: "inmemory", Version: "v1.31.2"},
			Phase: wire.PhasePending}
		rec.setTask(wire.OpCreate)
		return rec
	}
	// Provisioning: a create's events may say what the provider has before
	// it runs, and a Running one changes nothing after it.
	provisioning := func(rec *Record, id string, addrs ...string) bool {
		return r.applyEvent(rec, wire.Event{TaskID: rec.TaskID, Cluster: rec.Cluster, Machine: rec.Name,
			Phase: wire.PhaseProvisioning, ProviderID: id, Addresses: addrs})
	}
	a, b := record("c1-md-0-abcde"), record("c1-md-0-fghij")
	provisioning(a, "inmemory://c1/c1-md-0-abcde")
	provisioning(b, "inmemory://c1/c1-md-0-fghij")
	for _, rec := range []*Record{a, b} {
		want := "inmemory://c1/" + rec.Name
		if !rec.NamedID || rec.providerID() != want || !rec.hasProviderID(want) {
			t.Errorf("%s: NamedID %v, provider ID %q; want the head kept and %q read back", rec.Name, rec.NamedID, rec.providerID(), want)
		}
		if rec.hasProviderID(want+"x") || rec.hasProviderID("inmemory://c2/"+rec.Name) || rec.hasProviderID("inmemory://c1/x"+rec.Name) {
			t.Errorf("%s: another machine's ID taken for its own", rec.Name)
		}
		if got := machineStatus(rec).ProviderID; got != want {
			t.Errorf("%s: status says provider ID %q, want %q", rec.Name, got, want)
		}
	}
	if unsafe.StringData(a.ProviderID) != unsafe.StringData(b.ProviderID) {
		t.Error("the cluster's machines keep a copy each of the provider ID's head")
	}
	if provisioning(a, "inmemory://c1/c1-md-0-abcde") {
		t.Error("the same provider ID again counted as a change")
	}
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"providerID":"inmemory://c1/c1-md-0-abcde"`) || strings.Contains(string(data), "addresses") {
		t.Errorf("stored record %s; want the whole provider ID and no addresses", data)
	}
	got, err := decodeRecord(a.key(), data)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(a, got); d != "" {
		t.Errorf("the stored record decodes to another (-stored +decoded):\n%s", d)
	}

	// IDs that do not end with "/<name>" are kept whole.
	for _, id := range []string{"docker://0123abcd", "local://4242", "inmemory://c1/c1-md-0-abcdex", "c1-md-0-abcde", "/c1-md-0-abcde"} {
		if !provisioning(a, id) {
			t.Errorf("%q: a new provider ID not counted as a change", id)
		}
		if a.NamedID || a.ProviderID != id || a.providerID() != id {
			t.Errorf("%q: kept as %q (NamedID %v)", id, a.ProviderID, a.NamedID)
		}
	}
	provisioning(a, "", "10.0.0.1")
	data, err = json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"addresses":["10.0.0.1"]`) {
		t.Errorf("stored record %s; want its address", data)
	}
	if got, err = decodeRecord(a.key(), []byte(strings.Replace(string(data), `["10.0.0.1"]`, `[]`, 1))); err != nil || got.Addresses != nil {
		t.Errorf("an empty list of addresses decoded to %v (%v); want none", got.addresses(), err)
	}
}
