package providers_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

const benchTasks = 20_000

func benchTaskList(n int) []wire.Task {
	tasks := make([]wire.Task, n)
	for i := range tasks {
		tasks[i] = task(wire.OpCreate, inmemory.Name, fmt.Sprintf("c%d", i%100), fmt.Sprintf("m-%d", i), "")
	}
	return tasks
}

// BenchmarkJetStreamRaw is the ceiling: the same task messages published
// with PublishAsync to GITFLEET_TASKS and pull-consumed with Ack.
func BenchmarkJetStreamRaw(b *testing.B) {
	for range b.N {
		b.StopTimer()
		e := newEnv(b)
		tasks := benchTaskList(benchTasks)
		data := make([][]byte, len(tasks))
		for i := range tasks {
			data[i], _ = wire.Encode(&tasks[i])
		}
		_, cjs := natstest.Connect(b, e.srv.ClientURL())
		cons, err := cjs.CreateOrUpdateConsumer(testCtx(b), wire.StreamTasks, jetstream.ConsumerConfig{
			Durable: "raw", FilterSubject: wire.SubjectTasks + ".>", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 4096,
		})
		if err != nil {
			b.Fatal(err)
		}
		var got atomic.Int64
		done := make(chan struct{})
		b.StartTimer()
		start := time.Now()
		cc, err := cons.Consume(func(m jetstream.Msg) {
			_ = m.Ack()
			if got.Add(1) == benchTasks {
				close(done)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		for i := range tasks {
			if _, err := e.js.PublishAsync(wire.TaskSubject(inmemory.Name, tasks[i].Machine.Cluster, tasks[i].Machine.Name), data[i], jetstream.WithMsgID(tasks[i].ID), jetstream.WithStallWait(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
		<-done
		elapsed := time.Since(start)
		b.StopTimer()
		cc.Stop()
		b.ReportMetric(benchTasks/elapsed.Seconds(), "msgs/s")
	}
}

// BenchmarkWorkerEndToEnd: tasks published, run by a worker on the inmemory
// provider with no delay, and their Running events consumed by an ordered
// consumer, as the daemon would. Goal: at least half of JetStreamRaw.
func BenchmarkWorkerEndToEnd(b *testing.B) {
	for _, progress := range []time.Duration{0, -1} {
		name := "events=outcome"
		if progress < 0 {
			name = "events=progress+outcome"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				e := newEnv(b)
				tasks := benchTaskList(benchTasks)
				natstest.Intend(b, e.js, tasks...) // the daemon's records: each task is read against its record
				p := e.inmemory(b, inmemory.Options{})
				w := e.startWorker(b, p, providers.WorkerOptions{Concurrency: 2, ProgressAfter: progress})
				_, ejs := natstest.Connect(b, e.srv.ClientURL())
				cons, err := ejs.OrderedConsumer(testCtx(b), wire.StreamEvents, jetstream.OrderedConsumerConfig{})
				if err != nil {
					b.Fatal(err)
				}
				var running atomic.Int64
				done := make(chan struct{})
				b.StartTimer()
				start := time.Now()
				cc, err := cons.Consume(func(m jetstream.Msg) {
					ev, err := wire.DecodeEvent(m.Data())
					if err == nil && ev.Phase == wire.PhaseRunning && running.Add(1) == benchTasks {
						close(done)
					}
				})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				for i := range tasks {
					if _, err := e.pub.Publish(ctx, &tasks[i]); err != nil {
						b.Fatal(err)
					}
				}
				select {
				case <-done:
				case <-time.After(2 * time.Minute):
					b.Fatalf("only %d of %d Running events after 2m; stats %+v", running.Load(), benchTasks, w.Stats())
				}
				elapsed := time.Since(start)
				b.StopTimer()
				cc.Stop()
				b.ReportMetric(benchTasks/elapsed.Seconds(), "tasks/s")
			}
		})
	}
}
