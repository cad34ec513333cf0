package providers

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// inventoryPart is how many instances one inventory message carries, so a
// report of 100,000 machines stays under NATS's 1 MiB message limit.
const inventoryPart = 1000

// inventory reports the provider's List when the worker starts, every
// InventoryInterval and whenever a leader asks, until ctx ends. Requests
// that arrive while a report is being made are answered by the next one.
func (w *Worker) inventory(ctx context.Context) {
	reqs := make(chan *nats.Msg, 16)
	sub, err := w.js.Conn().ChanSubscribe(wire.SubjectInventoryRequest, reqs)
	if err != nil {
		w.o.Log.Error().Err(err).Msg("inventory: cannot listen for requests; reporting on the interval only")
	} else {
		defer func() { _ = sub.Unsubscribe() }()
	}
	tick := time.NewTicker(w.o.InventoryInterval)
	defer tick.Stop()
	request := ""
	for {
		if err := w.report(ctx, request); err != nil && ctx.Err() == nil {
			w.o.Log.Warn().Err(err).Msg("inventory not reported")
		}
		request = ""
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case m := <-reqs:
			if r, err := wire.DecodeInventoryRequest(m.Data); err == nil {
				request = r.ID
			}
		}
		// Several requests waiting are answered by one report.
		for drained := false; !drained; {
			select {
			case m := <-reqs:
				if r, err := wire.DecodeInventoryRequest(m.Data); err == nil {
					request = r.ID
				}
			default:
				drained = true
			}
		}
	}
}

// report lists the provider's machines and publishes the report.
func (w *Worker) report(ctx context.Context, request string) error {
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	at := w.o.Now().UTC()
	list, err := w.p.List(lctx)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	parts := max(1, (len(list)+inventoryPart-1)/inventoryPart)
	id := w.o.ID + "-" + strconv.FormatInt(at.UnixNano(), 36)
	subject := wire.InventorySubject(w.p.Name(), w.o.ID)
	nc := w.js.Conn()
	// One part's instances at a time: a report of 130,000 machines does not
	// hold a second copy of the list.
	instances := make([]wire.Instance, 0, min(len(list), inventoryPart))
	for part := range parts {
		instances = instances[:0]
		for _, in := range list[min(part*inventoryPart, len(list)):min((part+1)*inventoryPart, len(list))] {
			instances = append(instances, wire.Instance{Cluster: in.Cluster, Machine: in.Name, Deployment: in.Deployment, Role: in.Role,
				Version: in.Version, TemplateHash: in.TemplateHash, Labels: in.Labels, Annotations: in.Annotations, ProviderID: in.ProviderID,
				Addresses: in.Addresses, Reason: in.Reason, Message: in.Message})
		}
		inv := wire.Inventory{Provider: w.p.Name(), Worker: w.o.ID, HostBound: w.hostBound, Report: id,
			Part: part, Parts: parts, Request: request, Time: at, Instances: instances}
		data, err := wire.Encode(&inv)
		if err != nil {
			return err
		}
		if err := nc.Publish(subject, data); err != nil {
			return fmt.Errorf("publish inventory: %w", err)
		}
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		return fmt.Errorf("publish inventory: %w", err)
	}
	w.inventories.Add(1)
	w.o.Log.Debug().Int("machines", len(list)).Str("request", request).Msg("inventory reported")
	return nil
}

// ensure makes the task stream and the buckets again (after a NATS store
// was lost), so the worker's consumers can be made; those that exist keep
// the daemon's settings.
func (w *Worker) ensure(ctx context.Context) error {
	return natsbus.EnsureMissing(ctx, w.js)
}
