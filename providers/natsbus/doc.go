// Package natsbus is gitfleet's task bus on NATS JetStream: the embedded
// nats-server, connecting to a real NATS cluster, the streams and buckets
// every component expects (Ensure), and publishing tasks.
//
// A daemon wires it like this:
//
//	bus, err := natsbus.Open(ctx, opts, log) // opts.URL "embedded" or nats://…
//	defer bus.Close()
//	if err := natsbus.Ensure(ctx, bus.JS); err != nil { … }
//	pub := natsbus.NewPublisher(bus.JS)
//	pub.Publish(ctx, &task)          // async, msg ID = task ID
//	err = pub.Wait(ctx)              // every publish acknowledged
//
// Workers publish wire.Event on wire.EventSubject(cluster) into the
// GITFLEET_EVENTS stream; nodes publish wire.Heartbeat on
// wire.HeartbeatSubject(cluster, machine) as plain NATS messages (not stored).
package natsbus
