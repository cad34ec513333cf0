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
	"strings"
	"time"
	"unicode/utf8"
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
	// BucketPKI holds each cluster's CAs and its machines' bootstrap
	// tokens, sealed (package pki); only the daemon may read it.
	BucketPKI = "gitfleet-pki"
	// BucketInmemory is the inmemory provider's cloud (its machines),
	// which its workers read and write. The daemon makes it, and only
	// the daemon may change its stream: a worker that could would make it
	// republish what it writes there on any subject, in any name.
	BucketInmemory = "gitfleet-inmemory"

	SubjectTasks      = "gitfleet.tasks"     // .<provider>.<cluster>.<machine>
	SubjectEvents     = "gitfleet.events"    // .<cluster>.from.<credential>
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

// MaxWorkerID is the longest worker identity.
const MaxWorkerID = 128

// ValidWorker reports whether id can be a worker's identity: letters,
// digits, '-' and '_', at most MaxWorkerID of them. A task for a machine a
// worker holds is published on a subject that ends with it
// (WorkerTaskSubject), so an identity with a dot, a wildcard or thousands
// of characters would route the machine's tasks to no worker, or make
// their subject too long for NATS.
func ValidWorker(id string) bool {
	if id == "" || len(id) > MaxWorkerID {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// MaxName is the longest provider, cluster or machine name a message may
// carry: a DNS-1123 subdomain's length, far above what validation lets a
// fleet name a cluster (machine names are at most 63 characters).
const MaxName = 253

// ValidName reports whether s can be a provider, cluster or machine name
// in a task's subject: one token (ValidToken) of at most MaxName bytes.
func ValidName(s string) bool { return len(s) <= MaxName && ValidToken(s) }

// MaxSubject is the longest subject a task is published on: NATS closes
// a connection that sends a message whose control line (the subject, its
// reply subject and sizes) passes 4096 bytes, and a closed connection
// does not come back. Provider, cluster, machine and worker names are far
// shorter.
const MaxSubject = 1024

// EventSubject is where worker publishes events about cluster's machines
// (worker: the publishing worker's identity, whether or not its events
// name it):
// gitfleet.events.<cluster>.from.<credential>, where credential is
// WorkerCredential(worker). One subject a cluster and credential, not a
// machine, because the event stream keeps an entry for each subject it
// holds for as long as it keeps the subject's last event (a day): a
// subject a machine cost a daemon ~90 bytes a machine (docs/reconciler.md,
// "Memory per machine"). The credential is in the subject so that NATS,
// not the leader's trust, ties an event to its sender: a worker's
// credentials may publish on their own name's subjects only
// (docs/operations.md, "Who may do what"), and the leader takes an event
// only when its worker belongs to the subject's credential.
func EventSubject(cluster, worker string) string {
	return SubjectEvents + "." + cluster + ".from." + WorkerCredential(worker)
}

// EventPublishedFor reports whether an event of worker about cluster's
// machine may have been published on subject: EventSubject(cluster,
// worker) (any credential's when the event names no worker), or one of the subjects earlier workers published on — the
// cluster's own (gitfleet.events.<cluster>) or the machine's
// (gitfleet.events.<cluster>.<machine>) — so that a daemon upgraded first
// still takes the events of workers not yet upgraded (docs/operations.md,
// "Upgrading gitfleet"). No worker's credentials may publish on those two
// since workers have credentials of their own; only the daemon's, or a
// server without authentication, can.
func EventPublishedFor(subject, cluster, machine, worker string) bool {
	rest, ok := strings.CutPrefix(subject, SubjectEvents+".")
	if !ok {
		return false
	}
	rest, ok = strings.CutPrefix(rest, cluster)
	if !ok {
		return false
	}
	if cred, ok := strings.CutPrefix(rest, ".from."); ok {
		// An event of a provider whose machines no worker holds names
		// none: it came from some worker's subject, which is all there
		// is to check.
		return ValidCredential(cred) && (worker == "" || cred == WorkerCredential(worker))
	}
	return rest == "" || rest == "."+machine
}

// WorkerCredential is the name of the NATS credentials a worker whose
// identity is id runs with: id up to its first '_', or id itself without
// one. `gitfleet nats-creds --worker NAME` makes credentials for the
// workers NAME and NAME_<anything> (so replicas of one deployment can
// share them and keep identities of their own); a credential's name has
// no '_'.
func WorkerCredential(id string) string {
	cred, _, _ := strings.Cut(id, "_")
	return cred
}

// ValidCredential reports whether name can name a worker's credentials:
// letters, digits and '-', at most MaxWorkerID of them (a worker whose
// identity has no '_' runs with credentials of its own name).
func ValidCredential(name string) bool {
	return ValidWorker(name) && !strings.Contains(name, "_")
}

// WorkerInboxPrefix is the inbox the workers of credential receive replies
// on: the only inbox their credentials let them subscribe to, so a worker
// hears no other's replies, nor the daemon's.
func WorkerInboxPrefix(credential string) string {
	return "_INBOX_worker." + credential
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

// Canonical is p as its constant, whose bytes every copy shares: a phase
// decoded from a message is a string of its own, and a daemon keeps one
// for every machine. A phase that is none of the constants is p.
func (p Phase) Canonical() Phase {
	for _, c := range [...]Phase{PhaseRunning, PhasePending, PhaseProvisioning, PhaseFailed, PhaseDeleting, PhaseDeleted} {
		if p == c {
			return c
		}
	}
	return p
}

// Reported reports whether workers may send phase p in an event.
func (p Phase) Reported() bool {
	switch p {
	case PhaseProvisioning, PhaseRunning, PhaseFailed, PhaseDeleting, PhaseDeleted:
		return true
	}
	return false
}

// InFlight reports whether a machine in phase p has a task in progress
// (Task.Stale finds no task current otherwise).
func (p Phase) InFlight() bool {
	switch p {
	case PhasePending, PhaseProvisioning, PhaseDeleting:
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
	// Annotations are the user's, from the class's and cluster's metadata.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Bootstrap is the machine's bootstrap data (cloud-init user-data,
	// docs/bootstrap.md), opened by the worker from Task.Bootstrap. Never
	// encoded: it holds the machine's token and, for a cluster's first
	// control plane, the cluster's CA keys.
	Bootstrap []byte `json:"-"`
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
	// Bootstrap is a create's bootstrap data sealed (AES-256-GCM, bound to
	// the task ID) under the daemon's secrets key; workers open it with
	// the same key (--secrets-key-file).
	Bootstrap []byte `json:"bootstrap,omitempty"`
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

// MinHeartbeatInterval is the shortest interval a machine's spec may ask
// it to send heartbeats at: each is one message for the leader, so "1ms"
// on a thousand machines would be a million a second. Validation refuses
// shorter ones; providers refuse them at create too.
const MinHeartbeatInterval = 100 * time.Millisecond

// DefaultHeartbeatInterval is how often a machine of a provider that sends
// heartbeats reports when its spec names no heartbeatInterval.
const DefaultHeartbeatInterval = 2 * time.Second

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

// versioned is a message of this package: it names its apiVersion.
type versioned interface{ version() string }

func (t *Task) version() string             { return t.APIVersion }
func (e *Event) version() string            { return e.APIVersion }
func (h *Heartbeat) version() string        { return h.APIVersion }
func (r *InventoryRequest) version() string { return r.APIVersion }
func (i *Inventory) version() string        { return i.APIVersion }
func (r *JoinReview) version() string       { return r.APIVersion }
func (v *JoinVerdict) version() string      { return v.APIVersion }

// decode reads a message into v. A good one is read once; only one that
// fails is read again, for the reason a person wants first: not JSON, no
// or another apiVersion, then the shape (reading the header apart had
// been half the cost of an inventory part: BenchmarkDecodeInventory).
func decode(data []byte, v versioned) error {
	if err := json.Unmarshal(data, v); err == nil && v.version() == APIVersion {
		return nil
	}
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

// What an event carries at most. A provider's message (its error, say) is
// cut at MaxEventMessage, by the worker that sends it and again by the
// leader, since any holder of a worker's credentials may send events: a
// message of 64 KiB, recorded, grew a cluster's status file by as much at
// every event. A provider ID, version or address longer than any provider
// writes, or more addresses than a machine has, make the event malformed:
// cut, they would name another machine or version.
const (
	MaxEventMessage = 8 << 10
	MaxProviderID   = 1 << 10
	MaxVersion      = 256
	MaxAddress      = 256
	MaxAddresses    = 64
)

// checkReported checks what a provider says of a machine it made — its
// provider ID, version and addresses — against what any provider writes,
// as an event and an inventory carry it.
func checkReported(providerID, version string, addresses []string) error {
	if len(providerID) > MaxProviderID || len(version) > MaxVersion || len(addresses) > MaxAddresses {
		return fmt.Errorf("a providerID of %d bytes (at most %d), a version of %d bytes (at most %d) or %d addresses (at most %d)",
			len(providerID), MaxProviderID, len(version), MaxVersion, len(addresses), MaxAddresses)
	}
	for _, a := range addresses {
		if len(a) > MaxAddress {
			return fmt.Errorf("an address of %d bytes (at most %d)", len(a), MaxAddress)
		}
	}
	return nil
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
	if e.Worker != "" && !ValidWorker(e.Worker) {
		// Recorded, it would be where the machine's next task goes.
		return Event{}, fmt.Errorf("%w: event for %s/%s: worker %q is no worker identity (letters, digits, '-' and '_', at most %d)",
			ErrMalformed, e.Cluster, e.Machine, Cut(e.Worker, 64), MaxWorkerID)
	}
	if err := checkReported(e.ProviderID, e.Version, e.Addresses); err != nil {
		return Event{}, fmt.Errorf("%w: event for %s/%s: %v", ErrMalformed, e.Cluster, e.Machine, err)
	}
	e.Message = Cut(e.Message, MaxEventMessage)
	e.Phase = e.Phase.Canonical()
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
	case *Inventory:
		m.APIVersion = APIVersion
		if b, ok := appendInventory(make([]byte, 0, 256+320*len(m.Instances)), m); ok {
			return b, nil
		}
	case *InventoryRequest:
		m.APIVersion = APIVersion
	case *JoinReview:
		m.APIVersion = APIVersion
	case *JoinVerdict:
		m.APIVersion = APIVersion
	default:
		return nil, fmt.Errorf("wire: cannot encode %T", v)
	}
	return json.Marshal(v)
}

// RecordKey is the key of a machine's record in BucketMachines.
func RecordKey(cluster, machine string) string { return cluster + "." + machine }

// TaskRecord is the part of a machine's record in BucketMachines that
// workers read before they act on a task (Task.Stale). The reconciler owns
// the record; these fields are the contract.
type TaskRecord struct {
	TaskID  string `json:"taskID"`
	Attempt int    `json:"attempt,omitempty"`
	Phase   Phase  `json:"phase"`
	// Worker holds the machine, for providers whose machines live on one
	// host.
	Worker string `json:"worker,omitempty"`
}

// Stale says why t must not be carried out, given the machine's record
// (nil when there is none) and the record's revision; "" when t is the
// record's current work. A task is stale when its machine has no record,
// the record is on another task or attempt, is older than the task (the
// store was lost and rebuilt), or its task already finished. An orphan
// task is stale when a record wants the machine on this worker.
func (t *Task) Stale(rec *TaskRecord, rev uint64) string {
	if t.Orphan {
		if rec == nil || (rec.Worker != "" && t.Worker != "" && rec.Worker != t.Worker) {
			return ""
		}
		return "a record wants the machine: it is no orphan"
	}
	switch {
	case rec == nil:
		return "the machine has no record (deleted, or never recorded)"
	case rec.TaskID != t.ID:
		return fmt.Sprintf("the machine's record is on task %s", rec.TaskID)
	case rec.Attempt != t.Attempt:
		return fmt.Sprintf("the machine's record is on attempt %d of the task, not %d", rec.Attempt, t.Attempt)
	case rev < t.Revision:
		return fmt.Sprintf("the machine's record (revision %d) is older than the task (revision %d): the store was rebuilt", rev, t.Revision)
	}
	inFlight := rec.Phase == PhaseDeleting
	if t.Operation == OpCreate {
		inFlight = rec.Phase == PhasePending || rec.Phase == PhaseProvisioning
	}
	if !inFlight {
		return fmt.Sprintf("the task is done: the machine is %s", rec.Phase)
	}
	return ""
}

// Inventory subjects: workers send their provider's inventory on
// InventorySubject (plain NATS, not stored) when they start, every
// inventory interval, and when a leader publishes on
// SubjectInventoryRequest. Each part is a request: the leader answers it
// (an empty message) once it has taken the part, and the worker sends the
// next part then, so a report is never more than a part ahead of the
// leader.
const (
	SubjectInventory        = "gitfleet.inventory" // .<provider>.<credential>.<worker>
	SubjectInventoryRequest = "gitfleet.inventory-request"
)

// InventorySubject is where a worker publishes its inventory:
// gitfleet.inventory.<provider>.<credential>.<worker>, credential being
// WorkerCredential(worker), which a worker's credentials may publish on
// for their own name only.
func InventorySubject(provider, worker string) string {
	return SubjectInventory + "." + provider + "." + WorkerCredential(worker) + "." + worker
}

// InventoryPublishedFor reports whether a report of worker about
// provider's machines may have been published on subject:
// InventorySubject(provider, worker), or gitfleet.inventory.<provider>.<worker>
// where earlier workers published it (which no worker's own credentials
// may publish on, as for EventPublishedFor).
func InventoryPublishedFor(subject, provider, worker string) bool {
	return subject == InventorySubject(provider, worker) || subject == SubjectInventory+"."+provider+"."+worker
}

// hostBound says, of each provider gitfleet has, whether its machines
// live on the host of the worker that holds them (local: processes of
// that host).
var hostBound = map[string]bool{"local": true, "inmemory": false, "docker": false}

// HostBound is whether a report of provider's machines covers its
// worker's machines only (true) or every machine of the provider: what
// the provider is, for the providers gitfleet has, whatever the report
// says (claimed), which is taken only for a provider it does not know. A
// report is taken from any worker's credentials in their own name, and
// one that said local machines were not host-bound covered every local
// worker's: they were all found gone and replaced.
func HostBound(provider string, claimed bool) bool {
	if hb, ok := hostBound[provider]; ok {
		return hb
	}
	return claimed
}

// InventoryRequest asks every worker for its inventory now.
type InventoryRequest struct {
	APIVersion string    `json:"apiVersion"`
	ID         string    `json:"id"`
	Time       time.Time `json:"time"`
}

// Inventory is one part of a worker's report of every machine its provider
// has (Provider.List). A report too large for one message is split into
// Parts messages with the same Report ID; the daemon uses a report only
// once it has every part.
type Inventory struct {
	APIVersion string `json:"apiVersion"`
	Provider   string `json:"provider"`
	// Worker is the reporting worker's identity.
	Worker string `json:"worker"`
	// HostBound: the provider's machines live on the worker's host, so the
	// report covers this worker's machines only; otherwise every worker of
	// the provider sees the same machines.
	HostBound bool `json:"hostBound,omitempty"`
	// Report identifies one List; Part counts from 0 to Parts-1. A worker
	// sends parts as it lists, before it knows how many there will be:
	// every part but the last says Parts 0 (more follow), and the last
	// says how many the report has. A report whose parts all give the
	// count (earlier workers) is taken too.
	Report string `json:"report"`
	Part   int    `json:"part"`
	Parts  int    `json:"parts"`
	// Request is the InventoryRequest the report answers; empty for a
	// report the worker sent on its own (start, interval).
	Request   string     `json:"request,omitempty"`
	Time      time.Time  `json:"time"`
	Instances []Instance `json:"instances,omitempty"`
}

// Cut is s when it has at most n bytes, else its first n bytes (cut at a
// character's start) followed by how many bytes were cut: how a message
// too long for where it goes (an event, a record, a status file) is kept.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s … (%d bytes cut)", s[:n], len(s)-n)
}

// JSONStringLen is the length of s written as a JSON string by Encode
// (encoding/json): quoted, with quotes, backslashes and common control
// characters escaped in two bytes, other control characters, HTML's <, >
// and &, U+2028, U+2029 and each invalid byte in six. What must fit in a
// message is measured with it before the message is made.
func JSONStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}

// MaxInventoryParts bounds the parts of one report: at 1,000 machines a
// part, ten million machines.
const MaxInventoryParts = 10_000

// MaxMachineBytes bounds what a machine's template gives every task about
// it — its spec, labels and annotations together, as JSON — so that a task
// fits in the task stream (256 KiB a message) with room for the rest of
// the task and its sealed bootstrap data.
const MaxMachineBytes = 128 << 10

// Instance is one machine as its provider has it.
type Instance struct {
	Cluster      string            `json:"cluster"`
	Machine      string            `json:"machine"`
	Deployment   string            `json:"deployment,omitempty"`
	Role         Role              `json:"role,omitempty"`
	Version      string            `json:"version,omitempty"`
	TemplateHash string            `json:"templateHash,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	ProviderID   string            `json:"providerID,omitempty"`
	Addresses    []string          `json:"addresses,omitempty"`
	// Reason, when set, says the provider has the machine but it is not
	// running (a CamelCase word, like NodeExited); Message says more.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// DecodeInventory parses and checks one part of an inventory.
func DecodeInventory(data []byte) (Inventory, error) {
	var inv Inventory
	if err := decode(data, &inv); err != nil {
		return Inventory{}, err
	}
	if err := CheckInventory(&inv); err != nil {
		return Inventory{}, err
	}
	return inv, nil
}

// CheckInventory is DecodeInventory's check of what a part holds, for a
// reader that decoded it another way.
func CheckInventory(inv *Inventory) error {
	switch {
	case inv.Provider == "" || inv.Worker == "" || inv.Report == "":
		return fmt.Errorf("%w: inventory needs provider, worker and report", ErrMalformed)
	case len(inv.Report) > MaxName || len(inv.Request) > MaxName:
		// The report's ID is kept until its last part comes.
		return fmt.Errorf("%w: inventory %.64s: a report ID of %d bytes or a request ID of %d (at most %d)",
			ErrMalformed, inv.Report, len(inv.Report), len(inv.Request), MaxName)
	case inv.Parts < 0 || inv.Parts > MaxInventoryParts || inv.Part < 0 || inv.Part >= MaxInventoryParts ||
		(inv.Parts > 0 && inv.Part >= inv.Parts):
		of := fmt.Sprintf("of %d", inv.Parts)
		if inv.Parts == 0 {
			of = "(more to follow)"
		}
		return fmt.Errorf("%w: inventory %s: part %d %s: parts count from 0 to the report's count less one, at most %d parts", ErrMalformed, inv.Report, inv.Part, of, MaxInventoryParts)
	}
	for i := range inv.Instances {
		in := &inv.Instances[i]
		if in.Cluster == "" || in.Machine == "" {
			return fmt.Errorf("%w: inventory %s: an instance without cluster or machine", ErrMalformed, inv.Report)
		}
		if err := CheckInstance(in); err != nil {
			return fmt.Errorf("%w: inventory %s: machine %.64s/%.64s: %v", ErrMalformed, inv.Report, in.Cluster, in.Machine, err)
		}
		in.Message = Cut(in.Message, MaxEventMessage)
	}
	return nil
}

// CheckInstance checks what an inventory says of a machine against what a
// provider writes of one, as DecodeEvent does an event's: a provider ID,
// version and addresses as an event's bounds them, a pool, role, template
// hash and reason no longer than a name (MaxName), labels and annotations
// of at most MaxMachineBytes together (a template carries no more). The
// leader refuses a part with a machine past them: any holder of a worker's
// credentials may send one, and what it says is kept in records, status
// files, orphan deletes and metrics' labels; cut, it would name another
// machine. A worker leaves such a machine out of its report, as one
// without a name, so that its reports stay whole. The message is cut,
// not checked (MaxEventMessage, by worker and leader alike).
func CheckInstance(in *Instance) error {
	if err := checkReported(in.ProviderID, in.Version, in.Addresses); err != nil {
		return err
	}
	if len(in.Deployment) > MaxName || len(in.Role) > MaxName || len(in.TemplateHash) > MaxName || len(in.Reason) > MaxName {
		return fmt.Errorf("a deployment of %d bytes, a role of %d, a template hash of %d or a reason of %d (at most %d)",
			len(in.Deployment), len(in.Role), len(in.TemplateHash), len(in.Reason), MaxName)
	}
	n := 0
	for _, m := range []map[string]string{in.Labels, in.Annotations} {
		for k, v := range m {
			n += len(k) + len(v)
		}
	}
	if n > MaxMachineBytes {
		return fmt.Errorf("%d KiB of labels and annotations (at most %d KiB)", (n+1023)>>10, MaxMachineBytes>>10)
	}
	return nil
}

// DecodeInventoryRequest parses an inventory request.
func DecodeInventoryRequest(data []byte) (InventoryRequest, error) {
	var r InventoryRequest
	if err := decode(data, &r); err != nil {
		return InventoryRequest{}, err
	}
	return r, nil
}

// DecodeTaskRecord reads the fields workers use of a machine record.
func DecodeTaskRecord(data []byte) (TaskRecord, error) {
	var r TaskRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return TaskRecord{}, fmt.Errorf("machine record: %w", err)
	}
	return r, nil
}
