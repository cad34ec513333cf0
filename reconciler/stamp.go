package reconciler

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Stamp is a record's point in time to the nanosecond in 8 bytes, where a
// time.Time takes 24 (its location pointer and monotonic reading are of
// no use in a record): a record has four, and a daemon holds a record for
// every machine of the fleet (docs/reconciler.md, "Memory per machine").
// The zero Stamp is the zero time. A Stamp covers 1678 to 2262, as
// time.Time's UnixNano does; its JSON is time.Time's (RFC 3339 with
// nanoseconds, in UTC), so records read and write as before.
type Stamp uint64

// stampBias moves UnixNano's range onto a Stamp's: the zero Stamp would be
// UnixNano's least value, which StampOf refuses, so it can mean "no time".
const stampBias = 1 << 63

// errStampRange: a time a Stamp cannot hold.
var errStampRange = errors.New("time outside 1678–2262")

// StampOf is t as a Stamp; the zero time, and a time a Stamp cannot hold
// (which no clock of ours gives), are the zero Stamp.
func StampOf(t time.Time) Stamp {
	s, _ := stampOf(t)
	return s
}

func stampOf(t time.Time) (Stamp, error) {
	if t.IsZero() {
		return 0, nil
	}
	// UnixNano is undefined outside its range: check in seconds first.
	if sec := t.Unix(); sec <= math.MinInt64/int64(time.Second) || sec >= math.MaxInt64/int64(time.Second) {
		return 0, fmt.Errorf("%s: %w", t.Format(time.RFC3339), errStampRange)
	}
	n := t.UnixNano()
	if n == math.MinInt64 {
		return 0, fmt.Errorf("%s: %w", t.Format(time.RFC3339Nano), errStampRange)
	}
	return Stamp(uint64(n) + stampBias), nil
}

// Time is s as a time in UTC; the zero Stamp is the zero time.
func (s Stamp) Time() time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(uint64(s)-stampBias)).UTC()
}

// IsZero reports whether s is the zero time (and lets `omitzero` leave it
// out of JSON).
func (s Stamp) IsZero() bool { return s == 0 }

// After reports whether s is after t.
func (s Stamp) After(t time.Time) bool { return s.Time().After(t) }

// Add is s moved by d, as a time.
func (s Stamp) Add(d time.Duration) time.Time { return s.Time().Add(d) }

// MarshalJSON writes s as time.Time writes it, in UTC.
func (s Stamp) MarshalJSON() ([]byte, error) { return s.Time().MarshalJSON() }

// UnmarshalJSON reads what time.Time reads; a time a Stamp cannot hold is
// an error, not a silent zero.
func (s *Stamp) UnmarshalJSON(data []byte) error {
	var t time.Time
	if err := t.UnmarshalJSON(data); err != nil {
		return err
	}
	v, err := stampOf(t)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// String is s as time.Time prints it.
func (s Stamp) String() string { return s.Time().String() }
