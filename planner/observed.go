package planner

import (
	"time"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// ObservedMachine is one machine as the daemon knows it: from its own intent
// records (Pending), workers' events and heartbeats.
//
// In-flight work is read from Phase: a machine that is Pending, Provisioning
// or Deleting has a task in progress. The planner never asks for a second
// step on a machine in flight, and counts such machines in surge limits.
type ObservedMachine struct {
	Name       string    `json:"name"`
	Cluster    string    `json:"cluster"`
	Deployment string    `json:"deployment,omitempty"` // worker pool; "" for the control plane
	Role       wire.Role `json:"role"`
	Provider   string    `json:"provider"`
	Version    string    `json:"version"`
	// TemplateHash is the Pool.TemplateHash the machine was created from.
	TemplateHash string     `json:"templateHash"`
	Phase        wire.Phase `json:"phase"`
	Created      time.Time  `json:"created"`
	// Running is when the machine became Running; zero when unknown.
	Running time.Time `json:"running,omitzero"`
	// LastHeartbeat is the time of the newest heartbeat; zero if none yet.
	LastHeartbeat time.Time `json:"lastHeartbeat,omitzero"`
	// Healthy is what the newest heartbeat said.
	Healthy bool `json:"healthy"`
	// UnhealthySince is when the machine's heartbeats began to say it is
	// not healthy (its Ready condition False); zero while they do not.
	UnhealthySince time.Time         `json:"unhealthySince,omitzero"`
	Labels         map[string]string `json:"labels,omitempty"`
	// Message is what the provider said last, e.g. why the machine Failed.
	Message string `json:"message,omitempty"`
	// Reason is set when the machine is Failed for another cause than its
	// create task: the provider's inventory no longer has it
	// (MachineMissing) or reports it dead. Such a machine is replaced like
	// any Failed one, but it is not a create failure: its pool does not
	// back off.
	Reason string `json:"reason,omitempty"`
}

// Gone reports whether the machine's provider no longer runs it (Failed
// with a Reason from the inventory, not from its create). Removing it
// loses nothing: no quorum or maxUnhealthy short-circuit holds it back, as
// a MachineSet deletes a machine whose infrastructure is gone.
func (m *ObservedMachine) Gone() bool {
	return m.Phase == wire.PhaseFailed && m.Reason != ""
}

// InFlight reports whether a task for the machine is still in progress.
func (m *ObservedMachine) InFlight() bool {
	return m.Phase.InFlight()
}

// Ready reports whether the machine serves: Running, and its newest
// heartbeat, sent after it was created, said healthy. A heartbeat from before
// the machine's creation time never counts.
func (m *ObservedMachine) Ready() bool {
	return m.Phase == wire.PhaseRunning && m.Healthy && m.LastHeartbeat.After(m.Created)
}

// PoolName is the name NewName receives for a pool: the deployment name, or
// ControlPlanePool.
func PoolName(deployment string) string {
	if deployment == "" {
		return ControlPlanePool
	}
	return deployment
}

// ControlPlanePool is what NewName and messages call the control plane.
const ControlPlanePool = "control-plane"

// Machine returns the wire description of an observed machine (for delete
// tasks).
func (m *ObservedMachine) Machine() wire.Machine {
	return wire.Machine{Name: m.Name, Cluster: m.Cluster, Role: m.Role, Deployment: m.Deployment,
		Version: m.Version, Provider: m.Provider, TemplateHash: m.TemplateHash, Labels: m.Labels}
}
