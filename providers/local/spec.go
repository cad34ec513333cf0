package local

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Spec is a machine's local spec.
type Spec struct {
	CPUs              int                 `json:"cpus,omitempty"`
	Memory            string              `json:"memory,omitempty"` // e.g. "512Mi"
	HeartbeatInterval *providers.Duration `json:"heartbeatInterval,omitempty"`
	StartupDelay      *providers.Duration `json:"startupDelay,omitempty"` // the node boots this long before it is healthy
}

// DefaultHeartbeatInterval is how often a node reports unless its spec says.
const DefaultHeartbeatInterval = wire.DefaultHeartbeatInterval

var quantity = regexp.MustCompile(`^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$`)

func decodeSpec(m wire.Machine) (Spec, error) {
	var s Spec
	if err := providers.DecodeSpec(Name, m.Spec, &s); err != nil {
		return Spec{}, err
	}
	if s.CPUs < 0 {
		return Spec{}, providers.Permanent(fmt.Errorf("local: machine spec: cpus %d must be at least 1", s.CPUs))
	}
	if s.Memory != "" && !quantity.MatchString(s.Memory) {
		return Spec{}, providers.Permanent(fmt.Errorf("local: machine spec: memory %q is not a quantity like \"512Mi\" or \"2Gi\"", s.Memory))
	}
	if s.HeartbeatInterval != nil && time.Duration(*s.HeartbeatInterval) < wire.MinHeartbeatInterval {
		return Spec{}, providers.Permanent(fmt.Errorf("local: machine spec: heartbeatInterval %v is shorter than %v, like \"2s\"", time.Duration(*s.HeartbeatInterval), wire.MinHeartbeatInterval))
	}
	return s, nil
}

func (s Spec) heartbeat() time.Duration {
	if s.HeartbeatInterval == nil {
		return DefaultHeartbeatInterval
	}
	return time.Duration(*s.HeartbeatInterval)
}

func (s Spec) startupDelay() time.Duration {
	if s.StartupDelay == nil {
		return 0
	}
	return time.Duration(*s.StartupDelay)
}

func machineJSON(m wire.Machine) string {
	b, _ := json.Marshal(m)
	return string(b)
}
