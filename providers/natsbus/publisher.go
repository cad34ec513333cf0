package natsbus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Publisher publishes tasks asynchronously with the task's ID and attempt
// as JetStream message ID (wire.Task.MsgID), so the same attempt published
// again after a restart is deduplicated and a new attempt is not.
// It is safe for concurrent use.
type Publisher struct {
	js jetstream.JetStream
}

// NewPublisher returns a task publisher on js.
func NewPublisher(js jetstream.JetStream) *Publisher { return &Publisher{js: js} }

// Publish sends t to its subject (wire.Task.Subject) without
// waiting for the server. Wait (or the returned future) says whether it was
// stored.
func (p *Publisher) Publish(ctx context.Context, t *wire.Task) (jetstream.PubAckFuture, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if t.Machine.Provider == "" || t.Machine.Cluster == "" || t.Machine.Name == "" {
		return nil, fmt.Errorf("publish task %s: machine needs provider, cluster and name", t.ID)
	}
	data, err := wire.Encode(t)
	if err != nil {
		return nil, err
	}
	for _, tok := range []string{t.Machine.Provider, t.Machine.Cluster, t.Machine.Name} {
		if !wire.ValidToken(tok) {
			return nil, fmt.Errorf("publish task %s: %q cannot be part of a subject", t.ID, tok)
		}
	}
	if t.Worker != "" && !wire.ValidToken(t.Worker) {
		return nil, fmt.Errorf("publish task %s: worker %q cannot be part of a subject", t.ID, t.Worker)
	}
	subj := t.Subject()
	if len(subj) > wire.MaxSubject {
		// Sent, it would close the connection for good.
		return nil, fmt.Errorf("publish task %s: its subject is %d bytes long, over %d", t.ID, len(subj), wire.MaxSubject)
	}
	// Wait for room among the pending publishes as long as ctx allows,
	// instead of failing after nats.go's default 200ms stall.
	stall := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		stall = max(time.Until(d), time.Millisecond)
	}
	f, err := p.js.PublishAsync(subj, data, jetstream.WithMsgID(t.MsgID()), jetstream.WithStallWait(stall))
	if err != nil {
		return nil, fmt.Errorf("publish task %s: %w", t.ID, err)
	}
	return f, nil
}

// Wait blocks until every publish on this connection is acknowledged, or ctx
// ends. Check individual futures for per-task errors.
func (p *Publisher) Wait(ctx context.Context) error {
	select {
	case <-p.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for task acks (%d pending): %w", p.js.PublishAsyncPending(), ctx.Err())
	}
}
