package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// encodeBoth encodes inv with Encode and with encoding/json's Marshal.
func encodeBoth(inv Inventory) (got, want []byte, err, werr error) {
	got, err = Encode(&inv)
	want, werr = json.Marshal(&inv)
	return
}

// TestEncodeInventoryIsEncodingJSON: an inventory part is written as
// encoding/json writes it, whatever its strings hold and whichever of its
// fields are empty; a time Marshal refuses is refused with its error.
func TestEncodeInventoryIsEncodingJSON(t *testing.T) {
	var strs []string
	for _, v := range jsonSamples() {
		if s, ok := v.(string); ok {
			strs = append(strs, s)
		}
	}
	at := time.Date(2026, 11, 28, 4, 5, 6, 789, time.FixedZone("x", 3600))
	var invs []Inventory
	for i, s := range strs {
		full := Instance{Cluster: s, Machine: s + "-m", Deployment: s, Role: Role(s), Version: s, TemplateHash: s,
			Labels: map[string]string{s: s, "b": "2", "a": s, "<": ">"}, Annotations: map[string]string{"note": s},
			ProviderID: s, Addresses: []string{s, "", "10.0.0.1"}, Reason: s, Message: s}
		invs = append(invs, Inventory{Provider: s, Worker: s, HostBound: i%2 == 0, Report: s, Part: i, Parts: -i,
			Request: s, Time: at.Add(time.Duration(i) * time.Hour), Instances: []Instance{full, {Cluster: s, Machine: s},
				{Labels: map[string]string{}, Addresses: []string{}, Annotations: nil}}})
	}
	invs = append(invs, Inventory{}, Inventory{Instances: []Instance{}}, Inventory{Time: time.Unix(0, 1).UTC()},
		Inventory{Provider: "inmemory", Time: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)})
	for _, inv := range invs {
		got, want, err, werr := encodeBoth(inv)
		if err != nil || werr != nil {
			t.Fatalf("%+v: %v, encoding/json's %v", inv, err, werr)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%+v:\n got %s\nwant %s", inv, got, want)
		}
	}
	for _, bad := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 25*3600))} {
		got, _, err, werr := encodeBoth(Inventory{Time: bad})
		if err == nil || werr == nil || err.Error() != werr.Error() {
			t.Errorf("time %v: %q, error %v; encoding/json's %v", bad, got, err, werr)
		}
	}
}

// FuzzEncodeInventory: any strings, numbers and time in a part come out as
// encoding/json writes them.
func FuzzEncodeInventory(f *testing.F) {
	f.Add("c-0001", "md-0", int64(1764302706123456789), 7, true)
	f.Add("<&>\u2028\xff\"\\", "", int64(-62135596800), -1, false)
	f.Add("", "\x00", int64(253402300800), 0, true)
	f.Fuzz(func(t *testing.T, s, u string, unix int64, n int, host bool) {
		inv := Inventory{Provider: s, Worker: u, HostBound: host, Report: fmt.Sprint(n), Part: n, Parts: -n, Request: u,
			Time: time.Unix(0, unix).In(time.FixedZone(u, n%100000)), Instances: []Instance{
				{Cluster: s, Machine: u, Deployment: s, Role: Role(u), Version: s, TemplateHash: u,
					Labels: map[string]string{s: u, u: s, "k": s}, Annotations: map[string]string{u: u},
					ProviderID: s, Addresses: []string{u, s}, Reason: u, Message: s},
				{Cluster: u, Machine: s},
			}}
		got, want, err, werr := encodeBoth(inv)
		if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) || !bytes.Equal(got, want) {
			t.Fatalf("%+v:\n got %s (%v)\nwant %s (%v)", inv, got, err, want, werr)
		}
	})
}
