package providers

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// pendingAck is a task whose outcome events were published; the acker
// acks (or terminates) it once they are stored.
type pendingAck struct {
	msg    jetstream.Msg
	futs   []jetstream.PubAckFuture
	term   string // non-empty: terminate with this reason instead of ack
	taskID string
}

// handle runs one task: decode, provider call with in-progress acks, then
// the outcome event; the ack itself is left to the acker.
func (w *Worker) handle(ctx context.Context, q queued, slot *progress, acks chan<- pendingAck) {
	msg := q.msg
	task, err := decodeTask(msg.Data())
	if err == nil && !w.onSubject(msg.Subject(), &task) {
		err = errMismatch(msg.Subject(), w.p.Name(), task)
	}
	if err != nil {
		w.malformed.Add(1)
		w.o.Log.Error().Err(err).Str("subject", msg.Subject()).Msg("terminating malformed task")
		_ = msg.TermWithReason(err.Error())
		return
	}
	attempt := 1
	if md, err := msg.Metadata(); err == nil {
		attempt = int(md.NumDelivered)
	}
	if w.hostBound && task.Worker == "" {
		task.Worker = w.o.ID // the worker that takes a machine holds it
	}
	if held := time.Since(q.at); held > w.o.AckWait/2 {
		// The worker was paused or overloaded: JetStream may have given
		// the task to another worker already, which would then run it at
		// the same time. Neither ack nor nak (either could settle the
		// other worker's delivery): if nobody holds it, it comes back.
		w.stale.Add(1)
		w.o.Log.Info().Str("task", task.ID).Int("attempt", task.Attempt).Str("cluster", task.Machine.Cluster).
			Str("machine", task.Machine.Name).Dur("held", held).Msg("dropping a task that waited past half its ack wait")
		return
	}
	stale, err := w.records.staleness(ctx, &task)
	if err != nil {
		w.retry(msg, &task, attempt, err)
		return
	}
	if stale != "" {
		w.stale.Add(1)
		w.o.Log.Info().Str("task", task.ID).Int("attempt", task.Attempt).Str("cluster", task.Machine.Cluster).
			Str("machine", task.Machine.Name).Str("why", stale).Msg("dropping stale task")
		_ = msg.Ack()
		return
	}
	start, done := wire.PhaseProvisioning, wire.PhaseRunning
	if task.Operation == wire.OpDelete {
		start, done = wire.PhaseDeleting, wire.PhaseDeleted
	}
	w.o.Log.Debug().Str("task", task.ID).Str("op", string(task.Operation)).Str("cluster", task.Machine.Cluster).
		Str("machine", task.Machine.Name).Int("attempt", attempt).Msg("task")

	began := time.Now()
	slot.begin(msg, &task, start)
	var inst Instance
	if task.Operation == wire.OpCreate {
		if len(task.Bootstrap) > 0 {
			if task.Machine.Bootstrap, err = bootstrap.Open(w.o.Keys, &task); err != nil {
				err = Permanent(err)
			}
		}
		if err == nil {
			inst, err = w.p.Create(ctx, task.Machine)
		}
	} else {
		err = w.p.Delete(ctx, task.Machine)
	}
	futs := slot.end()

	switch {
	case err == nil:
		ev := w.event(&task, done)
		if task.Operation == wire.OpCreate {
			ev.ProviderID, ev.Addresses = inst.ProviderID, inst.Addresses
			if inst.Version != "" {
				ev.Version = inst.Version
			}
		}
		f, perr := w.publish(&ev)
		if perr != nil {
			w.retry(msg, &task, attempt, perr)
			return
		}
		w.succeeded.Add(1)
		w.o.Log.Info().Str("task", task.ID).Str("op", string(task.Operation)).Str("cluster", task.Machine.Cluster).
			Str("machine", task.Machine.Name).Int("attempt", attempt).Dur("took", time.Since(began)).Msg("task done")
		acks <- pendingAck{msg: msg, futs: append(futs, f), taskID: task.ID}
	case IsPermanent(err) || attempt >= w.o.MaxAttempts:
		w.o.Log.Error().Err(err).Str("task", task.ID).Str("cluster", task.Machine.Cluster).
			Str("machine", task.Machine.Name).Int("attempt", attempt).Msg("task failed")
		ev := w.event(&task, wire.PhaseFailed)
		ev.Message = cutMessage(err.Error())
		f, perr := w.publish(&ev)
		if perr != nil {
			w.retry(msg, &task, attempt, perr)
			return
		}
		w.failed.Add(1)
		acks <- pendingAck{msg: msg, futs: append(futs, f), term: ev.Message, taskID: task.ID}
	default:
		w.retry(msg, &task, attempt, err)
	}
}

// maxEventMessage is how much of a provider's error a Failed event
// carries: the event stream refuses messages over 64 KiB, and a refused
// event left the task to be retried for as long as the stream kept it.
const maxEventMessage = wire.MaxEventMessage

// cutMessage is s as a Failed event carries it.
func cutMessage(s string) string { return wire.Cut(s, maxEventMessage) }

func (w *Worker) retry(msg jetstream.Msg, task *wire.Task, attempt int, err error) {
	d := w.o.Backoff(attempt)
	w.retried.Add(1)
	w.o.Log.Warn().Err(err).Str("task", task.ID).Str("cluster", task.Machine.Cluster).
		Str("machine", task.Machine.Name).Int("attempt", attempt).Dur("retryIn", d).Msg("task will be retried")
	_ = msg.NakWithDelay(d)
}

func (w *Worker) event(task *wire.Task, phase wire.Phase) wire.Event {
	return wire.Event{
		TaskID:  task.ID,
		Attempt: task.Attempt,
		Worker:  task.Worker,
		Cluster: task.Machine.Cluster,
		Machine: task.Machine.Name,
		Phase:   phase,
		Version: task.Machine.Version,
		Time:    w.o.Now().UTC(),
	}
}

// publish sends an event asynchronously. Events carry no message ID: they
// report state, so the copy a redelivered task may publish is harmless, and
// without the header the event path costs less.
func (w *Worker) publish(ev *wire.Event) (jetstream.PubAckFuture, error) {
	data, err := wire.Encode(ev)
	if err != nil {
		return nil, err
	}
	return w.js.PublishAsync(wire.EventSubject(ev.Cluster, w.o.ID), data, w.stall)
}

// acker acknowledges tasks in the order their events were published, once
// the events are stored. A lost event hands the task back for a retry.
func (w *Worker) acker(acks <-chan pendingAck) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for pa := range acks {
		ok := true
		for _, f := range pa.futs {
			timer.Reset(w.o.AckWait)
			select {
			case <-f.Ok():
			case err := <-f.Err():
				ok = false
				w.o.Log.Warn().Err(err).Str("task", pa.taskID).Msg("event not stored; task will be retried")
			case <-timer.C:
				ok = false
				w.o.Log.Warn().Str("task", pa.taskID).Msg("event not acknowledged in time; task will be retried")
			}
			if !ok {
				break
			}
		}
		switch {
		case !ok:
			_ = pa.msg.NakWithDelay(time.Second)
		case pa.term != "":
			_ = pa.msg.TermWithReason(pa.term)
		default:
			_ = pa.msg.Ack()
		}
	}
}
