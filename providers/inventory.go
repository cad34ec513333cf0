package providers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// inventoryPart is how many instances one inventory message carries at
// most; partBytes how many bytes of them (encoded, at most), so that a
// part stays under NATS's message limit (1 MiB by default) whatever the
// machines' labels and annotations: 1,000 machines with 1 KiB of
// annotations each made a part NATS refused, and the report never went out.
const (
	inventoryPart = 1000
	partBytes     = 768 << 10
	// partAnswer is how long a worker waits for the leader to take a part.
	partAnswer = 30 * time.Second
)

// errNoLeader: no daemon listens for inventories (none leads now).
var errNoLeader = errors.New("no leader is listening; a new leader asks for the report")

// cutParts returns where each part of a report of list ends: at most
// inventoryPart instances and budget bytes each (one instance larger than
// the budget is a part alone).
func cutParts(list []Instance, budget int) []int {
	var ends []int
	start, size := 0, 0 // the part being filled
	for i, in := range list {
		n := instanceSize(in)
		if i > start && (i-start == inventoryPart || size+n > budget) {
			ends = append(ends, i)
			start, size = i, 0
		}
		size += n
	}
	if len(list) > 0 || len(ends) == 0 {
		ends = append(ends, len(list))
	}
	return ends
}

// instanceSize is at least the size of the instance's JSON in a part, its
// message cut as the part carries it: its field names and punctuation and
// its strings as JSON writes them.
func instanceSize(in Instance) int {
	n := 256 // field names, colons, commas, braces
	for _, s := range []string{in.Cluster, in.Name, in.ProviderID, in.Version, in.Deployment, string(in.Role), in.TemplateHash, in.Reason, cutMessage(in.Message)} {
		n += wire.JSONStringLen(s)
	}
	for _, a := range in.Addresses {
		n += wire.JSONStringLen(a) + 1
	}
	for _, m := range []map[string]string{in.Labels, in.Annotations} {
		for k, v := range m {
			n += wire.JSONStringLen(k) + wire.JSONStringLen(v) + 2
		}
	}
	return n
}

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
		switch err := w.report(ctx, request); {
		case errors.Is(err, errNoLeader):
			// No daemon leads now: a new leader asks for inventories.
			w.o.Log.Debug().Err(err).Msg("inventory not reported")
		case err != nil && ctx.Err() == nil:
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
	nc := w.js.Conn()
	// The envelope (provider, worker, report, time) is small beside a
	// part; a server that allows less than 1 MiB gets smaller parts.
	ends := cutParts(list, min(partBytes, max(int(nc.MaxPayload())*3/4, 16<<10)))
	parts := len(ends)
	id := w.o.ID + "-" + strconv.FormatInt(at.UnixNano(), 36)
	subject := wire.InventorySubject(w.p.Name(), w.o.ID)
	// One part's instances at a time: a report of 130,000 machines does not
	// hold a second copy of the list.
	instances := make([]wire.Instance, 0, min(len(list), inventoryPart))
	start := 0
	for part, end := range ends {
		instances = instances[:0]
		for _, in := range list[start:end] {
			instances = append(instances, wire.Instance{Cluster: in.Cluster, Machine: in.Name, Deployment: in.Deployment, Role: in.Role,
				Version: in.Version, TemplateHash: in.TemplateHash, Labels: in.Labels, Annotations: in.Annotations, ProviderID: in.ProviderID,
				Addresses: in.Addresses, Reason: in.Reason, Message: cutMessage(in.Message)})
		}
		inv := wire.Inventory{Provider: w.p.Name(), Worker: w.o.ID, HostBound: w.hostBound, Report: id,
			Part: part, Parts: parts, Request: request, Time: at, Instances: instances}
		data, err := wire.Encode(&inv)
		if err != nil {
			return err
		}
		// Each part waits for the leader's answer before the next goes:
		// published all at once, the reports of a few large workers
		// (45 MiB each at 130,000 machines) outran a busy leader's
		// connection, and the NATS server closed it as a slow consumer
		// (past its 64 MiB of pending data), losing parts of every report.
		pctx, cancel := context.WithTimeout(ctx, partAnswer)
		_, err = nc.RequestWithContext(pctx, subject, data)
		cancel()
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return errNoLeader
		case err != nil:
			return fmt.Errorf("inventory part %d of %d (%d machines, %d bytes): the leader did not take it: %w", part, parts, end-start, len(data), err)
		}
		start = end
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
