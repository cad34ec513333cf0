package reconciler

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// inventorySamples are inventory parts as workers encode them, and
// hand-written variants the fast path must read or hand over.
func inventorySamples(tb testing.TB) [][]byte {
	tb.Helper()
	at := time.Date(2026, 11, 28, 1, 2, 3, 456789, time.UTC)
	labels := map[string]string{"gitfleet.io/cluster": "c1", "tier": "web"}
	invs := []wire.Inventory{
		{Provider: "inmemory", Worker: "w1", Report: "w1-abc", Part: 0, Parts: 2, Time: at, Instances: []wire.Instance{
			{Cluster: "c1", Machine: "c1-md-0-abcde", Deployment: "md-0", Role: wire.RoleWorker, Version: "v1.31.2",
				TemplateHash: "3f2a", Labels: labels, ProviderID: "inmemory://c1/c1-md-0-abcde", Addresses: []string{"10.0.0.1", "fd00::1"}},
			{Cluster: "c1", Machine: "c1-md-0-fghij", Deployment: "md-0", Role: wire.RoleWorker, Version: "v1.31.2",
				TemplateHash: "3f2a", Labels: labels, Annotations: map[string]string{}, Addresses: []string{}},
			{Cluster: "c1", Machine: "c1-cp-x", Role: wire.RoleControlPlane, Reason: "NodeExited",
				Message: "exit status 1: \"kubeadm\" <failed> & é \u2028", Labels: map[string]string{"a\"b": "c\\d"}},
		}},
		{Provider: "local", Worker: "host-1", HostBound: true, Report: "r", Part: 1, Parts: 2, Request: "ab12-7", Time: at},
		{Provider: "inmemory", Worker: "w1", Report: "r", Parts: 1, Time: at, Instances: []wire.Instance{}},
	}
	var out [][]byte
	for i := range invs {
		data, err := wire.Encode(&invs[i])
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, data)
	}
	v := wire.APIVersion
	return append(out,
		[]byte(fmt.Sprintf(` { "apiVersion" : %q , "provider":"p", "worker":"w", "report":"r", "part": 0, "parts": 1, "time":"2026-11-28T01:02:03Z", "instances": [ { "cluster" : "c", "machine":"m" } ] } `, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p","worker":"w","report":"r","parts":1,"Provider":"q"}`, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p","worker":"w","report":"r","parts":1,"parts":2}`, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p","worker":"w","report":"r","parts":1.0}`, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p","worker":"w","report":"r","parts":1,"instances":null}`, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p","worker":"w","report":"r","parts":1,"instances":[null]}`, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p","worker":"w","report":"r","parts":1,"instances":[{"cluster":"c","machine":"m","Machine":"n"}]}`, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p","worker":"w","report":"r","parts":1,"instances":[{"cluster":"c","cluster":"d"}]}`, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p","worker":"w","report":"r","parts":1,"instances":[{"cluster":"c","labels":{"a":"1","a":"2"}}]}`, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p","worker":"w","report":"r","parts":1,"instances":[{"cluster":"c","extra":1}]}`, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p\u0041","worker":"w\u00e9","report":"r","parts":1,"hostBound":true}`, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p","worker":"w","report":"r","parts":1,"time":"not a time"}`, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p","worker":"w","report":"r","parts":12345678901}`, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p","worker":"w","report":"r","parts":1} x`, v)),
		[]byte(fmt.Sprintf(`{"apiVersion":%q,"provider":"p","worker":"w","report":"r","parts":1,}`, v)),
		[]byte("{\"apiVersion\":\""+v+"\",\"provider\":\"p\xff\",\"worker\":\"w\",\"report\":\"r\",\"parts\":1}"),
		[]byte(`{"apiVersion":"gitfleet.io/wire/v0","provider":"p","worker":"w","report":"r","parts":1}`),
		[]byte(`{"provider":"p","worker":"w","report":"r","parts":1}`),
		[]byte(`{}`),
		[]byte(`[]`),
		[]byte(``),
	)
}

// TestFastInventoryDecoding: every sample decodes to what encoding/json
// makes of it, or is handed over; and the leader's decoding of each gives
// wire.DecodeInventory's result and error, whichever path read it.
func TestFastInventoryDecoding(t *testing.T) {
	fast := 0
	for _, data := range inventorySamples(t) {
		if checkInventoryDecoding(t, data) {
			fast++
		}
		got := decodeInventory(&nats.Msg{Subject: "s", Data: data})
		want, err := wire.DecodeInventory(data)
		if (got.err == nil) != (err == nil) || (err != nil && got.err.Error() != err.Error()) {
			t.Errorf("%q: the leader's decoding says %v, wire.DecodeInventory %v", data, got.err, err)
		} else if d := cmp.Diff(want, got.inv); d != "" {
			t.Errorf("%q: the leader's decoding differs (-wire +leader):\n%s", data, d)
		}
	}
	if fast < 4 {
		t.Errorf("the fast path read %d samples; the workers' own parts (3) and the spaced one must be read by it", fast)
	}
}

// FuzzDecodeInventory: whatever the fast path accepts, encoding/json
// accepts and decodes to the same Inventory.
func FuzzDecodeInventory(f *testing.F) {
	for _, data := range inventorySamples(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkInventoryDecoding(t, data) })
}

// checkInventoryDecoding compares the fast path with encoding/json on
// data (which the fast path reads only at the wire's apiVersion); true when
// the fast path read it.
func checkInventoryDecoding(t *testing.T, data []byte) bool {
	t.Helper()
	ok := checkFastDecoding(t, data, fastDecodeInventory)
	var ref wire.Inventory
	if ok && json.Unmarshal(data, &ref) == nil && ref.APIVersion != wire.APIVersion {
		t.Errorf("%q: the fast path read apiVersion %q", data, ref.APIVersion)
	}
	return ok
}
