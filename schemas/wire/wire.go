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
	// BucketRollouts holds the planner's recorded decisions: each
	// cluster's admission to a class revision and its pools' create
	// backoff, and each class's rollout.
	BucketRollouts = "gitfleet-rollouts"

	SubjectTasks      = "gitfleet.tasks"     // .<provider>.<cluster>.<machine>
	SubjectEvents     = "gitfleet.events"    // .<cluster>.<machine>
	SubjectHeartbeats = "gitfleet.heartbeat" // .<cluster>.<machine>
)

// TaskSubject is where a task for a machine is published when any worker
// of the provider may take it.
func TaskSubject(provider, cluster, machine string) string {
	return SubjectTasks + "." + provider + "." + cluster + "." + machine
}

// WorkerTaskSubject is where a task is published for one worker: the one
// that holds the machine, for providers whose machines live on one host.
func WorkerTaskSubject(provider, cluster, machine, worker string) string {
	return TaskSubject(provider, cluster, machine) + "." + worker
}

// Subject is where t is published: its worker's subject when it names one.
func (t *Task) Subject() string {
	if t.Worker != "" {
		return WorkerTaskSubject(t.Machine.Provider, t.Machine.Cluster, t.Machine.Name, t.Worker)
	}
	return TaskSubject(t.Machine.Provider, t.Machine.Cluster, t.Machine.Name)
}

// MsgID is the JetStream message ID of one attempt of a task: the same
// attempt published twice is stored once, a new attempt is a new message.
func (t *Task) MsgID() string {
	return fmt.Sprintf("%s#%d", t.ID, t.Attempt)
}

// ValidToken reports whether s can be one token of a NATS subject (a
// cluster, machine or worker name): not empty, no dots, wildcards or
// white space.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c == '.' || c == '*' || c == '>' || c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
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

// Reported reports whether workers may send phase p in an event.
func (p Phase) Reported() bool {
	switch p {
	case PhaseProvisioning, PhaseRunning, PhaseFailed, PhaseDeleting, PhaseDeleted:
		return true
	}
	return false
}

// For reports whether an event of phase p can be the outcome or progress
// of a task doing op.
func (p Phase) For(op Operation) bool {
	switch p {
	case PhaseFailed:
		return true
	case PhaseProvisioning, PhaseRunning:
		return op == OpCreate
	case PhaseDeleting, PhaseDeleted:
		return op == OpDelete
	}
	return false
}

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

// Task asks a provider worker to create or delete one machine. ID names
// the intent (one per machine and operation); Attempt counts its
// publications, and ID#Attempt is the JetStream message ID (MsgID), so the
// same attempt published twice is deduplicated and a retry is not.
//
// Revision is the revision of the machine's record in the gitfleet-machines
// bucket when the attempt was decided. Before it acts, a worker reads the
// record: a task whose record is gone, names another task or attempt, or
// is older than the task (a store that was lost and rebuilt) is stale —
// an older leader's or one a paused worker held — and is dropped. Orphan
// tasks (deleting a machine no record wants) are checked the other way:
// dropped when a record wants the machine after all.
type Task struct {
	APIVersion string    `json:"apiVersion"`
	ID         string    `json:"id"`
	Attempt    int       `json:"attempt,omitempty"`
	Revision   uint64    `json:"revision,omitempty"`
	Operation  Operation `json:"operation"`
	Machine    Machine   `json:"machine"`
	// Worker routes the task to one worker (WorkerTaskSubject); empty: any
	// worker of the provider.
	Worker string `json:"worker,omitempty"`
	// Orphan: a delete of a machine the provider has and no record wants.
	Orphan       bool   `json:"orphan,omitempty"`
	PlanID       string `json:"planID,omitempty"`
	SourceCommit string `json:"sourceCommit,omitempty"`
}

// Event reports what happened to a machine while a worker ran a task:
// Provisioning, Running or Failed for a create, Deleting, Deleted or Failed
// for a delete. It is published on EventSubject of the machine it names.
type Event struct {
	APIVersion string `json:"apiVersion"`
	TaskID     string `json:"taskID"`
	Attempt    int    `json:"attempt,omitempty"`
	// Worker is the worker that holds the machine, for providers whose
	// machines live on one host; empty otherwise.
	Worker     string    `json:"worker,omitempty"`
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
	case t.Orphan && t.Operation != OpDelete:
		return Task{}, fmt.Errorf("%w: task %s: only a delete can be an orphan task", ErrMalformed, t.ID)
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
	if !e.Phase.Reported() {
		return Event{}, fmt.Errorf("%w: event for %s/%s: unknown phase %q (want Provisioning, Running, Failed, Deleting or Deleted)", ErrMalformed, e.Cluster, e.Machine, e.Phase)
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
