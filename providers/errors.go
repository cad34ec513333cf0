package providers

import (
	"fmt"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

func errMismatch(subject, provider string, t wire.Task) error {
	want := t.Subject()
	if t.Machine.Provider != "" && t.Machine.Provider != provider {
		return fmt.Errorf("%w: task %s: machine.provider %q, but this worker runs %q", wire.ErrMalformed, t.ID, t.Machine.Provider, provider)
	}
	return fmt.Errorf("%w: task %s: published on %s, but its machine belongs on %s", wire.ErrMalformed, t.ID, subject, want)
}
