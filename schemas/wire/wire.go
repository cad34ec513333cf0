// Package wire holds the messages that cross NATS between the reconciler and
// provider workers: tasks, events and heartbeats. Both sides import this
// package and nothing else of each other. Every message is JSON with an
// apiVersion; Decode* reject anything else with an error that says what was
// wrong, so a malformed message is terminated instead of crashing a worker.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// APIVersion of every message this package writes and accepts.
const APIVersion = "gitfleet.io/wire/v1"

// Subject roots, streams and buckets (docs/providers.md).
const (
	StreamTasks    = "GITFLEET_TASKS"
	StreamEvents   = "GITFLEET_EVENTS"
	BucketMachines = "gitfleet-machines"
	BucketLeader   = "gitfleet-leader"

	SubjectTasks      = "gitfleet.tasks"     // .<provider>.<cluster>.<machine>
	SubjectEvents     = "gitfleet.events"    // .<cluster>.<machine>
	SubjectHeartbeats = "gitfleet.heartbeat" // .<cluster>.<machine>
)

// TaskSubject is where a task for a machine is published.
func TaskSubject(provider, cluster, machine string) string {
	return SubjectTasks + "." + provider + "." + cluster + "." + machine
}

// EventSubject is where events about a machine are published.
func EventSubject(cluster, machine string) string {
	return SubjectEvents + "." + cluster + "." + machine
}

// HeartbeatSubject is where a machine's heartbeats are published.
func HeartbeatSubject(cluster, machine string) string {
	return SubjectHeartbeats + "." + cluster + "." + machine
}

// Operation is what a task asks of a provider.
type Operation string

// Operations.
const (
	OpCreate Operation = "create"
	OpDelete Operation = "delete"
)

// Role of a machine in its cluster.
type Role string

// Roles.
const (
	RoleControlPlane Role = "control-plane"
	RoleWorker       Role = "worker"
)

// Phase of a machine as workers report it. Pending is the reconciler's own
// "intent recorded, task not yet confirmed" phase; workers never send it.
type Phase string

// Phases.
const (
	PhasePending      Phase = "Pending"
	PhaseProvisioning Phase = "Provisioning"
	PhaseRunning      Phase = "Running"
	PhaseFailed       Phase = "Failed"
	PhaseDeleting     Phase = "Deleting"
	PhaseDeleted      Phase = "Deleted"
)

// Machine is everything a provider needs to make one machine.
type Machine struct {
	Name          string            `json:"name"`
	Cluster       string            `json:"cluster"`
	Role          Role              `json:"role"`
	Deployment    string            `json:"deployment,omitempty"` // worker pool; empty for control plane
	Version       string            `json:"version"`              // Kubernetes version
	Provider      string            `json:"provider"`
	Spec          json.RawMessage   `json:"spec,omitempty"` // provider-specific, validated by its schema
	FailureDomain string            `json:"failureDomain,omitempty"`
	TemplateHash  string            `json:"templateHash,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
}

// Task asks a provider worker to create or delete one machine. ID is also the
// JetStream message ID, so publishing the same task twice is deduplicated.
type Task struct {
	APIVersion   string    `json:"apiVersion"`
	ID           string    `json:"id"`
	Operation    Operation `json:"operation"`
	Machine      Machine   `json:"machine"`
	PlanID       string    `json:"planID,omitempty"`
	SourceCommit string    `json:"sourceCommit,omitempty"`
}

// Event reports what happened to a machine.
type Event struct {
	APIVersion string    `json:"apiVersion"`
	TaskID     string    `json:"taskID,omitempty"`
	Cluster    string    `json:"cluster"`
	Machine    string    `json:"machine"`
	Phase      Phase     `json:"phase"`
	Version    string    `json:"version,omitempty"`
	ProviderID string    `json:"providerID,omitempty"`
	Addresses  []string  `json:"addresses,omitempty"`
	Message    string    `json:"message,omitempty"`
	Time       time.Time `json:"time"`
}

// Heartbeat is a running machine saying it is alive.
type Heartbeat struct {
	APIVersion string    `json:"apiVersion"`
	Cluster    string    `json:"cluster"`
	Machine    string    `json:"machine"`
	Version    string    `json:"version"`
	Healthy    bool      `json:"healthy"`
	Message    string    `json:"message,omitempty"`
	Time       time.Time `json:"time"`
}

// ErrMalformed is wrapped by every decoding error: the message can never be
// processed and must be terminated, not retried.
var ErrMalformed = errors.New("malformed message")

type header struct {
	APIVersion *string `json:"apiVersion"`
}

func decode(data []byte, v any) error {
	var h header
	if err := json.Unmarshal(data, &h); err != nil {
		return fmt.Errorf("%w: not JSON: %v", ErrMalformed, err)
	}
	if h.APIVersion == nil {
		return fmt.Errorf("%w: no apiVersion (want %q)", ErrMalformed, APIVersion)
	}
	if *h.APIVersion != APIVersion {
		return fmt.Errorf("%w: unknown apiVersion %q (want %q)", ErrMalformed, *h.APIVersion, APIVersion)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// DecodeTask parses and checks a task.
func DecodeTask(data []byte) (Task, error) {
	var t Task
	if err := decode(data, &t); err != nil {
		return Task{}, err
	}
	switch {
	case t.ID == "":
		return Task{}, fmt.Errorf("%w: task has no id", ErrMalformed)
	case t.Operation != OpCreate && t.Operation != OpDelete:
		return Task{}, fmt.Errorf("%w: task %s: unknown operation %q (want create or delete)", ErrMalformed, t.ID, t.Operation)
	case t.Machine.Name == "" || t.Machine.Cluster == "":
		return Task{}, fmt.Errorf("%w: task %s: machine name and cluster are required", ErrMalformed, t.ID)
	}
	return t, nil
}

// DecodeEvent parses and checks an event.
func DecodeEvent(data []byte) (Event, error) {
	var e Event
	if err := decode(data, &e); err != nil {
		return Event{}, err
	}
	if e.Machine == "" || e.Cluster == "" || e.Phase == "" {
		return Event{}, fmt.Errorf("%w: event needs cluster, machine and phase", ErrMalformed)
	}
	return e, nil
}

// DecodeHeartbeat parses and checks a heartbeat.
func DecodeHeartbeat(data []byte) (Heartbeat, error) {
	var h Heartbeat
	if err := decode(data, &h); err != nil {
		return Heartbeat{}, err
	}
	if h.Machine == "" || h.Cluster == "" {
		return Heartbeat{}, fmt.Errorf("%w: heartbeat needs cluster and machine", ErrMalformed)
	}
	return h, nil
}

// Encode marshals a message, filling in the apiVersion.
func Encode(v any) ([]byte, error) {
	switch m := v.(type) {
	case *Task:
		m.APIVersion = APIVersion
	case *Event:
		m.APIVersion = APIVersion
	case *Heartbeat:
		m.APIVersion = APIVersion
	default:
		return nil, fmt.Errorf("wire: cannot encode %T", v)
	}
	return json.Marshal(v)
}
