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
	var changed <-chan struct{} // nil: the provider tells of no change
	if wp, ok := w.p.(Watcher); ok {
		changed = wp.Changed()
	}
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
		case <-changed:
			w.o.Log.Info().Msg("a machine stopped outside a task: reporting the inventory now")
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

// report lists the provider's machines and publishes the report, a part
// at a time as the list goes (with a Walker provider, as the provider
// reads them).
func (w *Worker) report(ctx context.Context, request string) error {
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	at := w.o.Now().UTC()
	nc := w.js.Conn()
	// The envelope (provider, worker, report, time) is small beside a
	// part; a server that allows less than 1 MiB gets smaller parts.
	rp := &reporter{nc: nc, budget: min(partBytes, max(int(nc.MaxPayload())*3/4, 16<<10)),
		inv: wire.Inventory{Provider: w.p.Name(), Worker: w.o.ID, HostBound: w.hostBound,
			Report: w.o.ID + "-" + strconv.FormatInt(at.UnixNano(), 36), Request: request, Time: at,
			Instances: make([]wire.Instance, 0, 64)}}
	var err error
	if wk, ok := w.p.(Walker); ok {
		err = wk.Walk(lctx, func(in Instance) error { return rp.add(ctx, in) })
	} else {
		var list []Instance
		if list, err = w.p.List(lctx); err == nil {
			for _, in := range list {
				if err = rp.add(ctx, in); err != nil {
					break
				}
			}
		}
	}
	switch {
	case rp.err != nil:
		return rp.err
	case err != nil:
		return fmt.Errorf("list: %w", err)
	}
	if rp.nameless > 0 {
		w.o.Log.Warn().Int("instances", rp.nameless).
			Msg("inventory: the provider lists machines without a cluster or a name; left out of the report")
	}
	if rp.oversized > 0 {
		w.o.Log.Warn().Int("instances", rp.oversized).Str("first", rp.why).
			Msg("inventory: the provider lists machines with more than any provider writes of one; left out of the report")
	}
	if rp.send(ctx, true) != nil {
		return rp.err
	}
	w.inventories.Add(1)
	w.o.Log.Debug().Int("machines", rp.machines).Str("request", request).Msg("inventory reported")
	return nil
}

// reporter cuts a report into parts as its machines come and sends each
// once it is full: at most inventoryPart machines and budget bytes (a
// machine larger than the budget is a part alone). Every part but the
// last says Parts 0 (more follow); the last says how many there are.
type reporter struct {
	nc       *nats.Conn
	budget   int
	inv      wire.Inventory // the part being filled
	size     int            // its machines' bytes, as instanceSize counts them
	machines int            // in the parts sent
	nameless int            // instances left out: no cluster or name
	// oversized: instances left out for what they carry (wire.CheckInstance);
	// why says so of the first.
	oversized int
	why       string
	err       error // why a part was not sent
}

// errPartNotSent stops a provider's Walk once a part could not be sent
// (the reporter keeps why).
var errPartNotSent = errors.New("inventory part not sent")

// add puts one machine in the report, sending the part before it first
// when the machine does not fit there.
func (rp *reporter) add(ctx context.Context, in Instance) error {
	if in.Cluster == "" || in.Name == "" {
		// No record's machine, and the leader refuses a part that
		// carries one: one such value in a cloud kept every report from
		// being whole, and machines gone from being found.
		rp.nameless++
		return nil
	}
	wi := wire.Instance{Cluster: in.Cluster, Machine: in.Name, Deployment: in.Deployment,
		Role: in.Role, Version: in.Version, TemplateHash: in.TemplateHash, Labels: in.Labels, Annotations: in.Annotations,
		ProviderID: in.ProviderID, Addresses: in.Addresses, Reason: in.Reason, Message: cutMessage(in.Message)}
	if err := wire.CheckInstance(&wi); err != nil {
		// The leader refuses a part that carries it, as one without a
		// name: every report would be left unfinished.
		rp.oversized++
		if rp.oversized == 1 {
			rp.why = fmt.Sprintf("%.64s/%.64s: %v", in.Cluster, in.Name, err)
		}
		return nil
	}
	n := instanceSize(in)
	if k := len(rp.inv.Instances); k > 0 && (k == inventoryPart || rp.size+n > rp.budget) {
		if rp.inv.Part == wire.MaxInventoryParts-1 {
			rp.err = fmt.Errorf("inventory: more than %d parts (%d machines so far): the leader takes no larger report", wire.MaxInventoryParts, rp.machines+k)
			return errPartNotSent
		}
		if err := rp.send(ctx, false); err != nil {
			return err
		}
	}
	rp.size += n
	rp.inv.Instances = append(rp.inv.Instances, wi)
	return nil
}

// send publishes the part being filled (the report's last when last) and
// waits for the leader to take it; a part not taken ends the report.
func (rp *reporter) send(ctx context.Context, last bool) error {
	inv := &rp.inv
	inv.Parts = 0
	if last {
		inv.Parts = inv.Part + 1
	}
	data, err := wire.Encode(inv)
	if err != nil {
		rp.err = err
		return errPartNotSent
	}
	// Each part waits for the leader's answer before the next goes:
	// published all at once, the reports of a few large workers
	// (45 MiB each at 130,000 machines) outran a busy leader's
	// connection, and the NATS server closed it as a slow consumer
	// (past its 64 MiB of pending data), losing parts of every report.
	pctx, cancel := context.WithTimeout(ctx, partAnswer)
	_, err = rp.nc.RequestWithContext(pctx, wire.InventorySubject(inv.Provider, inv.Worker), data)
	cancel()
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		rp.err = errNoLeader
	case err != nil:
		what := "more follow"
		if last {
			what = fmt.Sprintf("the last of %d", inv.Parts)
		}
		rp.err = fmt.Errorf("inventory part %d (%s; %d machines, %d bytes): the leader did not take it: %w", inv.Part, what, len(inv.Instances), len(data), err)
	}
	if rp.err != nil {
		return errPartNotSent
	}
	rp.machines += len(inv.Instances)
	// The part's instances go with it: the next part does not keep them.
	clear(inv.Instances)
	inv.Instances = inv.Instances[:0]
	inv.Part++
	rp.size = 0
	return nil
}

// ensure makes the task stream and the buckets again (after a NATS store
// was lost), so the worker's consumers can be made; those that exist keep
// the daemon's settings.
func (w *Worker) ensure(ctx context.Context) error {
	return natsbus.EnsureMissing(ctx, w.js)
}
