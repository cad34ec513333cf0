package natsbus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Stream and bucket settings. Ensure applies them; they are exported so a
// daemon can report them.
const (
	// DedupWindow is how long a task ID is remembered: re-publishing the
	// same task within it is a no-op.
	DedupWindow = 10 * time.Minute
	// LeaderTTL is the lease of the gitfleet-leader bucket.
	LeaderTTL = 10 * time.Second

	// The streams' limits: nothing a worker or a forged message sends
	// can fill the store. A task carries a machine's spec; an event a
	// phase and a message. A task stream that is full refuses new tasks
	// (the daemon reports it and publishes again) rather than dropping
	// old ones.
	TaskMaxMsgSize  = 256 << 10
	TaskMaxBytes    = 1 << 30
	TaskMaxAge      = 7 * 24 * time.Hour
	EventMaxMsgSize = 64 << 10
	EventMaxBytes   = 256 << 20
	EventMaxAge     = 24 * time.Hour
)

// TaskStreamConfig is GITFLEET_TASKS: a work queue, one consumer per
// provider, messages removed once acknowledged.
func TaskStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        wire.StreamTasks,
		Description: "gitfleet machine tasks, one durable consumer per provider",
		Subjects:    []string{wire.SubjectTasks + ".>"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Duplicates:  DedupWindow,
		Discard:     jetstream.DiscardNew,
		MaxMsgSize:  TaskMaxMsgSize,
		MaxBytes:    TaskMaxBytes,
		MaxAge:      TaskMaxAge,
	}
}

// EventStreamConfig is GITFLEET_EVENTS: what workers report, kept for a day.
func EventStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        wire.StreamEvents,
		Description: "gitfleet machine events from provider workers",
		Subjects:    []string{wire.SubjectEvents + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      EventMaxAge,
		MaxBytes:    EventMaxBytes,
		MaxMsgSize:  EventMaxMsgSize,
		Discard:     jetstream.DiscardOld,
		Duplicates:  2 * time.Minute,
	}
}

// Ensure creates or updates the streams and KV buckets. It is idempotent:
// every daemon and worker may call it at start.
func Ensure(ctx context.Context, js jetstream.JetStream) error {
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, cfg := range []jetstream.StreamConfig{TaskStreamConfig(), EventStreamConfig()} {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
	}
	for _, cfg := range []jetstream.KeyValueConfig{
		{Bucket: wire.BucketMachines, Description: "observed state of every machine", History: 1, Storage: jetstream.FileStorage},
		{Bucket: wire.BucketLeader, Description: "leader lease", History: 1, TTL: LeaderTTL, Storage: jetstream.FileStorage},
		{Bucket: wire.BucketRollouts, Description: "recorded rollout decisions: admissions, create backoff", History: 1, Storage: jetstream.FileStorage},
	} {
		if _, err := js.CreateOrUpdateKeyValue(ctx, cfg); err != nil {
			return fmt.Errorf("ensure bucket %s: %w", cfg.Bucket, err)
		}
	}
	return nil
}

func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
