package providers

import (
	"context"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

func TestDecodeTaskAgreesWithWire(t *testing.T) {
	for _, in := range []string{
		`{"apiVersion":"gitfleet.io/wire/v1","id":"a","operation":"create","machine":{"name":"m","cluster":"c"}}`,
		`{"apiVersion":"gitfleet.io/wire/v1","id":"a","operation":"delete","machine":{"name":"m","cluster":"c"}}`,
		`{"apiVersion":"gitfleet.io/wire/v2","id":"a","operation":"create","machine":{"name":"m","cluster":"c"}}`,
		`{"id":"a","operation":"create","machine":{"name":"m","cluster":"c"}}`,
		`{"apiVersion":"gitfleet.io/wire/v1","operation":"create","machine":{"name":"m","cluster":"c"}}`,
		`{"apiVersion":"gitfleet.io/wire/v1","id":"a","operation":"boom","machine":{"name":"m","cluster":"c"}}`,
		`{"apiVersion":"gitfleet.io/wire/v1","id":"a","operation":"create","machine":{"cluster":"c"}}`,
		`{"apiVersion":"gitfleet.io/wire/v1","id":"a","operation":"create","machine":{"name":5}}`,
		`[]`, `null`, ``, `{`,
	} {
		got, gerr := decodeTask([]byte(in))
		want, werr := wire.DecodeTask([]byte(in))
		if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) || got.ID != want.ID {
			t.Errorf("%s: decodeTask = %+v, %v; wire.DecodeTask = %+v, %v", in, got, gerr, want, werr)
		}
	}
}

func TestOnSubject(t *testing.T) {
	w := &Worker{p: namedProvider("local"), o: WorkerOptions{ID: "w1"}}
	for _, tc := range []struct {
		subject string
		worker  string // the task's
		want    bool
	}{
		{"gitfleet.tasks.local.c1.m1", "", true},
		{"gitfleet.tasks.local.c1.m2", "", false},
		{"gitfleet.tasks.local.c1.m1.x", "", false},
		{"gitfleet.tasks.local.c1", "", false},
		{"gitfleet.tasks.localx.c1.m1", "", false},
		{"gitfleet.tasks.local.c10.m1", "", false},
		{"other.local.c1.m1", "", false},
		{"gitfleet.tasks.local.c1.m1.w1", "w1", true},
		{"gitfleet.tasks.local.c1.m1.w2", "w1", false},
		{"gitfleet.tasks.local.c1.m1.w2", "w2", false}, // routed to another worker
		{"gitfleet.tasks.local.c1.m1", "w1", false},
	} {
		task := &wire.Task{Machine: wire.Machine{Cluster: "c1", Name: "m1"}, Worker: tc.worker}
		if got := w.onSubject(tc.subject, task); got != tc.want {
			t.Errorf("onSubject(%s, worker %q) = %v; want %v", tc.subject, tc.worker, got, tc.want)
		}
	}
}

// namedProvider is a Provider that is only a name.
type namedProvider string

func (p namedProvider) Name() string { return string(p) }
func (namedProvider) Create(context.Context, wire.Machine) (Instance, error) {
	return Instance{}, nil
}
func (namedProvider) Delete(context.Context, wire.Machine) error { return nil }
func (namedProvider) List(context.Context) ([]Instance, error)   { return nil, nil }
