package local

import (
	"encoding/json"
	"testing"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

func TestSpec(t *testing.T) {
	for _, good := range []string{`{}`, `{"heartbeatInterval": "100ms", "cpus": 1}`} {
		if _, err := decodeSpec(wire.Machine{Spec: json.RawMessage(good)}); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
	for _, bad := range []string{`{"heartbeatInterval": "0s"}`, `{"heartbeatInterval": "99ms"}`, `{"cpus": -1}`, `{"memory": "512MB"}`, `{"disk": "1Gi"}`} {
		if _, err := decodeSpec(wire.Machine{Spec: json.RawMessage(bad)}); !providers.IsPermanent(err) {
			t.Errorf("%s: %v; want a permanent error", bad, err)
		}
	}
}
