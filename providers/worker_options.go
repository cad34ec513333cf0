package providers

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// WorkerOptions tune a Worker. The zero value is usable.
type WorkerOptions struct {
	// Keys opens the bootstrap data the daemon seals into create tasks
	// (the daemon's --secrets-key-file). Nil: a create that carries
	// bootstrap data fails, saying the worker needs the key.
	Keys *pki.Keyring
	// Concurrency is how many tasks run at once (default 4). Tasks for the
	// same machine always run one after the other, in stream order.
	Concurrency int
	// AckWait is how long JetStream waits for an ack before redelivering
	// (default 30s). Long provider calls send in-progress acks every AckWait/3.
	AckWait time.Duration
	// MaxAttempts before a failing task is given up as Failed (default 10).
	MaxAttempts int
	// Backoff is the delay before retry number attempt (1-based) after a
	// transient error; default doubles from 1s up to 1m.
	Backoff func(attempt int) time.Duration
	// ProgressAfter: the Provisioning or Deleting event is published when the
	// provider call is still running after this long (default 250ms), so a
	// call that finishes at once reports only its outcome. A negative value
	// publishes it before every call.
	ProgressAfter time.Duration
	// DrainTimeout bounds how long Run waits for in-flight provider calls
	// after it was told to stop (default 30s); then their ctx is cancelled.
	DrainTimeout time.Duration
	// Durable consumer name; default "gitfleet-worker-<provider>". Workers
	// of one provider share it and so share the work.
	Durable string
	// ID is the worker's identity: in events and inventories, and, for a
	// HostBound provider, the subject its machines' tasks are routed to
	// (wire.WorkerTaskSubject). It must stay the same across restarts of
	// a worker that keeps the same machines; default: the host name. Only
	// letters, digits, '-' and '_'.
	ID string
	// InventoryInterval is how often the worker reports its provider's
	// inventory (default 1m); it also reports when it starts and when a
	// leader asks.
	InventoryInterval time.Duration
	// Log receives what the worker does; default: nothing. The worker adds
	// the provider's name to it: the caller should not.
	Log zerolog.Logger
	// Now is the clock for event times; default time.Now.
	Now func() time.Time
	// Records is a copy of the daemon's machine records shared with the
	// process's other workers (NewRecords); nil: the worker keeps its own.
	Records *Records
}

func (o WorkerOptions) withDefaults(provider string) WorkerOptions {
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.AckWait <= 0 {
		o.AckWait = 30 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 10
	}
	if o.Backoff == nil {
		o.Backoff = ExponentialBackoff(time.Second, time.Minute)
	}
	if o.ProgressAfter == 0 {
		o.ProgressAfter = 250 * time.Millisecond
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.Durable == "" {
		o.Durable = "gitfleet-worker-" + provider
	}
	if o.ID == "" {
		o.ID = DefaultWorkerID("")
	}
	if o.InventoryInterval <= 0 {
		o.InventoryInterval = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// ExponentialBackoff doubles from base for each attempt, capped at max.
func ExponentialBackoff(base, max time.Duration) func(attempt int) time.Duration {
	return func(attempt int) time.Duration {
		d := base
		for i := 1; i < attempt && d < max; i++ {
			d *= 2
		}
		return min(d, max)
	}
}

// DefaultWorkerID is the host name with every character a subject token
// cannot hold replaced, followed by a short hash of place when it is not
// empty (the local provider's state folder: two workers on one host with
// different folders hold different machines).
func DefaultWorkerID(place string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	id := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, host)
	if place != "" {
		sum := sha256.Sum256([]byte(place))
		id += "-" + hex.EncodeToString(sum[:4])
	}
	return id
}

// validID reports whether id can be a worker's identity: one whose part
// before any '_' can name its NATS credentials (wire.WorkerCredential).
func validID(id string) bool {
	return wire.ValidWorker(id) && wire.ValidCredential(wire.WorkerCredential(id))
}
