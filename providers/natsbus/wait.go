package natsbus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/internal/secret"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// OpenWait is Open followed by Ensure, waiting for an external NATS and
// its JetStream as long as ctx allows: a daemon or worker started before
// NATS (or while it restarts) waits, saying so, instead of exiting. Each
// failed attempt is logged and handed to waiting (nil when nothing is
// awaited any more), so readiness can say why; the wait grows from 250 ms
// to 5 s. The embedded server is not waited for: if it cannot start, that
// is a configuration error.
func OpenWait(ctx context.Context, opts Options, log zerolog.Logger, waiting func(error)) (*Bus, error) {
	if waiting == nil {
		waiting = func(error) {}
	}
	embedded := opts.URL == "" || opts.URL == Embedded
	for attempt := 1; ; attempt++ {
		b, err := Open(ctx, opts, log)
		if err == nil {
			limits := DefaultLimits()
			if opts.Limits != nil {
				limits = *opts.Limits
			}
			r := Replication{Replicas: opts.Replicas, Set: opts.ReplicasSet, Log: log}
			ensure := func(ctx context.Context, js jetstream.JetStream) error { return limits.EnsureReplicated(ctx, js, r) }
			if opts.Worker {
				ensure = func(ctx context.Context, js jetstream.JetStream) error {
					return EnsureMissingReplicated(ctx, js, r.Replicas)
				}
			}
			if err = ensure(ctx, b.JS); err == nil {
				waiting(nil)
				if attempt > 1 {
					log.Info().Str("url", secret.RedactURL(b.URL)).Msg("NATS and JetStream are up")
				}
				return b, nil
			}
			if refused := inboxRefused(b.Conn, opts.InboxPrefix, opts.Worker); refused != nil {
				err = fmt.Errorf("%w: %w", err, refused)
			}
			b.Close()
		}
		if embedded || ctx.Err() != nil {
			return nil, err
		}
		waiting(err)
		ev := log.Info()
		if attempt == 1 {
			ev = log.Warn()
		}
		ev.Err(err).Str("url", secret.RedactURL(opts.URL)).Int("attempt", attempt).Msg("waiting for NATS and JetStream")
		d := min(250*time.Millisecond<<min(attempt-1, 5), 5*time.Second)
		select {
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), err)
		case <-time.After(d):
		}
	}
}

// inboxRefused is the server's refusal of nc's subscription to its inbox
// (prefix, or _INBOX), where the reply to every request comes, JetStream's
// API included: every request then fails as a timeout, which says nothing
// of why. It is nil when the server refused no such subscription.
func inboxRefused(nc *nats.Conn, prefix string, worker bool) error {
	last := nc.LastError()
	if prefix == "" {
		prefix = strings.TrimSuffix(nats.InboxPrefix, ".")
	}
	if !errors.Is(last, nats.ErrPermissionViolation) || !strings.Contains(last.Error(), `Subscription to "`+prefix+".") {
		return nil
	}
	hint := ""
	if worker {
		hint = " (a worker hears its replies on " + wire.WorkerInboxPrefix("NAME") + ", NAME being its identity up to its first '_', " +
			"unless the JWT of its --nats-creds lets it subscribe to _INBOX.> and not there: docs/operations.md, \"Who may do what\")"
	}
	return fmt.Errorf("NATS refuses this client's user the inbox %s.>, where the replies to its requests come (%w): allow the user to subscribe to %s.>%s",
		prefix, last, prefix, hint)
}
