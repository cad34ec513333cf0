package providers

import (
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
	for _, tc := range []struct {
		subject string
		want    bool
	}{
		{"gitfleet.tasks.local.c1.m1", true},
		{"gitfleet.tasks.local.c1.m2", false},
		{"gitfleet.tasks.local.c1.m1.x", false},
		{"gitfleet.tasks.local.c1", false},
		{"gitfleet.tasks.localx.c1.m1", false},
		{"gitfleet.tasks.local.c10.m1", false},
		{"other.local.c1.m1", false},
	} {
		if got := onSubject(tc.subject, "local", "c1", "m1"); got != tc.want {
			t.Errorf("onSubject(%s) = %v; want %v", tc.subject, got, tc.want)
		}
	}
}
