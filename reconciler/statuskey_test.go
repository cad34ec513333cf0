package reconciler

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// keyBase is a cluster's status head with every field set, and two
// records with every field set: the first a Running machine whose health
// shows (so that each field reaches its status entry), the second kept
// as is, so that a key depends on each machine and its order. Each call
// makes them anew.
func keyBase() (status.ClusterStatus, machineList) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	cs := status.ClusterStatus{Name: "c1", Class: "std", Version: "v1.31.2", Phase: status.ClusterProvisioning,
		Paused: true, Created: at,
		Conditions: []status.Condition{{Type: "Ready", Status: "False", Reason: "Waiting", Message: "m", LastTransitionTime: at}},
		ControlPlane: status.Replicas{Version: "v1.31.2", Desired: 3, Replicas: 3, Ready: 2, Updated: 1, Unavailable: 1,
			Backoff:   &status.Backoff{Failures: 1, LastFailure: "boom", NextRetry: at},
			Autoscale: &status.Autoscale{Min: 1, Max: 5, By: "autoscaler", At: at}},
		Deployments: []status.DeploymentStatus{{Name: "md-0", Replicas: status.Replicas{Version: "v1.31.2",
			Desired: 2, Replicas: 2, Ready: 2, Updated: 2, Unavailable: 0,
			Backoff:   &status.Backoff{Failures: 2, LastFailure: "b", NextRetry: at},
			Autoscale: &status.Autoscale{Min: 2, Max: 4, By: "x", At: at}}}},
		Rollout: &status.Rollout{ClassRevision: "r1", Wave: "w1", AdmittedAt: at, State: "Updating", Reason: "why",
			PendingRevision: "r2"},
		Deleted: []status.DeletedMachine{{Name: "c1-md-0-old", Cause: "scale", Reason: "gone", Deleted: at}},
	}
	addrs := []string{"10.0.0.1", "10.0.0.2"}
	a := &Record{Name: "c1-cp-aaaaa", Shape: &Shape{Cluster: "c1", Role: wire.RoleControlPlane, Provider: "inmemory",
		Version: "v1.31.2", TemplateHash: "t1", Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"a": "v"},
		Spec: []byte(`{"x":1}`), FailureDomain: "fd", SourceCommit: "abc", PlanID: "p1", Cause: "created",
		Reason: "R", Message: "M", Deployment: "md-x"},
		Init: true, Heartbeats: true, NamedID: true, Attempt: 1, Phase: wire.PhaseRunning,
		Created: StampOf(at), Running: StampOf(at), Joined: StampOf(at), ProviderID: "inmemory://c1/",
		Addresses: &addrs, Worker: "w1", TaskID: "t", Published: StampOf(at),
		Health: &Health{Healthy: false, Reason: "HeartbeatMissing", Message: "silent", Since: at}}
	b := &Record{Name: "c1-md-0-bbbbb", Shape: &Shape{Cluster: "c1", Deployment: "md-0", Role: wire.RoleWorker,
		Provider: "inmemory", Version: "v1.31.2"}, Phase: wire.PhaseProvisioning, ProviderID: "x"}
	return cs, machineList{{rec: a}, {rec: b}}
}

// mutations are the ways to change one field of v (a struct reached
// through fields, pointers and first elements), each named by its path;
// every call of a mutation changes the value it is given, reached by the
// same path.
type mutation struct {
	path string
	do   func(v reflect.Value)
}

func mutationsOf(t reflect.Type, path string, skip map[string]bool) []mutation {
	var out []mutation
	at := func(i int, f func(reflect.Value)) func(reflect.Value) {
		return func(v reflect.Value) { f(v.Field(i)) }
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		p := path + "." + sf.Name
		if !sf.IsExported() || skip[p] {
			continue
		}
		for _, m := range fieldMutations(sf.Type, p, skip) {
			out = append(out, mutation{m.path, at(i, m.do)})
		}
	}
	return out
}

var timeType = reflect.TypeOf(time.Time{})

func fieldMutations(t reflect.Type, p string, skip map[string]bool) []mutation {
	switch {
	case t == timeType:
		return []mutation{{p, func(v reflect.Value) { v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Hour))) }}}
	case t.Kind() == reflect.Struct:
		return mutationsOf(t, p, skip)
	case t.Kind() == reflect.Pointer:
		out := []mutation{{p + "=nil", func(v reflect.Value) { v.SetZero() }}}
		var inner []mutation
		if t.Elem().Kind() == reflect.Struct && t.Elem() != timeType {
			inner = mutationsOf(t.Elem(), p, skip)
		} else {
			inner = fieldMutations(t.Elem(), p, skip)
		}
		for _, m := range inner {
			// Through a copy of the pointee: the base may share it.
			out = append(out, mutation{m.path, func(v reflect.Value) {
				c := reflect.New(t.Elem())
				if !v.IsNil() {
					c.Elem().Set(v.Elem())
				}
				m.do(c.Elem())
				v.Set(c)
			}})
		}
		return out
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		out := []mutation{{p + "+1", func(v reflect.Value) {
			v.Set(reflect.Append(reflect.AppendSlice(reflect.MakeSlice(t, 0, v.Len()+1), v), v.Index(0)))
		}}}
		for _, m := range mutationsOf(t.Elem(), p+"[0]", skip) {
			out = append(out, mutation{m.path, func(v reflect.Value) {
				c := reflect.AppendSlice(reflect.MakeSlice(t, 0, v.Len()), v)
				m.do(c.Index(0))
				v.Set(c)
			}})
		}
		return out
	case t.Kind() == reflect.Slice:
		return []mutation{{p, func(v reflect.Value) {
			c := reflect.AppendSlice(reflect.MakeSlice(t, 0, v.Len()+1), v)
			v.Set(reflect.Append(c, reflect.New(t.Elem()).Elem()))
		}}}
	case t.Kind() == reflect.Map:
		return []mutation{{p, func(v reflect.Value) {
			c := reflect.MakeMap(t)
			c.SetMapIndex(reflect.ValueOf("added").Convert(t.Key()), reflect.New(t.Elem()).Elem())
			v.Set(c)
		}}}
	case t.Kind() == reflect.String:
		return []mutation{{p, func(v reflect.Value) { v.SetString(v.String() + "x") }}}
	case t.Kind() == reflect.Bool:
		return []mutation{{p, func(v reflect.Value) { v.SetBool(!v.Bool()) }}}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return []mutation{{p, func(v reflect.Value) { v.SetInt(v.Int() + 1) }}}
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		// A Stamp: an hour later, which a status's seconds show.
		return []mutation{{p, func(v reflect.Value) { v.SetUint(v.Uint() + uint64(time.Hour)) }}}
	}
	panic("no mutation for " + p + " of " + t.String())
}

// TestStatusKeyCoversTheStatus: a cluster whose status would change gets
// another key, whichever field of its status head or of its machines'
// records changed — so a pass that finds a cluster's key unchanged
// (Writer.MadeFrom) may skip building its status. Fields are found by
// reflection: a field added to the status or the record that reaches the
// status file but not the key fails here.
func TestStatusKeyCoversTheStatus(t *testing.T) {
	cs, ms := keyBase()
	base := statusKey(&cs, ms)
	if again, ams := keyBase(); statusKey(&again, ams) != base {
		t.Fatal("the same inputs, made anew, have another key")
	}
	// The head: every field is written to the file.
	heads := mutationsOf(reflect.TypeOf(cs), "status", map[string]bool{"status.Machines": true})
	for _, m := range heads {
		c, ms := keyBase()
		m.do(reflect.ValueOf(&c).Elem())
		if statusKey(&c, ms) == base {
			t.Errorf("%s changed: the key did not", m.path)
		}
	}
	// The records: a field that changes a machine's status entry must
	// change the key (others may).
	reaching := 0
	for _, m := range mutationsOf(reflect.TypeOf(Record{}), "record", nil) {
		if m.path == "record.Shape=nil" {
			continue // every record has a shape
		}
		for i := range 2 {
			c, ms := keyBase()
			before := machineStatuses(ms)
			rec := *ms[i].rec
			m.do(reflect.ValueOf(&rec).Elem())
			ms[i] = &machine{rec: &rec}
			if reflect.DeepEqual(before, machineStatuses(ms)) {
				continue
			}
			reaching++
			if statusKey(&c, ms) == base {
				t.Errorf("%s of machine %d changed its status entry: the key did not", m.path, i)
			}
		}
	}
	if len(heads) < 50 || reaching < 35 { // 57 and 40 when written
		t.Errorf("%d head fields and %d record changes that reach a status tried: the walk missed fields", len(heads), reaching)
	}
	// The machines' order and number.
	c, ms := keyBase()
	if statusKey(&c, ms[:1]) == base || statusKey(&c, machineList{ms[1], ms[0]}) == base {
		t.Error("a machine fewer, or the machines in another order, kept the key")
	}
	if got := machineStatuses(ms)[0].ProviderID; !strings.HasSuffix(got, ms[0].rec.Name) {
		t.Errorf("base record's provider ID %q: NamedID not exercised", got)
	}
}
