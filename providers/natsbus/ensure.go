package natsbus

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

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

// Limits are the streams' size and age limits: nothing a worker or a
// forged message sends can fill the store. The message sizes are fixed
// (a task carries one machine's spec, an event a phase and a message);
// bytes and age are the operator's (--task-stream-max-bytes and the like).
type Limits struct {
	TaskMaxBytes  int64
	TaskMaxAge    time.Duration
	EventMaxBytes int64
	EventMaxAge   time.Duration
}

// DefaultLimits are the limits when no flag says otherwise.
func DefaultLimits() Limits {
	return Limits{TaskMaxBytes: TaskMaxBytes, TaskMaxAge: TaskMaxAge, EventMaxBytes: EventMaxBytes, EventMaxAge: EventMaxAge}
}

// BindFlags registers the limits' flags on fs, with l's values as defaults.
func (l *Limits) BindFlags(fs *flag.FlagSet) {
	fs.Func("task-stream-max-bytes", fmt.Sprintf("size of the task stream (GITFLEET_TASKS) at most, e.g. 512MiB; a full stream refuses new tasks (default %s)", formatBytes(l.TaskMaxBytes)),
		func(v string) error { return parseBytes(v, &l.TaskMaxBytes) })
	fs.DurationVar(&l.TaskMaxAge, "task-stream-max-age", l.TaskMaxAge, "age at which an unanswered task is dropped from the stream")
	fs.Func("event-stream-max-bytes", fmt.Sprintf("size of the event stream (GITFLEET_EVENTS) at most; the oldest events go first (default %s)", formatBytes(l.EventMaxBytes)),
		func(v string) error { return parseBytes(v, &l.EventMaxBytes) })
	fs.DurationVar(&l.EventMaxAge, "event-stream-max-age", l.EventMaxAge, "age at which events are dropped from the stream")
}

// TaskStreamConfig is GITFLEET_TASKS with the default limits.
func TaskStreamConfig() jetstream.StreamConfig { return DefaultLimits().TaskStream() }

// EventStreamConfig is GITFLEET_EVENTS with the default limits.
func EventStreamConfig() jetstream.StreamConfig { return DefaultLimits().EventStream() }

// TaskStream is GITFLEET_TASKS: a work queue, one consumer per provider,
// messages removed once acknowledged.
func (l Limits) TaskStream() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        wire.StreamTasks,
		Description: "gitfleet machine tasks, one durable consumer per provider",
		Subjects:    []string{wire.SubjectTasks + ".>"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Duplicates:  DedupWindow,
		Discard:     jetstream.DiscardNew,
		MaxMsgSize:  TaskMaxMsgSize,
		MaxBytes:    l.TaskMaxBytes,
		MaxAge:      l.TaskMaxAge,
	}
}

// EventStream is GITFLEET_EVENTS: what workers report, kept for a day.
func (l Limits) EventStream() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        wire.StreamEvents,
		Description: "gitfleet machine events from provider workers",
		Subjects:    []string{wire.SubjectEvents + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      l.EventMaxAge,
		MaxBytes:    l.EventMaxBytes,
		MaxMsgSize:  EventMaxMsgSize,
		Discard:     jetstream.DiscardOld,
		Duplicates:  2 * time.Minute,
	}
}

// parseBytes reads a size: a number of bytes, or one with KiB, MiB or GiB.
func parseBytes(v string, dst *int64) error {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q: want a positive size, e.g. 536870912, 512MiB or 1GiB", v)
	}
	*dst = n * mult
	return nil
}

func formatBytes(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return strconv.FormatInt(n, 10)
}

// Ensure creates or updates the streams and KV buckets. It is idempotent:
// every daemon and worker may call it at start.
func Ensure(ctx context.Context, js jetstream.JetStream) error {
	return DefaultLimits().Ensure(ctx, js)
}

// Ensure is natsbus.Ensure with l's limits, and one replica for what it
// makes.
func (l Limits) Ensure(ctx context.Context, js jetstream.JetStream) error {
	return l.EnsureReplicated(ctx, js, Replication{})
}

// Replication is how many servers keep the streams and buckets.
type Replication struct {
	// Replicas of what is made (0: 1).
	Replicas int
	// Set: the operator gave Replicas, so existing streams and buckets
	// get it too; otherwise they keep theirs, never lowered behind the
	// operator's back (say, after `nats stream edit --replicas 3`).
	Set bool
	Log zerolog.Logger
}

// replicas is what a stream or bucket gets: cur is what it has (0: it does
// not exist yet).
func (r Replication) replicas(cur int) int {
	switch {
	case cur == 0 || r.Set:
		return max(r.Replicas, 1)
	}
	return cur
}

// EnsureReplicated is Ensure with the replicas r says.
func (l Limits) EnsureReplicated(ctx context.Context, js jetstream.JetStream, r Replication) error {
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, cfg := range []jetstream.StreamConfig{l.TaskStream(), l.EventStream()} {
		cur := currentReplicas(ctx, js, cfg.Name)
		cfg.Replicas = r.replicas(cur)
		if err := Attempts(ctx, func(ctx context.Context) error { _, err := js.CreateOrUpdateStream(ctx, cfg); return err }); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
		r.logChange("stream", cfg.Name, cur, cfg.Replicas)
	}
	for _, cfg := range bucketConfigs() {
		cur := currentReplicas(ctx, js, "KV_"+cfg.Bucket)
		cfg.Replicas = r.replicas(cur)
		if err := Attempts(ctx, func(ctx context.Context) error { _, err := js.CreateOrUpdateKeyValue(ctx, cfg); return err }); err != nil {
			return fmt.Errorf("ensure bucket %s: %w", cfg.Bucket, err)
		}
		r.logChange("bucket", cfg.Bucket, cur, cfg.Replicas)
	}
	return nil
}

func (r Replication) logChange(what, name string, from, to int) {
	if from != 0 && from != to {
		r.Log.Info().Str(what, name).Int("from", from).Int("to", to).Msg("replicas changed, as --nats-replicas says")
	}
}

// currentReplicas is the replicas of stream name, 0 when it does not
// exist (or cannot be read: then CreateOrUpdate says why).
func currentReplicas(ctx context.Context, js jetstream.JetStream, name string) int {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0
	}
	return s.CachedInfo().Config.Replicas
}

// EnsureMissing makes only the streams and buckets that do not exist, and
// leaves the settings of the others alone: what a worker does, whose
// credentials may only read them (the daemon owns their settings). A
// worker that may not make a missing one gets an error, and waits for the
// daemon.
func EnsureMissing(ctx context.Context, js jetstream.JetStream) error {
	return EnsureMissingReplicated(ctx, js, 1)
}

// EnsureMissingReplicated is EnsureMissing, making what is missing with
// replicas servers each.
func EnsureMissingReplicated(ctx context.Context, js jetstream.JetStream, replicas int) error {
	ctx, cancel := withDefaultTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, cfg := range []jetstream.StreamConfig{TaskStreamConfig(), EventStreamConfig()} {
		cfg.Replicas = max(replicas, 1)
		_, err := js.Stream(ctx, cfg.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = js.CreateStream(ctx, cfg)
		}
		if err != nil {
			return fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
	}
	for _, cfg := range bucketConfigs() {
		cfg.Replicas = max(replicas, 1)
		_, err := js.KeyValue(ctx, cfg.Bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			_, err = js.CreateKeyValue(ctx, cfg)
		}
		if err != nil {
			return fmt.Errorf("bucket %s: %w", cfg.Bucket, err)
		}
	}
	return nil
}

func bucketConfigs() []jetstream.KeyValueConfig {
	return []jetstream.KeyValueConfig{
		{Bucket: wire.BucketMachines, Description: "observed state of every machine", History: 1, Storage: jetstream.FileStorage},
		{Bucket: wire.BucketLeader, Description: "leader lease", History: 1, TTL: LeaderTTL, Storage: jetstream.FileStorage},
		{Bucket: wire.BucketRollouts, Description: "recorded rollout decisions: admissions, create backoff", History: 1, Storage: jetstream.FileStorage},
		{Bucket: wire.BucketPKI, Description: "sealed cluster CAs and bootstrap tokens", History: 1, Storage: jetstream.FileStorage},
		// The inmemory provider's cloud: made here, by the daemon, since a
		// worker may not make or change a stream (WorkerPermissions).
		{Bucket: wire.BucketInmemory, Description: "machines of the inmemory provider", History: 1, Storage: jetstream.FileStorage},
	}
}

// Attempts runs f with up to 10 s for each attempt, again while ctx has
// time left and an attempt timed out or its stream could not be placed
// for a peer the meta leader counts offline: a JetStream API request made
// while a cluster elects its meta leader can go unanswered, and a stream
// of three replicas asked while a server of three restarts, or while the
// leader has not heard from one for a moment on a loaded machine, is
// refused; asking again is answered. Any other error is returned at once.
func Attempts(ctx context.Context, f func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := f(actx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		switch {
		case errors.Is(err, context.DeadlineExceeded):
		case placementRefused(err):
			select {
			case <-ctx.Done():
				return err
			case <-time.After(placementRetry):
			}
		default:
			return err
		}
	}
}

// placementRetry is how long Attempts waits before asking again for a
// stream that could not be placed.
var placementRetry = 250 * time.Millisecond

// jsErrClusterNoPeers is the server's "no suitable peers for placement"
// (JSClusterNoPeersErr).
const jsErrClusterNoPeers jetstream.ErrorCode = 10005

func placementRefused(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jsErrClusterNoPeers
}

func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
