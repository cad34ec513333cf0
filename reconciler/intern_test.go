package reconciler

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestInternerSharesWhatMachinesHaveAlike: two records read from the store
// for machines of one pool end up with one labels map and one spec, and
// keep their values.
func TestInternerSharesWhatMachinesHaveAlike(t *testing.T) {
	decode := func(name string) *Record {
		data, _ := json.Marshal(&Record{Name: name, Shape: &Shape{Cluster: "c", Deployment: "md-0", Version: "v1.31.2",
			Labels: map[string]string{"a": "1", "b": "2"}, Spec: json.RawMessage(`{"cpus":2}`)}})
		r, err := decodeRecord("c."+name, data)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b, other := decode("m1"), decode("m2"), decode("m3")
	other.Labels = map[string]string{"a": "1"}
	in := newInterner()
	for _, r := range []*Record{a, b, other} {
		in.record(r)
	}
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("two machines of a pool keep a labels map each")
	}
	if &a.Spec[0] != &b.Spec[0] {
		t.Error("two machines of a pool keep a spec each")
	}
	if len(other.Labels) != 1 || len(a.Labels) != 2 || a.Labels["b"] != "2" || string(b.Spec) != `{"cpus":2}` {
		t.Errorf("values changed: %v %v %s", a.Labels, other.Labels, b.Spec)
	}
}

// TestDecodingSharesWhatMachinesHaveAlike: records read at start by the
// fast decoder with one interner share a pool's labels map, spec and
// strings, and keep their values.
func TestDecodingSharesWhatMachinesHaveAlike(t *testing.T) {
	in := newInterner()
	decode := func(name string, labels map[string]string) *Record {
		data, _ := json.Marshal(&Record{Name: name, Shape: &Shape{Cluster: "c", Deployment: "md-0", Version: "v1.31.2",
			Labels: labels, Spec: json.RawMessage(`{"cpus":2}`)}})
		r, err := decodeShared("c."+name, data, in)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := decode("m1", map[string]string{"a": "1", "b": "2"})
	b := decode("m2", map[string]string{"b": "2", "a": "1"})
	other := decode("m3", map[string]string{"a": "1"})
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("two machines of a pool keep a labels map each")
	}
	if &a.Spec[0] != &b.Spec[0] {
		t.Error("two machines of a pool keep a spec each")
	}
	if unsafe.StringData(a.Version) != unsafe.StringData(b.Version) {
		t.Error("two machines of a pool keep a version string each")
	}
	if a.Shape != b.Shape || a.Shape == other.Shape {
		t.Error("two machines of a pool keep a shape each, or a machine with other labels shares theirs")
	}
	if len(other.Labels) != 1 || len(a.Labels) != 2 || a.Labels["b"] != "2" || string(b.Spec) != `{"cpus":2}` || b.Name != "m2" {
		t.Errorf("values changed: %v %v %s %s", a.Labels, other.Labels, b.Spec, b.Name)
	}
}

// TestAMachinesVersionIsItsOwn: the records of a pool made in one pass
// share their shape; a worker that reports another version for one of
// them changes that machine's record alone, not the version its pool's
// other machines are recorded at (which would have the planner replace
// them as if they had drifted).
func TestAMachinesVersionIsItsOwn(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 3)
	l.start()
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
	tasks := l.nextTasks(3) // the workers, once the control plane runs
	l.waitRecords("Pending Pending Pending Running")

	odd := tasks[0]
	ev := wire.Event{TaskID: odd.task.ID, Attempt: odd.task.Attempt, Cluster: "c1", Machine: odd.task.Machine.Name,
		Phase: wire.PhaseRunning, Version: "v1.31.3", ProviderID: "test://odd", Time: time.Now().UTC()}
	l.event(ev)
	_ = odd.msg.Ack()
	l.waitFor("the odd machine's record", func() (bool, string) {
		r := l.records()[odd.task.Machine.Name]
		return r != nil && r.Version == "v1.31.3", fmt.Sprint(r)
	})
	// Their next records are built on what memory holds of them: a
	// progress event carries no version of its own.
	for _, task := range tasks[1:] {
		l.answer(task, wire.PhaseProvisioning)
	}
	for _, task := range tasks[1:] {
		name := task.task.Machine.Name
		l.waitFor(name+" provisioning", func() (bool, string) {
			r := l.records()[name]
			return r != nil && r.Phase == wire.PhaseProvisioning, fmt.Sprint(r)
		})
		if r := l.records()[name]; r.Version != "v1.31.2" {
			t.Errorf("%s is recorded at %s after another machine of its pool reported v1.31.3; want v1.31.2", name, r.Version)
		}
	}

	// The same for a version a running machine's heartbeat reports.
	for _, task := range tasks[1:] {
		l.answer(task, wire.PhaseRunning)
	}
	l.waitRecords("Running Running Running Running")
	first, second := tasks[1].task.Machine, tasks[2].task.Machine
	first.Version = "v1.31.4"
	second.Version = "" // a heartbeat that names no version
	recorded := func(m wire.Machine) func() (bool, string) {
		return func() (bool, string) {
			r := l.records()[m.Name]
			return r != nil && r.Heartbeats, fmt.Sprint(r)
		}
	}
	if err := heartbeat(l.nc, first, true); err != nil {
		t.Fatal(err)
	}
	l.waitFor("the first heartbeat recorded", recorded(first))
	if err := heartbeat(l.nc, second, true); err != nil {
		t.Fatal(err)
	}
	l.waitFor("the second heartbeat recorded", recorded(second))
	recs := l.records()
	if recs[first.Name].Version != "v1.31.4" || recs[second.Name].Version != "v1.31.2" {
		t.Errorf("after heartbeats of v1.31.4 and of no version, %s is recorded at %s and %s at %s; want v1.31.4 and v1.31.2",
			first.Name, recs[first.Name].Version, second.Name, recs[second.Name].Version)
	}
}

// TestAMachinesFailureIsItsOwn: a machine's reason and message are kept in
// its record's shape, which the machines of its pool share; one that
// fails gets them in a shape of its own, and the machines beside it, whose
// next records are built on what memory holds of them, stay without.
func TestAMachinesFailureIsItsOwn(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 3)
	l.start()
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
	tasks := l.nextTasks(3)
	l.waitRecords("Pending Pending Pending Running")

	odd := tasks[0]
	l.event(wire.Event{TaskID: odd.task.ID, Attempt: odd.task.Attempt, Cluster: "c1", Machine: odd.task.Machine.Name,
		Phase: wire.PhaseFailed, Message: "quota exceeded", Time: time.Now().UTC()})
	_ = odd.msg.Ack()
	l.waitFor("the odd machine's failure", func() (bool, string) {
		r := l.records()[odd.task.Machine.Name]
		return r != nil && r.Message == "quota exceeded", fmt.Sprint(r)
	})
	// A first heartbeat makes a new record, the rest as memory has it.
	for _, task := range tasks[1:] {
		if err := heartbeat(l.nc, task.task.Machine, true); err != nil {
			t.Fatal(err)
		}
	}
	for _, task := range tasks[1:] {
		name := task.task.Machine.Name
		l.waitFor(name+"'s heartbeat recorded", func() (bool, string) {
			r := l.records()[name]
			return r != nil && r.Heartbeats, fmt.Sprint(r)
		})
		if r := l.records()[name]; r.Reason != "" || r.Message != "" {
			t.Errorf("%s is recorded with reason %q, message %q after another machine of its pool failed; want neither",
				name, r.Reason, r.Message)
		}
	}
}

// TestStartKeepsFailuresApart: records read at start share a shape when
// everything in it is alike, the reason and message included.
func TestStartKeepsFailuresApart(t *testing.T) {
	in := newInterner()
	var recs []*Record
	for _, m := range []string{"", "quota exceeded", "", "disk full"} {
		data := []byte(`{"name":"m","cluster":"c1","deployment":"md-0","phase":"Failed","message":"` + m + `"}`)
		r, err := decodeShared("c1.m", data, in)
		if err != nil {
			t.Fatal(err)
		}
		if r.Message != m {
			t.Errorf("a record with message %q read back with %q", m, r.Message)
		}
		recs = append(recs, r)
	}
	if recs[0].Shape != recs[2].Shape || recs[0].Shape == recs[1].Shape || recs[1].Shape == recs[3].Shape {
		t.Error("records alike but for their message share shapes, or records alike do not")
	}
}

// TestIsRecordKey: the check a start makes of every record's key agrees
// with the key itself.
func TestIsRecordKey(t *testing.T) {
	for _, c := range [][3]string{
		{"c1.m1", "c1", "m1"}, {"c1.m1", "c1", "m2"}, {"c1.m1", "c", "1.m1"}, {"c.1.m1", "c.1", "m1"},
		{"c.1.m1", "c", "1.m1"}, {"c1m1", "c1", "m1"}, {"c1.m1x", "c1", "m1"}, {"xc1.m1", "c1", "m1"},
		{".", "", ""}, {"", "", ""}, {"c1.", "c1", ""}, {"é.m", "é", "m"},
	} {
		if got, want := isRecordKey(c[0], c[1], c[2]), c[0] == recordKey(c[1], c[2]); got != want {
			t.Errorf("isRecordKey(%q, %q, %q) = %v, want %v", c[0], c[1], c[2], got, want)
		}
	}
}

// TestNameIsTheTaskIDsTail: a record's name is kept in the bytes of its
// task ID, which ends with it, whether the record was read at start or
// made for a task (a create, then a delete), and stays the name; its
// phase is the constant's bytes, not a copy.
func TestNameIsTheTaskIDsTail(t *testing.T) {
	shared := func(r *Record) bool {
		tail := r.TaskID[len(r.TaskID)-len(r.Name):]
		return r.Name == "c1-md-0-abcde" && unsafe.StringData(r.Name) == unsafe.StringData(tail)
	}
	data := []byte(`{"name":"c1-md-0-abcde","cluster":"c1","phase":"Running","taskID":"create.c1.c1-md-0-abcde","created":"2026-11-29T02:00:00Z"}`)
	for _, in := range []*interner{nil, newInterner()} {
		r, err := decodeShared("c1.c1-md-0-abcde", data, in)
		if err != nil {
			t.Fatal(err)
		}
		if !shared(r) {
			t.Errorf("read at start (interner %v): name %q in bytes of its own", in != nil, r.Name)
		}
		if unsafe.StringData(string(r.Phase)) != unsafe.StringData(string(wire.PhaseRunning)) {
			t.Errorf("read at start (interner %v): phase %q in bytes of its own", in != nil, r.Phase)
		}
	}
	r := &Record{Name: "c1-md-0-abcde", Shape: &Shape{Cluster: "c1"}}
	for _, op := range []wire.Operation{wire.OpCreate, wire.OpDelete} {
		next := r.clone()
		next.setTask(op)
		if next.TaskID != string(op)+".c1.c1-md-0-abcde" || !shared(next) {
			t.Errorf("%s: task %q, name %q in bytes of its own", op, next.TaskID, next.Name)
		}
		r = next
	}
	// A task ID that does not end with the name (none of ours) leaves
	// the name as it is.
	odd := &Record{Name: "m", Shape: &Shape{Cluster: "c"}, TaskID: "create.c.xm"}
	odd.shareName()
	if odd.Name != "m" {
		t.Errorf("name %q after a task ID that does not end with it", odd.Name)
	}
}
