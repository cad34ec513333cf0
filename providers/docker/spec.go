package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Spec is a docker machine's spec (schemas/cue/providers/docker.cue).
type Spec struct {
	CPUs              float64             `json:"cpus,omitempty"`   // CPU limit, e.g. 1.5
	Memory            string              `json:"memory,omitempty"` // memory limit, e.g. "512Mi"
	HeartbeatInterval *providers.Duration `json:"heartbeatInterval,omitempty"`
	StartupDelay      *providers.Duration `json:"startupDelay,omitempty"`
}

var memoryRE = regexp.MustCompile(`^([0-9]+)(Mi|Gi)$`)

func decodeSpec(m wire.Machine) (Spec, error) {
	var s Spec
	if err := providers.DecodeSpec(Name, m.Spec, &s); err != nil {
		return Spec{}, err
	}
	if s.CPUs < 0 {
		return Spec{}, providers.Permanent(fmt.Errorf("docker: machine spec: cpus %v must be more than 0", s.CPUs))
	}
	if s.Memory != "" && !memoryRE.MatchString(s.Memory) {
		return Spec{}, providers.Permanent(fmt.Errorf("docker: machine spec: memory %q is not a size like \"512Mi\" or \"2Gi\"", s.Memory))
	}
	if s.HeartbeatInterval != nil && time.Duration(*s.HeartbeatInterval) < wire.MinHeartbeatInterval {
		return Spec{}, providers.Permanent(fmt.Errorf("docker: machine spec: heartbeatInterval %v is shorter than %v, like \"2s\"", time.Duration(*s.HeartbeatInterval), wire.MinHeartbeatInterval))
	}
	return s, nil
}

// memoryBytes is the memory limit in bytes (0: none).
func (s Spec) memoryBytes() int64 {
	g := memoryRE.FindStringSubmatch(s.Memory)
	if g == nil {
		return 0
	}
	n, _ := strconv.ParseInt(g[1], 10, 64)
	if g[2] == "Gi" {
		return n << 30
	}
	return n << 20
}

func (s Spec) heartbeat() time.Duration {
	if s.HeartbeatInterval == nil {
		return wire.DefaultHeartbeatInterval
	}
	return time.Duration(*s.HeartbeatInterval)
}

func (s Spec) startupDelay() time.Duration {
	if s.StartupDelay == nil {
		return 0
	}
	return time.Duration(*s.StartupDelay)
}

// OwnerOf is the owner label of the provider whose seed folder is seedDir
// (absolute).
func OwnerOf(seedDir string) string { return ownerOf(seedDir) }

func ownerOf(seedDir string) string {
	sum := sha256.Sum256([]byte(seedDir))
	return hex.EncodeToString(sum[:6])
}
