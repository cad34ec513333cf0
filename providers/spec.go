package providers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// DecodeSpec decodes a machine's provider spec into v; an empty spec or
// null leaves v as it is. Unknown fields are errors, so a typo is reported
// instead of ignored. Errors are permanent: retrying cannot fix a spec.
func DecodeSpec(provider string, raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Permanent(fmt.Errorf("%s: machine spec: %w", provider, err))
	}
	return nil
}

// Duration is a JSON duration written like "2s" or "500ms".
type Duration time.Duration

// UnmarshalJSON accepts a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"2s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: want a value like \"2s\" or \"500ms\"", s)
	}
	if v < 0 {
		return fmt.Errorf("duration %q must not be negative", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string like "2s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
