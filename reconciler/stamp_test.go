package reconciler

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestStamp: a record's times keep the instant to the nanosecond, the
// zero time stays zero (a machine not yet Running), the Unix epoch is a
// time like any other, and the JSON is time.Time's in UTC, so records
// written before read the same.
func TestStamp(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 11, 29, 2, 3, 4, 123456789, time.UTC),
		time.Date(2026, 11, 29, 3, 3, 4, 5, time.FixedZone("CET", 3600)),
		time.Unix(0, 0),
		time.Unix(0, -1),
		time.Date(1678, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Now(), // with a monotonic reading, which a Stamp drops
	} {
		s := StampOf(tm)
		if s.IsZero() || !s.Time().Equal(tm) || s.Time().Location() != time.UTC {
			t.Errorf("%v: the stamp says %v (zero: %v)", tm, s.Time(), s.IsZero())
		}
		got, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(tm.UTC())
		if string(got) != string(want) {
			t.Errorf("%v: JSON %s, time.Time's %s", tm, got, want)
		}
		var back Stamp
		if err := json.Unmarshal(got, &back); err != nil || back != s {
			t.Errorf("%s read back as %v (%v)", got, back.Time(), err)
		}
		if !StampOf(tm.Add(time.Nanosecond)).After(tm) || !s.Time().Before(tm.Add(time.Nanosecond)) {
			t.Errorf("%v: a nanosecond later is not after it", tm)
		}
	}
	if s := StampOf(time.Time{}); !s.IsZero() || !s.Time().IsZero() {
		t.Errorf("the zero time is stamp %d, %v", s, s.Time())
	}
	var zero Stamp
	if data, _ := json.Marshal(zero); string(data) != `"0001-01-01T00:00:00Z"` {
		t.Errorf("the zero stamp is %s in JSON, want time.Time's zero", data)
	}
	for _, data := range []string{`"1600-01-01T00:00:00Z"`, `"3000-01-01T00:00:00Z"`} {
		err := json.Unmarshal([]byte(data), &zero)
		if !errors.Is(err, errStampRange) || !strings.Contains(err.Error(), strings.Trim(data, `"`)) {
			t.Errorf("%s read as %v (%v), want %v naming the time", data, zero.Time(), err, errStampRange)
		}
	}
	rec, _ := json.Marshal(&Record{Name: "m", Shape: &Shape{Cluster: "c"}, Created: StampOf(time.Date(2026, 11, 29, 2, 3, 4, 5, time.UTC))})
	if want := `"created":"2026-11-29T02:03:04.000000005Z"`; !json.Valid(rec) || !strings.Contains(string(rec), want) || strings.Contains(string(rec), "running") {
		t.Errorf("record %s: want %s and no running time", rec, want)
	}
}

// TestRecordSize: a daemon holds a record for every machine of the fleet,
// and what it holds a machine is a goal (docs/reconciler.md, "Memory per
// machine"); a field that makes a record bigger is a choice to make
// there, not by accident.
func TestRecordSize(t *testing.T) {
	if n := unsafe.Sizeof(Record{}); n > 144 {
		t.Errorf("a Record is %d bytes, more than the 144 docs/reconciler.md accounts for", n)
	}
}

// TestBeatTime: a heartbeat's time kept in 8 bytes reads back as the same
// instant; one from the clock keeps its monotonic reading, so a heartbeat's
// age does not move with a step of the wall clock; the zero time is none.
func TestBeatTime(t *testing.T) {
	now := time.Now()
	for _, at := range []time.Time{now, now.Add(-time.Hour), now.Add(40 * 24 * time.Hour),
		time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), beatEpoch} {
		b := beatOf(at)
		if b == 0 {
			t.Errorf("%v: kept as none", at)
		}
		if got := b.time(); at != beatEpoch && !got.Equal(at) {
			t.Errorf("%v read back as %v", at, got)
		}
	}
	if got := beatOf(now).time(); !strings.Contains(got.String(), " m=") {
		t.Errorf("a time from the clock read back without its monotonic reading: %v", got)
	}
	if got := beatOf(time.Time{}).time(); !got.IsZero() {
		t.Errorf("no heartbeat read back as %v", got)
	}
	var m machine
	if !m.lastHeartbeat().IsZero() {
		t.Errorf("a new machine's last heartbeat is %v, want none", m.lastHeartbeat())
	}
	if n := unsafe.Sizeof(machine{}); n > 32 {
		t.Errorf("a machine is %d bytes in memory, more than the 32 docs/reconciler.md accounts for", n)
	}
}
