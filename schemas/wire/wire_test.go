package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestDecodeEventRefusesUnknownPhases(t *testing.T) {
	for _, phase := range []string{"Bogus", "Pending", "running"} {
		_, err := DecodeEvent([]byte(`{"apiVersion":"gitfleet.io/wire/v1","taskID":"t","cluster":"c","machine":"m","phase":"` + phase + `"}`))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "unknown phase") {
			t.Errorf("phase %q: %v; want a malformed event naming the phase", phase, err)
		}
	}
	if _, err := DecodeEvent([]byte(`{"apiVersion":"gitfleet.io/wire/v1","taskID":"t","cluster":"c","machine":"m","phase":"Deleted"}`)); err != nil {
		t.Errorf("Deleted: %v", err)
	}
}

// TestDecodedPhasesAreTheConstants: a decoded event's phase is the
// constant's bytes, not a string of its own (a daemon keeps one for every
// machine), and says the same.
// An event's worker is where the machine's next task goes: one that is
// no worker identity is refused, whatever else the event says.
func TestDecodeEventRefusesWorkersThatAreNoIdentity(t *testing.T) {
	for _, worker := range []string{"w.>", "*", "a.b", "w 1", "w\u0000", "ü", strings.Repeat("w", MaxWorkerID+1)} {
		data, _ := json.Marshal(map[string]any{"apiVersion": APIVersion, "taskID": "t", "cluster": "c", "machine": "m", "phase": "Running", "worker": worker})
		if _, err := DecodeEvent(data); !errors.Is(err, ErrMalformed) {
			t.Errorf("worker %.20q: %v, want malformed", worker, err)
		}
	}
	for _, worker := range []string{"", "vm-1a2b", "W_1", strings.Repeat("w", MaxWorkerID)} {
		data, _ := json.Marshal(map[string]any{"apiVersion": APIVersion, "taskID": "t", "cluster": "c", "machine": "m", "phase": "Running", "worker": worker})
		if _, err := DecodeEvent(data); err != nil {
			t.Errorf("worker %.20q: %v", worker, err)
		}
	}
}

func TestDecodedPhasesAreTheConstants(t *testing.T) {
	for _, phase := range []Phase{PhaseProvisioning, PhaseRunning, PhaseFailed, PhaseDeleting, PhaseDeleted} {
		e, err := DecodeEvent([]byte(`{"apiVersion":"gitfleet.io/wire/v1","taskID":"t","cluster":"c","machine":"m","phase":"` + string(phase) + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		if e.Phase != phase || unsafe.StringData(string(e.Phase)) != unsafe.StringData(string(phase)) {
			t.Errorf("%s: decoded as %q in bytes of its own", phase, e.Phase)
		}
	}
	if p := Phase("Bogus"); p.Canonical() != p {
		t.Errorf("an unknown phase became %q", p.Canonical())
	}
}

func TestTaskStale(t *testing.T) {
	create := Task{ID: "create.c.m", Attempt: 2, Revision: 10, Operation: OpCreate}
	del := Task{ID: "delete.c.m", Attempt: 1, Revision: 12, Operation: OpDelete}
	orphan := Task{ID: "orphan.c.m", Operation: OpDelete, Orphan: true, Worker: "w1"}
	rec := func(id string, attempt int, phase Phase, worker string) *TaskRecord {
		return &TaskRecord{TaskID: id, Attempt: attempt, Phase: phase, Worker: worker}
	}
	for _, tc := range []struct {
		name  string
		task  Task
		rec   *TaskRecord
		rev   uint64
		stale string // substring; "" for current
	}{
		{"current create", create, rec("create.c.m", 2, PhaseProvisioning, ""), 11, ""},
		{"older attempt", create, rec("create.c.m", 3, PhasePending, ""), 13, "attempt 3"},
		{"no record", create, nil, 0, "no record"},
		{"other task", create, rec("delete.c.m", 1, PhaseDeleting, ""), 13, "on task delete.c.m"},
		{"create done", create, rec("create.c.m", 2, PhaseRunning, ""), 14, "Running"},
		{"store rebuilt", create, rec("create.c.m", 2, PhasePending, ""), 3, "store was rebuilt"},
		{"current delete", del, rec("delete.c.m", 1, PhaseDeleting, "w1"), 12, ""},
		{"orphan, no record", orphan, nil, 0, ""},
		{"orphan duplicate on another worker", orphan, rec("create.c.m", 1, PhaseRunning, "w2"), 5, ""},
		{"orphan wanted here", orphan, rec("create.c.m", 1, PhaseRunning, "w1"), 5, "no orphan"},
		{"orphan of a shared provider, wanted", Task{ID: "orphan.c.m", Operation: OpDelete, Orphan: true}, rec("create.c.m", 1, PhaseRunning, ""), 5, "no orphan"},
	} {
		got := tc.task.Stale(tc.rec, tc.rev)
		if (tc.stale == "") != (got == "") || !strings.Contains(got, tc.stale) {
			t.Errorf("%s: Stale = %q; want %q", tc.name, got, tc.stale)
		}
	}
}

func TestMsgIDChangesWithTheAttempt(t *testing.T) {
	a := Task{ID: "create.c.m", Attempt: 1}
	b := a
	b.Attempt = 2
	if a.MsgID() == b.MsgID() {
		t.Fatalf("attempts 1 and 2 share message ID %s", a.MsgID())
	}
}

// BenchmarkDecodeInventory: one part of an inventory (1,000 instances, as
// workers send them), as the leader decodes 130 of them a minute at
// 130,000 machines.
func BenchmarkDecodeInventory(b *testing.B) {
	inv := benchInventory()
	data, err := Encode(&inv)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := DecodeInventory(data); err != nil {
			b.Fatal(err)
		}
	}
}

// benchInventory is one part of an inventory: 1,000 instances, as workers
// send them.
func benchInventory() Inventory {
	inv := Inventory{Provider: "inmemory", Worker: "w1", Report: "r1", Parts: 1, Time: time.Now().UTC()}
	for i := range 1000 {
		inv.Instances = append(inv.Instances, Instance{Cluster: fmt.Sprintf("c%05d", i/13), Machine: fmt.Sprintf("c%05d-md-0-m%05d", i/13, i),
			Deployment: "md-0", Role: RoleWorker, Version: "v1.31.2", TemplateHash: "0123456789abcdef",
			Labels:     map[string]string{"gitfleet.io/cluster": fmt.Sprintf("c%05d", i/13), "gitfleet.io/deployment": "md-0"},
			ProviderID: fmt.Sprintf("inmemory://c%05d/m%05d", i/13, i)})
	}
	return inv
}

// BenchmarkEncodeInventory: a worker encodes one part of its inventory
// (wire), beside encoding/json's Marshal of the same part; 130 parts a
// minute at 130,000 machines.
func BenchmarkEncodeInventory(b *testing.B) {
	inv := benchInventory()
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Encode(&inv); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&inv); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A message that does not decode says first what a person fixes first:
// not JSON, then a missing or other apiVersion (even when the rest would
// not fit either), then the shape.
func TestDecodeSaysWhyInOrder(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{`{`, "not JSON"},
		{`{"cluster":"c","machine":"m"}`, "no apiVersion"},
		{`{"apiVersion":"gitfleet.io/wire/v0","cluster":5}`, `unknown apiVersion "gitfleet.io/wire/v0"`},
		{`{"apiVersion":"` + APIVersion + `","cluster":5}`, "cannot unmarshal number"},
		{`{"apiVersion":"` + APIVersion + `","machine":"m"}`, "needs cluster and machine"},
	} {
		_, err := DecodeHeartbeat([]byte(c.data))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a malformed message saying %q", c.data, err, c.want)
		}
	}
	if _, err := DecodeHeartbeat([]byte(`{"apiVersion":"` + APIVersion + `","cluster":"c","machine":"m"}`)); err != nil {
		t.Errorf("a good heartbeat: %v", err)
	}
}

// Cut keeps short messages whole, and cuts long ones at a character's
// start, saying how much it cut.
func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 5, "short"},
		{"longer", 4, "long … (2 bytes cut)"},
		{"héllo", 2, "h … (5 bytes cut)"}, // é is two bytes: not split
		{"", 0, ""},
	} {
		if got := Cut(c.s, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

// JSONStringLen is what Encode writes for a string, byte for byte.
func TestJSONStringLen(t *testing.T) {
	for _, s := range []string{"", "plain", "a<b>&c", "quote\" back\\ nl\n tab\t cr\r \b\f", "\x00\x01\x1f\x7f",
		"é ☃ 𝄞", "\u2028\u2029", "bad \xff\xfe utf-8 \xe2\x82", strings.Repeat("<x>", 100)} {
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := JSONStringLen(s); got != len(data) {
			t.Errorf("JSONStringLen(%q) = %d, json.Marshal writes %d bytes (%s)", s, got, len(data), data)
		}
	}
}

// An event about a machine is taken from its cluster's subject for its
// worker's credential, or from the subjects earlier workers published on
// (the cluster's, the machine's), and from no other: above all not from
// another credential's subject, which is how NATS ties an event to its
// sender.
func TestEventPublishedFor(t *testing.T) {
	for _, c := range []struct {
		subject, worker string
		want            bool
	}{
		{EventSubject("c1", "w1"), "w1", true},
		{"gitfleet.events.c1.from.w1", "w1_pod-a", true},
		{EventSubject("c1", "w1_pod-a"), "w1_pod-b", true},
		{EventSubject("c1", "w2"), "w1", false},
		{"gitfleet.events.c1.from.w1", "w1x", false},
		{"gitfleet.events.c1.from.w1", "w2_w1", false},
		{"gitfleet.events.c1.from.", "_w1", false},
		{"gitfleet.events.c1.from.", "", false},
		{"gitfleet.events.c1.from.w2", "", true},
		{"gitfleet.events.c1.from.w_2", "", false},
		{"gitfleet.events.c1.from.w1.x", "w1", false},
		{"gitfleet.events.c2.from.w1", "w1", false},
		{"gitfleet.events.c1", "w1", true},
		{"gitfleet.events.c1.m1", "w1", true},
		{"gitfleet.events.c1.m2", "w1", false},
		{"gitfleet.events.c1.m1.x", "w1", false},
		{"gitfleet.events.c1x", "w1", false},
		{"gitfleet.events.c1x.m1", "w1", false},
		{"gitfleet.events.c2", "w1", false},
		{"gitfleet.events", "w1", false},
		{"gitfleet.heartbeat.c1.m1", "w1", false},
		{"gitfleet.eventsc1", "w1", false},
	} {
		if got := EventPublishedFor(c.subject, "c1", "m1", c.worker); got != c.want {
			t.Errorf("EventPublishedFor(%q, c1, m1, %s) = %v, want %v", c.subject, c.worker, got, c.want)
		}
	}
}

// A report is taken from its worker's credential's subject, or from the
// subject earlier workers used, not from another credential's.
func TestInventoryPublishedFor(t *testing.T) {
	for _, c := range []struct {
		subject, worker string
		want            bool
	}{
		{"gitfleet.inventory.p.w1.w1", "w1", true},
		{"gitfleet.inventory.p.w1.w1_pod-a", "w1_pod-a", true},
		{"gitfleet.inventory.p.w1", "w1", true},
		{"gitfleet.inventory.p.w2.w1", "w1", false},
		{"gitfleet.inventory.p.w2.w1_x", "w1_x", false},
		{"gitfleet.inventory.p.w1.w1_x", "w1_y", false},
		{"gitfleet.inventory.q.w1.w1", "w1", false},
	} {
		if got := InventoryPublishedFor(c.subject, "p", c.worker); got != c.want {
			t.Errorf("InventoryPublishedFor(%q, p, %s) = %v, want %v", c.subject, c.worker, got, c.want)
		}
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{"c1": true, "dev-1-md-0-x2k9a": true, strings.Repeat("n", MaxName): true,
		"": false, "g.*": false, "a b": false, ">": false, strings.Repeat("n", MaxName+1): false} {
		if got := ValidName(s); got != want {
			t.Errorf("ValidName(%.20q) = %v, want %v", s, got, want)
		}
	}
}

// An event carries what a provider writes, and no more: anyone holding a
// worker's credentials may send one, and the leader records what it says
// in the machine's record and its cluster's status file. A 64 KiB message
// grew a status file by as much at every event; it is cut as workers cut
// a provider's error. A provider ID, version or address longer than any
// provider writes, or more addresses than a machine has, would name
// another machine or version if cut: the event is malformed.
func TestDecodeEventBoundsWhatItCarries(t *testing.T) {
	event := func(field, value string) []byte {
		return []byte(`{"apiVersion":"gitfleet.io/wire/v1","taskID":"t","cluster":"c","machine":"m","phase":"Running",` + fmt.Sprintf("%q:%s", field, value) + `}`)
	}
	ev, err := DecodeEvent(event("message", fmt.Sprintf("%q", strings.Repeat("x", 64<<10))))
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Message) > MaxEventMessage+64 || !strings.Contains(ev.Message, "bytes cut") {
		t.Errorf("a 64 KiB message decoded as %d bytes, want it cut at %d and saying so", len(ev.Message), MaxEventMessage)
	}
	for _, tc := range []struct{ field, value string }{
		{"providerID", fmt.Sprintf("%q", strings.Repeat("p", MaxProviderID+1))},
		{"version", fmt.Sprintf("%q", "v1.31."+strings.Repeat("9", MaxVersion))},
		{"addresses", `["` + strings.Repeat("10.0.0.1", 40) + `"]`},
		{"addresses", `[` + strings.Repeat(`"10.0.0.1",`, MaxAddresses) + `"10.0.0.2"]`},
	} {
		if _, err := DecodeEvent(event(tc.field, tc.value)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s of %d bytes: %v; want a malformed event", tc.field, len(tc.value), err)
		}
	}
	ok := event("providerID", `"docker://`+strings.Repeat("a", 64)+`"`)
	if _, err := DecodeEvent(ok); err != nil {
		t.Errorf("a docker container's provider ID refused: %v", err)
	}
}

// An inventory says of a machine what a provider writes, and no more, as
// an event does: any holder of a worker's credentials may send one, and
// the leader keeps what it says in records, status files and orphan
// deletes. A message is cut as an event's; a field past its bound makes
// the part malformed.
func TestDecodeInventoryBoundsWhatItCarries(t *testing.T) {
	part := func(field, value string) []byte {
		return []byte(`{"apiVersion":"gitfleet.io/wire/v1","provider":"inmemory","worker":"w1","report":"r","parts":1,"time":"2026-12-07T00:00:00Z",` +
			`"instances":[{"cluster":"c","machine":"m",` + fmt.Sprintf("%q:%s", field, value) + `}]}`)
	}
	inv, err := DecodeInventory(part("message", fmt.Sprintf("%q", strings.Repeat("x", 64<<10))))
	if err != nil {
		t.Fatal(err)
	}
	if m := inv.Instances[0].Message; len(m) > MaxEventMessage+64 || !strings.Contains(m, "bytes cut") {
		t.Errorf("a 64 KiB message decoded as %d bytes, want it cut at %d and saying so", len(m), MaxEventMessage)
	}
	long := func(n int) string { return fmt.Sprintf("%q", strings.Repeat("x", n)) }
	for _, tc := range []struct{ field, value string }{
		{"providerID", long(MaxProviderID + 1)},
		{"version", long(MaxVersion + 1)},
		{"addresses", `[` + long(MaxAddress+1) + `]`},
		{"addresses", `[` + strings.Repeat(`"10.0.0.1",`, MaxAddresses) + `"10.0.0.2"]`},
		{"deployment", long(MaxName + 1)},
		{"role", long(MaxName + 1)},
		{"templateHash", long(MaxName + 1)},
		{"reason", long(MaxName + 1)},
		{"labels", `{"a":` + long(MaxMachineBytes) + `}`},
		{"annotations", `{"a":` + long(MaxMachineBytes) + `}`},
	} {
		if _, err := DecodeInventory(part(tc.field, tc.value)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s of %d bytes: %v; want a malformed part", tc.field, len(tc.value), err)
		}
	}
	data := []byte(`{"apiVersion":"gitfleet.io/wire/v1","provider":"inmemory","worker":"w1","report":` + long(MaxName+1) + `,"parts":1,"time":"2026-12-07T00:00:00Z"}`)
	if _, err := DecodeInventory(data); !errors.Is(err, ErrMalformed) {
		t.Errorf("a report ID of %d bytes: %v; want a malformed part", MaxName+1, err)
	}
	ok := part("providerID", `"docker://`+strings.Repeat("a", 64)+`","version":"v1.31.2","addresses":["172.18.0.2"],"reason":"ContainerNotRunning","labels":{"a":`+long(MaxMachineBytes/2)+`}`)
	if _, err := DecodeInventory(ok); err != nil {
		t.Errorf("a docker container refused: %v", err)
	}
}

// A credential's name is a worker identity without '_', as long as one:
// a local worker's default identity on a host with a 64-character name
// (the name and a hash of its state folder, 73 characters, no '_') names
// its own credentials.
func TestValidCredential(t *testing.T) {
	host := strings.Repeat("h", 64) + "-0123abcd"
	for s, want := range map[string]bool{"w1": true, "host-1-local": true, host: true, strings.Repeat("c", MaxWorkerID): true,
		"": false, "w_1": false, "w.1": false, "w>": false, strings.Repeat("c", MaxWorkerID+1): false} {
		if got := ValidCredential(s); got != want {
			t.Errorf("ValidCredential(%.20q…) = %v, want %v", s, got, want)
		}
	}
	if got := WorkerCredential("inmemory_gitfleet-worker-inmemory-7d9f-x2k9a"); got != "inmemory" {
		t.Errorf("WorkerCredential of a pod's identity = %q, want inmemory", got)
	}
	if got := WorkerCredential(host); got != host {
		t.Errorf("WorkerCredential of an identity without '_' = %q, want itself", got)
	}
}
