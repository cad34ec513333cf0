package reconciler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
	"unique"

	"github.com/gitfleet/gitfleet/internal/jsonscan"
	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Record is one machine as stored in the gitfleet-machines bucket, under
// the key <cluster>.<machine>. It is the daemon's own format, separate from
// planner.ObservedMachine (the planner's input, built from it): it holds
// what a restarting leader must know — the intent, the task in progress and
// its attempt, what the provider reported — and nothing that changes every
// few seconds. Heartbeats stay in memory; only a change of health is
// recorded.
//
// Records are never changed in place: the next version is built on a copy
// (clone), saved with compare-and-set on the revision it replaces, and only
// then swapped into memory.
type Record struct {
	Name string `json:"name"`
	// Shape is shared by the records of a pool made in one pass, and by
	// the records read at start that have it alike: never changed in
	// place (reshape).
	*Shape
	// Init: the cluster's first control-plane machine, which initialises
	// it (kubeadm init); every other machine joins.
	Init bool `json:"init,omitempty"`
	// Heartbeats says the machine sends heartbeats (it sent one), so their
	// absence means something. Machines of providers without heartbeats
	// (inmemory) are judged by inventory alone.
	Heartbeats bool `json:"heartbeats,omitempty"`
	// NamedID says ProviderID holds only the head of the provider's ID
	// for the machine, whose tail is the machine's name (the inmemory
	// provider's inmemory://<cluster>/<name>): the head is shared by the
	// cluster's machines and the name is not kept twice. Read the ID with
	// providerID; set it with setProviderID. Never stored: a record's
	// JSON has the whole ID (MarshalJSON).
	NamedID bool `json:"-"`
	// Attempt counts the publications of TaskID: a task left unanswered
	// past the task timeout is published again with the next attempt,
	// under a new message ID, and a worker drops any attempt but the
	// record's. (Beside the booleans: a record is 8 bytes smaller.)
	Attempt int32 `json:"attempt,omitempty"`

	// Phase is where the machine is; the shape's Reason and Message say
	// why, when something went wrong.
	Phase   wire.Phase `json:"phase"`
	Created Stamp      `json:"created"`
	// Running is when the machine's create reached Running (for
	// minReadySeconds); zero before, and in records older than the field.
	Running Stamp `json:"running,omitzero"`
	// Joined is when the machine's bootstrap token was accepted by its
	// control plane (docs/bootstrap.md); zero before, and for machines
	// made without bootstrap data.
	Joined Stamp `json:"joined,omitzero"`

	// ProviderID is what the provider calls the machine, or its head
	// (NamedID): read it with providerID.
	ProviderID string `json:"providerID,omitempty"`
	// Addresses are the machine's, as its provider reported them; nil
	// for none, never an empty list (setAddresses). Most machines of a
	// large fleet have none: a pointer, not a slice, keeps a record 16
	// bytes smaller.
	Addresses *[]string `json:"addresses,omitempty"`
	// Worker is the worker that reported the machine last: for a provider
	// whose machines live on one host, the worker every task goes to.
	Worker string `json:"worker,omitempty"`

	// TaskID is the task in progress or last finished; Attempt, above, its
	// attempt.
	TaskID string `json:"taskID,omitempty"`
	// Published is when the attempt was published.
	Published Stamp `json:"published,omitzero"`

	// Health is the machine's health as last judged from its heartbeats;
	// recorded only when it changes.
	Health *Health `json:"health,omitempty"`
}

// Shape is what a machine's record has alike with the other machines of
// its pool that one planning pass made: the intent (pool, role, provider,
// version, template, labels, spec) and where it came from (commit, plan,
// cause). A pool's records share one, which saves most of a record's size
// (docs/reconciler.md, "Memory per machine"); a record whose shape
// changes gets a new one (reshape).
type Shape struct {
	Cluster      string            `json:"cluster"`
	Deployment   string            `json:"deployment,omitempty"` // worker pool; "" for the control plane
	Role         wire.Role         `json:"role"`
	Provider     string            `json:"provider"`
	Version      string            `json:"version"`
	TemplateHash string            `json:"templateHash"`
	Labels       map[string]string `json:"labels,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	Spec         json.RawMessage   `json:"spec,omitempty"`
	// FailureDomain is where the machine is placed: the machines of a
	// pool in one failure domain have it alike.
	FailureDomain string `json:"failureDomain,omitempty"`

	SourceCommit string `json:"sourceCommit,omitempty"`
	PlanID       string `json:"planID,omitempty"`
	// Cause is why the current task was decided, as the planner said it
	// (scale up md-0 from 2 to 3; remediate: no heartbeat for 31s …):
	// written to the status branch, so Git alone tells why a machine came
	// or went.
	Cause string `json:"cause,omitempty"`

	// Reason is a CamelCase word for why the machine is in its phase when
	// that is not the outcome of its task (MachineMissing); Message says
	// more, or what its provider said when its task failed. Most machines
	// have neither, so they are kept here rather than in every Record
	// (32 bytes a machine): a record that gets them gets a shape of its
	// own (setWhy).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// reshape gives r, a copy being built (clone), its own copy of its shape,
// changed by set: the shape r shared stays as it was.
func (r *Record) reshape(set func(*Shape)) {
	sh := *r.Shape
	set(&sh)
	r.Shape = &sh
}

// setWhy gives r, a copy being built (clone), reason and message, in a
// shape of its own when they differ from its shape's.
func (r *Record) setWhy(reason, message string) {
	if r.Reason != reason || r.Message != message {
		r.reshape(func(sh *Shape) { sh.Reason, sh.Message = reason, message })
	}
}

// equal reports whether s and o say the same.
func (s *Shape) equal(o *Shape) bool {
	return s.Cluster == o.Cluster && s.Deployment == o.Deployment && s.Role == o.Role &&
		s.Provider == o.Provider && s.Version == o.Version && s.TemplateHash == o.TemplateHash &&
		s.SourceCommit == o.SourceCommit && s.PlanID == o.PlanID && s.Cause == o.Cause &&
		s.FailureDomain == o.FailureDomain && s.Reason == o.Reason && s.Message == o.Message &&
		maps.Equal(s.Labels, o.Labels) && maps.Equal(s.Annotations, o.Annotations) &&
		bytes.Equal(s.Spec, o.Spec) && (s.Spec == nil) == (o.Spec == nil) &&
		(s.Labels == nil) == (o.Labels == nil) && (s.Annotations == nil) == (o.Annotations == nil)
}

// Health is a recorded health judgement, as Cluster API's Healthy
// condition: false with a reason since a time.
type Health struct {
	Healthy bool      `json:"healthy"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since"`
}

// Reasons the daemon records.
const (
	// ReasonMachineMissing: the machine's provider no longer has it.
	ReasonMachineMissing = "MachineMissing"
	// ReasonHeartbeatMissing: no heartbeat for the heartbeat timeout.
	ReasonHeartbeatMissing = "HeartbeatMissing"
	// ReasonNodeUnhealthy: the machine's own heartbeat says it is unhealthy.
	ReasonNodeUnhealthy = "NodeUnhealthy"
)

// storedRecord is a Record without its methods, for encoding/json.
type storedRecord Record

// MarshalJSON encodes r as stored: with its whole provider ID. The store
// calls storedJSON itself, which spares encoding/json's check and copy of
// what a MarshalJSON returns (more than half of a record's encoding).
func (r Record) MarshalJSON() ([]byte, error) { return r.storedJSON() }

// storedJSON is r's JSON as stored.
func (r *Record) storedJSON() ([]byte, error) {
	if !r.NamedID {
		return json.Marshal((*storedRecord)(r))
	}
	c := *r
	c.ProviderID, c.NamedID = r.providerID(), false
	return json.Marshal((*storedRecord)(&c))
}

// providerID is what the machine's provider calls it.
func (r *Record) providerID() string {
	if r.NamedID {
		return r.ProviderID + r.Name
	}
	return r.ProviderID
}

// hasProviderID reports whether id is r's provider ID, without making it.
func (r *Record) hasProviderID(id string) bool {
	if r.NamedID {
		return len(id) == len(r.ProviderID)+len(r.Name) && strings.HasPrefix(id, r.ProviderID) &&
			strings.HasSuffix(id, r.Name)
	}
	return id == r.ProviderID
}

// setProviderID gives r, a copy being built, the provider ID id. An ID
// that ends with "/" and the machine's name keeps only its head, one copy
// of which the machines with the same head (a cluster's, for inmemory)
// share: 48 bytes less a machine (docs/reconciler.md, "Memory per
// machine").
func (r *Record) setProviderID(id string) {
	head := len(id) - len(r.Name)
	if r.Name != "" && head > 1 && id[head-1] == '/' && id[head:] == r.Name {
		r.ProviderID, r.NamedID = unique.Make(id[:head]).Value(), true
		return
	}
	r.ProviderID, r.NamedID = id, false
}

// addresses are r's addresses: nil for none.
func (r *Record) addresses() []string {
	if r.Addresses == nil {
		return nil
	}
	return *r.Addresses
}

// setAddresses gives r, a copy being built, the addresses a, shared, not
// copied: none for an empty list.
func (r *Record) setAddresses(a []string) {
	if len(a) == 0 {
		r.Addresses = nil
		return
	}
	r.Addresses = &a
}

// key is the record's KV key.
func (r *Record) key() string { return recordKey(r.Cluster, r.Name) }

func recordKey(cluster, machine string) string { return wire.RecordKey(cluster, machine) }

// isRecordKey reports whether key is recordKey(cluster, machine) without
// making that string: a start checks every record it reads.
func isRecordKey(key, cluster, machine string) bool {
	return len(key) == len(cluster)+1+len(machine) && strings.HasPrefix(key, cluster) &&
		key[len(cluster)] == '.' && strings.HasSuffix(key, machine)
}

// clone returns a copy whose fields may be set without changing r.
func (r *Record) clone() *Record {
	c := *r
	// Labels, Spec and Addresses are shared, never changed in place: a
	// new value replaces them whole. The machines of a pool share one
	// labels map and one spec, which is most of a record's size.
	if r.Health != nil {
		h := *r.Health
		c.Health = &h
	}
	return &c
}

// InFlight reports whether a task for the machine is in progress.
func (r *Record) InFlight() bool {
	return r.Phase.InFlight()
}

// operation is what the record's task asks.
func (r *Record) operation() wire.Operation {
	if strings.HasPrefix(r.TaskID, string(wire.OpDelete)+".") {
		return wire.OpDelete
	}
	return wire.OpCreate
}

// wireMachine is the description a task carries.
func (r *Record) wireMachine() wire.Machine {
	return wire.Machine{Name: r.Name, Cluster: r.Cluster, Role: r.Role, Deployment: r.Deployment,
		Version: r.Version, Provider: r.Provider, Spec: r.Spec, FailureDomain: r.FailureDomain,
		TemplateHash: r.TemplateHash, Labels: r.Labels, Annotations: r.Annotations}
}

// task rebuilds the task the record says is in progress; rev is the
// record's revision in the bucket, which the worker checks.
func (r *Record) task(rev uint64) *wire.Task {
	return &wire.Task{ID: r.TaskID, Attempt: int(r.Attempt), Revision: rev, Operation: r.operation(),
		Machine: r.wireMachine(), Worker: r.Worker, PlanID: r.PlanID, SourceCommit: r.SourceCommit}
}

func decodeRecord(key string, data []byte) (*Record, error) { return decodeShared(key, data, nil) }

// decodeShared is decodeRecord sharing, with in (when not nil), what the
// machines of a pool have alike with the records in decoded before.
func decodeShared(key string, data []byte, in *interner) (*Record, error) {
	r := Record{Shape: in.blankShape()}
	if !fastDecodeRecord(data, &r, in) {
		r = Record{Shape: in.blankShape()}
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("machine record %s: %w", key, err)
		}
		r.Phase = r.Phase.Canonical()
		if in != nil {
			in.record(&r)
		}
	}
	if in != nil {
		r.Shape = in.shape(r.Shape)
	}
	if r.Name == "" || r.Cluster == "" || !isRecordKey(key, r.Cluster, r.Name) {
		return nil, fmt.Errorf("machine record %s: names another machine (%s/%s)", key, r.Cluster, r.Name)
	}
	r.shareName()
	r.setProviderID(r.ProviderID)
	r.setAddresses(r.addresses())
	return &r, nil
}

// taskID is deterministic per machine and operation; attempts of one task
// differ by their attempt number (wire.Task.MsgID).
func taskID(op wire.Operation, cluster, machine string) string {
	return strings.Join([]string{string(op), cluster, machine}, ".")
}

// setTask gives r, a copy being built, the task op of its machine.
func (r *Record) setTask(op wire.Operation) {
	r.TaskID = taskID(op, r.Cluster, r.Name)
	r.shareName()
}

// shareName makes r's name the tail of its task ID, which ends with it:
// one string for both, not two (a daemon holds a record for every machine
// of the fleet; docs/reconciler.md, "Memory per machine").
func (r *Record) shareName() {
	if n := len(r.TaskID) - len(r.Name); n > 0 && r.TaskID[n-1] == '.' && r.TaskID[n:] == r.Name {
		r.Name = r.TaskID[n:]
	}
}

// machine is a record in memory: the stored record, the revision it was
// stored at, and what the daemon keeps in memory only (heartbeats).
type machine struct {
	rec *Record
	rev uint64
	// beat is when the newest heartbeat arrived (lastHeartbeat); healthy
	// is what it said. None until the first heartbeat this leader heard.
	beat    beatTime
	healthy bool
	// listed marks the reports in the making that listed this machine
	// (partial.bit): what a report of 130,000 machines remembered of
	// each until its last part, in the room the struct had spare.
	listed uint32
}

// keep carries what only memory knows of cur (heartbeats, the reports
// that listed it) into m, which replaces it.
func (m *machine) keep(cur *machine) {
	m.beat, m.healthy, m.listed = cur.beat, cur.healthy, cur.listed
}

// lastHeartbeat is when m's newest heartbeat arrived; zero for none.
func (m *machine) lastHeartbeat() time.Time { return m.beat.time() }

// beatTime is an instant in 8 bytes (a time.Time takes 24, and a daemon
// keeps one a machine): its distance from beatEpoch, this process's start.
// A time read from the clock keeps its monotonic reading through it, so
// how long ago a heartbeat came does not move with a step of the wall
// clock. The zero beatTime is none (the zero time.Time); instants more
// than 292 years from the process's start are not kept apart.
type beatTime int64

// beatEpoch is what beatTimes count from.
var beatEpoch = time.Now()

// assumedBeat is the heartbeat a machine is taken to have sent when the
// daemon learns it runs by other means (its Running event, a new leader's
// load, an adoption): half the shortest interval before now, so that the
// node's next real heartbeat, however soon it comes, is not refused as
// one sent too fast after it (a spurious "rate" refusal, logged as a
// flood). Timeouts are seconds: half of MinHeartbeatInterval is nothing
// to them. It is never before the machine's creation (created): a
// heartbeat from before it does not make it ready (planner).
func assumedBeat(now, created time.Time) beatTime {
	at := now.Add(-wire.MinHeartbeatInterval / 2)
	if !at.After(created) {
		at = created.Add(time.Nanosecond)
		if at.After(now) {
			at = now
		}
	}
	return beatOf(at)
}

// beatOf returns t as a beatTime.
func beatOf(t time.Time) beatTime {
	if t.IsZero() {
		return 0
	}
	if d := beatTime(t.Sub(beatEpoch)); d != 0 {
		return d
	}
	return 1 // the epoch itself: a nanosecond after it, for 0 is none
}

// time returns b as a time.Time: the zero time for none.
func (b beatTime) time() time.Time {
	if b == 0 {
		return time.Time{}
	}
	return beatEpoch.Add(time.Duration(b))
}

// observed is the machine as the planner sees it. Health comes from the
// heartbeats this leader heard; a machine recorded unhealthy stays so until
// a heartbeat says otherwise.
func (m *machine) observed() planner.ObservedMachine {
	r := m.rec
	o := planner.ObservedMachine{Name: r.Name, Cluster: r.Cluster, Deployment: r.Deployment, Role: r.Role,
		Provider: r.Provider, Version: r.Version, TemplateHash: r.TemplateHash, Phase: r.Phase,
		Created: r.Created.Time(), Running: r.Running.Time(), LastHeartbeat: m.lastHeartbeat(), Healthy: m.healthy, Labels: r.Labels, Message: r.Message,
		Reason: r.Reason}
	if r.Health != nil && !r.Health.Healthy {
		o.Healthy = false // its heartbeats stopped: not ready, even unchecked
		if r.Health.Reason == ReasonNodeUnhealthy {
			o.UnhealthySince = r.Health.Since
		}
	}
	return o
}

// interner makes the records read at start share what the machines of a
// pool or a plan have alike — labels, spec, version, hash, commit, cause —
// as the records the planner makes do, instead of a copy per machine.
type interner struct {
	labels map[string]map[string]string
	specs  map[string]json.RawMessage
	shapes map[shapeKey]*Shape
	// scratch is the shape a record is decoded into; shape copies it
	// only when no shape decoded before is the same.
	scratch Shape
	// Of the fast decoders (fastDecodeRecord, fastDecodeInventory):
	// strings, and labels and annotations by their encoding.
	scan *jsonscan.Interner
}

func newInterner() *interner {
	return &interner{labels: map[string]map[string]string{}, specs: map[string]json.RawMessage{},
		shapes: map[shapeKey]*Shape{}, scan: jsonscan.NewInterner()}
}

// scanner is what the fast decoders share through: nil for no interner.
func (in *interner) scanner() *jsonscan.Interner {
	if in == nil {
		return nil
	}
	return in.scan
}

// shapeKey finds a shape among those decoded before: its strings, and its
// labels, annotations and spec by identity, which the interner has made
// one for records that have them alike.
type shapeKey struct {
	strings                   [12]string
	labels, annotations, spec uintptr
	specLen                   int
}

// blankShape is the shape to decode a record into: the interner's
// scratch, or a new one without an interner.
func (in *interner) blankShape() *Shape {
	if in == nil {
		return &Shape{}
	}
	in.scratch = Shape{}
	return &in.scratch
}

// shape returns the shape decoded before that is the same as sh, or sh
// (a copy of it, when sh is the scratch).
func (in *interner) shape(sh *Shape) *Shape {
	k := shapeKey{strings: [...]string{sh.Cluster, sh.Deployment, string(sh.Role), sh.Provider, sh.Version,
		sh.TemplateHash, sh.SourceCommit, sh.PlanID, sh.Cause, sh.FailureDomain, sh.Reason, sh.Message},
		labels: reflect.ValueOf(sh.Labels).Pointer(), annotations: reflect.ValueOf(sh.Annotations).Pointer(),
		spec: reflect.ValueOf(sh.Spec).Pointer(), specLen: len(sh.Spec)}
	if s, ok := in.shapes[k]; ok {
		return s
	}
	if sh == &in.scratch {
		c := *sh
		sh = &c
	}
	in.shapes[k] = sh
	return sh
}

func (in *interner) record(r *Record) {
	for _, s := range []*string{&r.Cluster, &r.Deployment, &r.Provider, &r.Version, &r.TemplateHash,
		&r.FailureDomain, &r.Reason, &r.Message, &r.Worker, &r.SourceCommit, &r.PlanID, &r.Cause} {
		*s = unique.Make(*s).Value()
	}
	if r.Spec != nil {
		if s, ok := in.specs[string(r.Spec)]; ok {
			r.Spec = s
		} else {
			in.specs[string(r.Spec)] = r.Spec
		}
	}
	if r.Labels != nil {
		keys := slices.Sorted(maps.Keys(r.Labels))
		var b strings.Builder
		for _, k := range keys {
			b.WriteString(k)
			b.WriteByte(0)
			b.WriteString(r.Labels[k])
			b.WriteByte(0)
		}
		if l, ok := in.labels[b.String()]; ok {
			r.Labels = l
		} else {
			in.labels[b.String()] = r.Labels
		}
	}
}
