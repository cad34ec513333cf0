package reconciler

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Record is one machine in the gitfleet-machines bucket, under the key
// <cluster>.<machine>. It is written before a task is published (intent
// before action) and updated by workers' events. Heartbeats are kept in
// memory only: writing every heartbeat would cost a KV write per machine
// every few seconds, and a new leader simply waits one unhealthyTimeout for
// fresh ones before it judges a machine.
type Record struct {
	planner.ObservedMachine
	Spec          json.RawMessage `json:"spec,omitempty"`
	FailureDomain string          `json:"failureDomain,omitempty"`
	ProviderID    string          `json:"providerID,omitempty"`
	Addresses     []string        `json:"addresses,omitempty"`
	Message       string          `json:"message,omitempty"`
	// TaskID is the task in progress or last finished; events about other
	// tasks only update what they know (provider ID, addresses).
	TaskID string `json:"taskID,omitempty"`
	// Published is when TaskID was last published; a task left unanswered
	// past the task timeout is published again under the same ID.
	Published    time.Time `json:"published,omitzero"`
	SourceCommit string    `json:"sourceCommit,omitempty"`
	PlanID       string    `json:"planID,omitempty"`
}

// key is the record's KV key.
func (r *Record) key() string { return recordKey(r.Cluster, r.Name) }

func recordKey(cluster, machine string) string { return cluster + "." + machine }

// wireMachine is the description a task carries.
func (r *Record) wireMachine() wire.Machine {
	m := r.Machine()
	m.Spec = r.Spec
	m.FailureDomain = r.FailureDomain
	return m
}

// task rebuilds the task the record says is in progress.
func (r *Record) task() *wire.Task {
	op := wire.OpCreate
	if r.Phase == wire.PhaseDeleting {
		op = wire.OpDelete
	}
	return &wire.Task{ID: r.TaskID, Operation: op, Machine: r.wireMachine(), PlanID: r.PlanID, SourceCommit: r.SourceCommit}
}

func decodeRecord(key string, data []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("machine record %s: %w", key, err)
	}
	if r.Name == "" || r.Cluster == "" || recordKey(r.Cluster, r.Name) != key {
		return nil, fmt.Errorf("machine record %s: names another machine (%s/%s)", key, r.Cluster, r.Name)
	}
	return &r, nil
}

// taskID is deterministic per machine and operation, so re-publishing the
// same intent is deduplicated by JetStream and a machine name is never
// reused (names carry a random suffix).
func taskID(op wire.Operation, cluster, machine string) string {
	return strings.Join([]string{string(op), cluster, machine}, ".")
}
