package reconciler

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// What the daemon does with an orphan (Options.Orphans).
const (
	OrphansDelete = "delete"
	OrphansReport = "report"
)

// orphanTaskPrefix starts the ID of an orphan's delete task.
const orphanTaskPrefix = "orphan."

// Defaults of the inventory options.
const (
	DefaultOrphanGrace    = 5 * time.Minute
	DefaultInventoryWait  = 5 * time.Second
	DefaultRebuildTimeout = 10 * time.Minute
)

// inventoryHold bounds how long a new leader waits for its first planning
// pass before asking the workers for their inventories.
const inventoryHold = 30 * time.Second

// inventory is what the leader knows from the providers' inventories.
//
// An inventory is a snapshot taken at some moment, and it reaches the
// leader some time later: a machine created or deleted in between makes
// it look wrong. So no inventory alone condemns anything. A difference
// (a Running machine absent, a machine no record wants) makes the machine a
// suspect and the leader asks every worker for a fresh inventory; only a
// report that answers a request made after the suspicion confirms it.
type inventory struct {
	epoch string // this leader's prefix of request IDs
	seq   int    // the newest request published
	// want: a request is due (suspects wait for it); last is when the
	// newest was published.
	want bool
	last time.Time
	// holdUntil: a new leader of a non-empty bucket asks for nothing
	// until its first planning pass is done, or until this time.
	holdUntil time.Time

	parts map[string]*partial // provider, worker and report ID → the report
	idle  *list.List          // parts, the one whose last part came longest ago first
	// loads are what each worker credential's reports being received
	// hold (wire.WorkerCredential of their worker, which the subject
	// binds): makeRoom drops the reports of the one that holds the most.
	loads     map[string]*load
	bits      uint32             // the partials' bits in use (partial.bit)
	providers map[string]*heard  // provider → workers heard from
	suspects  map[string]int     // record key → request that must confirm it
	orphans   map[string]*orphan // record key →
	// removed is when each record removed in the last listAge went: a
	// report whose List began before that may still list its machine,
	// which is no orphan.
	removed   map[string]time.Time
	lastPrune time.Time
	// listedN is how many machines the partials' listed maps hold
	// together (at most maxListed).
	listedN int

	// rebuild is set while a leader that found the machines bucket empty
	// adopts what the providers have instead of planning.
	rebuild *rebuild
}

// partial is a report whose parts are arriving. Each part is compared
// with the records as it arrives and then let go: the report keeps only
// which machines it listed, so the leader does not hold a 130,000-machine
// report's instances until its last part. A machine with a record is
// marked with the report's bit on its entry (machine.listed); what else
// the report lists is in listed: those without a record of theirs
// (orphans, second copies, machines to adopt) and those not running, or
// everything once 32 reports in the making took every bit.
type partial struct {
	id    string // its key in inventory.parts
	rep   report
	first time.Time
	last  time.Time     // when its last part came
	elem  *list.Element // in inventory.idle
	load  *load         // its worker credential's, in inventory.loads
	// parts is how many parts the report has, once a part said so (a
	// worker sends its last part knowing it; earlier workers sent the
	// count in every part); 0 until then.
	parts int
	got   map[int]bool // the parts received
	top   int          // one more than the highest part number received
	// bit is this report's mark on machine entries; 0 for none.
	bit uint32
	// listed: the machines the parts received name that bit does not
	// mark, by record key; the value is the provider's reason when the
	// machine is not running.
	listed map[string]listing
}

// load is what one worker credential's reports being received hold.
type load struct {
	cred            string
	reports, listed int
}

// list notes that the report lists in, whose record key is key; n counts
// the machines every partial lists (inventory.listedN).
func (p *partial) list(key string, in wire.Instance, n *int) {
	if p.listed == nil {
		p.listed = map[string]listing{}
	}
	if _, ok := p.listed[key]; !ok {
		*n++
		p.load.listed++
	}
	p.listed[key] = listing{reason: in.Reason, message: in.Message}
}

// What the leader keeps of inventories at most. A worker's credentials
// may publish any provider's inventory, as fast as the loop takes it:
// 20,000 parts of 50 machines no record wants, published in three
// seconds, made a million orphans to confirm that nothing ever forgot,
// half a gigabyte for good. The bounds are far above a fleet's own
// (130,000 machines a worker, a few orphans), and what the reports say
// past them waits for later reports.
//
// A report is the first to go when a part would pass them: the reports
// whose last part came longest ago make room for it (makeRoom). A worker
// sends its next part as soon as the leader took the last, so its report
// in progress is the latest to go, and a flood's reports, which never
// end, are gone once a real report needs their room. Before, the part
// that would pass them was ignored instead, and a flood of a few seconds
// kept every real report from being whole for the minute its own reports
// took to be dropped: machines gone were not found for that minute.
var (
	// maxListed bounds the machines the reports being received list
	// apart from their records' marks (partial.listed) together. A part
	// of a report that alone lists more is refused, and its report,
	// never whole, is dropped.
	maxListed = 1_000_000
	// maxReports bounds the reports being received: a worker has one at
	// a time, and each part of a new report ID costs the leader a report
	// whatever it lists (parts that listed nothing, each of a new ID,
	// were kept however many came until a minute had passed).
	maxReports = 10_000
	// maxOrphans bounds the orphans tracked; another is tracked once
	// one is deleted or forgotten.
	maxOrphans = 100_000
)

// orphanWait is how long an orphan waits for the report that confirms it
// (one answering a request made after it was found) before it is
// forgotten: a new leader's hold on requests, then a worker's List. A
// report that lists it again makes it a suspect again.
const orphanWait = inventoryHold + listAge + clockSlack

// lists says whether the report listed the machine whose record key is
// key, marked or not, and what it said of it.
func (p *partial) lists(marked bool, key string) (listing, bool) {
	if marked {
		return listing{}, true
	}
	l, ok := p.listed[key]
	return l, ok
}

// listing is what a report says of one machine it lists: nothing when
// the machine runs, else why not.
type listing struct{ reason, message string }

// heard is what one provider's workers reported.
type heard struct {
	hostBound bool
	// answered is the newest request each worker answered (0: it
	// reported on its own only).
	answered map[string]int
}

// orphan is a machine a provider has and no record wants.
type orphan struct {
	inst      wire.Instance
	provider  string
	worker    string
	hostBound bool
	after     int       // the request whose answer confirms it
	found     time.Time // when it was first listed
	confirmed time.Time // zero until confirmed
	// attempt and deleted: the orphan delete last published, and when.
	attempt int
	deleted time.Time
}

// rebuild is the state of an empty store's first leader.
type rebuild struct {
	seq   int // the request every provider must answer
	start time.Time
	// listed are the machines the status branch has, by record key: the
	// providers (and, for host-bound ones, workers) that must answer.
	listed map[string]status.MachineStatus
	// waiting says what the rebuild still waits for, as last reported;
	// providers are the providers it names.
	waiting   string
	providers []string
}

// report is the worker's report that parts belong to.
type report struct {
	provider, worker string
	hostBound        bool
	seq              int // the request it answers, 0 when none of ours
	// began is when the worker's List began, on the leader's clock as far
	// as it can tell (began, below): what changed after it is judged by a
	// later report.
	began time.Time
}

// listAge is the longest a worker's List takes (its timeout), and so how
// long before a report's first part arrives its List may have begun.
const listAge = time.Minute

// clockSlack is how far a worker's clock is taken to be from the
// leader's: a machine whose record changed within it of a List's start
// is judged by a later report.
const clockSlack = time.Second

// began is when a report's List began on the leader's clock: the time the
// worker says it began (inv.Time), but no later than the first part's
// arrival and no earlier than listAge before it, whatever the worker's
// clock says.
func began(said, first time.Time) time.Time {
	switch {
	case said.After(first):
		return first
	case said.Before(first.Add(-listAge)):
		return first.Add(-listAge)
	}
	return said
}

func newInventory() inventory {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return inventory{epoch: hex.EncodeToString(b), parts: map[string]*partial{}, idle: list.New(), loads: map[string]*load{},
		providers: map[string]*heard{}, suspects: map[string]int{}, orphans: map[string]*orphan{}, removed: map[string]time.Time{}}
}

// next is the sequence number of the next request: suspects made now are
// confirmed by its answers.
func (iv *inventory) next() int {
	iv.want = true
	return iv.seq + 1
}

// requestSeq returns the sequence number of one of our request IDs, 0 for
// another leader's or none.
func (iv *inventory) requestSeq(id string) int {
	rest, ok := strings.CutPrefix(id, iv.epoch+"-")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(rest)
	if err != nil {
		return 0
	}
	return n
}

// requestInventory publishes the request that is due, at most one a
// second. It is plain NATS: a request no worker hears is made again by the
// next suspicion or the rebuild.
func (r *Reconciler) requestInventory() {
	iv := &r.inv
	now := r.o.Now()
	if !iv.want || now.Sub(iv.last) < time.Second || now.Before(iv.holdUntil) {
		return
	}
	req := wire.InventoryRequest{ID: fmt.Sprintf("%s-%d", iv.epoch, iv.seq+1), Time: now.UTC()}
	data, err := wire.Encode(&req)
	if err == nil {
		err = r.o.JS.Conn().Publish(wire.SubjectInventoryRequest, data)
	}
	if err != nil {
		r.log.Warn().Err(err).Msg("cannot ask the workers for their inventories; will try again")
		return
	}
	iv.seq++
	iv.want, iv.last = false, now
}

// inventoryPart is an inventory message, decoded.
type inventoryPart struct {
	subject string
	// reply is where the worker waits to hear that the part is taken
	// (not the message: its bytes go once the part is decoded).
	reply string
	inv   wire.Inventory
	err   error
}

// answer tells the worker the part is taken, when it asked to be told.
func (p inventoryPart) answer(nc *nats.Conn) {
	if p.reply != "" {
		_ = nc.Publish(p.reply, nil)
	}
}

// inventoryPendingBytes is how much of the workers' reports the leader's
// subscription keeps while it decodes the parts before them. NATS's
// default, 64 MiB, dropped parts when three workers of 130,000 machines
// reported at once (a report is ~45 MiB), and a report missing a part is
// never complete: the machines it did not list were never found gone.
const inventoryPendingBytes = 1 << 30

func decodeInventory(m *nats.Msg) inventoryPart {
	var inv wire.Inventory
	if fastDecodeInventory(m.Data, &inv, newInterner()) {
		if err := wire.CheckInventory(&inv); err != nil {
			return inventoryPart{subject: m.Subject, reply: m.Reply, err: err}
		}
		return inventoryPart{subject: m.Subject, reply: m.Reply, inv: inv}
	}
	inv, err := wire.DecodeInventory(m.Data)
	return inventoryPart{subject: m.Subject, reply: m.Reply, inv: inv, err: err}
}

// handleInventory takes one part of a worker's inventory: the machines it
// lists are compared with the records at once (orphans, adoption during a
// rebuild), and once the report has every part, the records it covers are
// compared with what it listed (machines gone).
func (r *Reconciler) handleInventory(ctx context.Context, part inventoryPart) {
	inv, err := part.inv, part.err
	if err != nil {
		if r.floodLog("inventory") {
			r.log.Warn().Err(err).Str("subject", part.subject).
				Msg("ignoring malformed inventory (malformed and refused inventories after this one are counted and logged at most every 10s)")
		}
		r.metrics.Malformed.WithLabelValues("inventory").Inc()
		return
	}
	if !wire.InventoryPublishedFor(part.subject, inv.Provider, inv.Worker) {
		r.refuse("inventory", refusedSubject, "", "", fmt.Sprintf("report of %s/%s published on %s", inv.Provider, inv.Worker, part.subject))
		return
	}
	if !wire.ValidName(inv.Provider) || !wire.ValidWorker(inv.Worker) {
		// The orphans it reported would be deleted by tasks on subjects
		// no worker hears, or too long to publish.
		if r.floodLog("inventory") {
			r.log.Warn().Str("provider", wire.Cut(inv.Provider, 64)).Str("worker", wire.Cut(inv.Worker, 64)).
				Msg("ignoring an inventory whose provider or worker is no name a task can carry")
		}
		r.metrics.Malformed.WithLabelValues("inventory").Inc()
		return
	}
	// Whether the report covers its worker's machines only is the
	// provider's nature, not the report's word (wire.HostBound).
	inv.HostBound = wire.HostBound(inv.Provider, inv.HostBound)
	iv := &r.inv
	now := r.o.Now()
	// Reports whose parts stopped coming a minute ago: a worker sends
	// each part once the last is taken, and its whole report within a
	// minute.
	for e := iv.idle.Front(); e != nil && now.Sub(e.Value.(*partial).last) > listAge; e = iv.idle.Front() {
		r.dropReport(e.Value.(*partial))
	}
	// The subject names the worker: a part cannot join another's report.
	id := inv.Provider + "/" + inv.Worker + "/" + inv.Report
	p := iv.parts[id]
	if p != nil && now.Sub(p.first) > listAge {
		r.dropReport(p) // a report whose last parts never came
		p = nil
	}
	if p == nil {
		p = &partial{id: id, first: now, got: map[int]bool{},
			rep: report{provider: inv.Provider, worker: inv.Worker, hostBound: inv.HostBound, seq: iv.requestSeq(inv.Request),
				began: began(inv.Time, now)}}
		iv.parts[id] = p
		p.elem = iv.idle.PushBack(p)
		cred := wire.WorkerCredential(inv.Worker)
		if p.load = iv.loads[cred]; p.load == nil {
			p.load = &load{cred: cred}
			iv.loads[cred] = p.load
		}
		p.load.reports++
	}
	p.last = now
	iv.idle.MoveToBack(p.elem)
	if !p.fits(inv) {
		if r.floodLog("inventory") {
			r.log.Warn().Str("report", inv.Report).Str("worker", inv.Worker).Msg("ignoring an inventory part that does not fit its report")
		}
		r.metrics.Malformed.WithLabelValues("inventory").Inc()
		return
	}
	if !r.makeRoom(p, len(inv.Instances)) {
		if r.floodLog("inventory") {
			r.log.Warn().Str("report", inv.Report).Str("worker", inv.Worker).Int("listed", iv.listedN).
				Msg("dropping an inventory report: it lists more machines no record marks than the leader keeps of every report being received")
		}
		r.metrics.Malformed.WithLabelValues("inventory").Inc()
		r.dropReport(p)
		return
	}
	if len(p.got) == 0 && p.bit == 0 {
		if free := ^iv.bits; free != 0 {
			p.bit = free & -free
			iv.bits |= p.bit
		}
	}
	p.got[inv.Part] = true
	p.top = max(p.top, inv.Part+1)
	if inv.Parts > 0 {
		p.parts = inv.Parts
	}
	rep := &p.rep
	orphansChanged := false
	for _, in := range inv.Instances {
		if r.listedInstance(ctx, p, in) {
			orphansChanged = true
		}
	}
	if p.parts > 0 && len(p.got) == p.parts {
		r.metrics.Inventories.WithLabelValues(rep.provider).Inc()
		if r.reportDone(ctx, p) {
			orphansChanged = true
		}
		r.dropReport(p)
	}
	if orphansChanged {
		r.countOrphans()
		r.writeFleet()
	}
	r.requestInventory()
}

// fits says whether inv can be a part of p's report: not one received
// already, a count that agrees with what the report said (or will say)
// of itself, the same host-bound flag.
func (p *partial) fits(inv wire.Inventory) bool {
	switch {
	case p.got[inv.Part] || p.rep.hostBound != inv.HostBound:
		return false
	case inv.Parts > 0 && p.parts > 0:
		return inv.Parts == p.parts
	case inv.Parts > 0: // the count, for the first time
		return p.top <= inv.Parts
	case p.parts > 0: // more follow, in a report whose count is known
		return inv.Part < p.parts-1
	}
	return true
}

// listedInstance notes that p's report lists in and compares it with the
// records: a machine a record wants is no orphan; during a rebuild one
// that none wants is adopted; otherwise it is an orphan, suspected until
// a report answering a later request lists it again. It reports whether
// the orphans changed.
func (r *Reconciler) listedInstance(ctx context.Context, p *partial, in wire.Instance) bool {
	if !wire.ValidName(in.Cluster) || !wire.ValidName(in.Machine) {
		// No record has such a name, and no task can: nothing to adopt,
		// and an orphan whose delete could never be published.
		return false
	}
	iv := &r.inv
	rep := &p.rep
	m := r.lookup(in.Cluster, in.Machine)
	if m != nil && !secondCopy(m, rep) {
		if p.bit != 0 && in.Reason == "" {
			m.listed |= p.bit // no key made: the common case, 130,000 times a report
		} else {
			p.list(recordKey(in.Cluster, in.Machine), in, &iv.listedN)
		}
		if len(iv.orphans) == 0 {
			return false
		}
		if key := orphanKey(rep, recordKey(in.Cluster, in.Machine)); iv.orphans[key] != nil {
			delete(iv.orphans, key)
			return true
		}
		return false
	}
	mkey := recordKey(in.Cluster, in.Machine)
	p.list(mkey, in, &iv.listedN)
	key := orphanKey(rep, mkey)
	if m == nil && iv.rebuild != nil {
		r.adopt(ctx, rep, in)
		return false
	}
	if at, ok := iv.removed[mkey]; m == nil && ok && at.After(rep.began.Add(-clockSlack)) {
		return false // deleted while the List ran: a later report judges it
	}
	o := iv.orphans[key]
	switch {
	case o == nil && len(iv.orphans) >= maxOrphans:
		if r.floodLog("orphan") {
			r.log.Warn().Int("orphans", len(iv.orphans)).Str("provider", rep.provider).Str("worker", rep.worker).
				Msg("too many orphans tracked: more wait until some are deleted or forgotten (a worker flooding inventories?)")
		}
	case o == nil:
		iv.orphans[key] = &orphan{inst: in, provider: rep.provider, worker: rep.worker, hostBound: rep.hostBound, after: iv.next(),
			found: r.o.Now()}
	case o.confirmed.IsZero() && rep.seq >= o.after:
		o.confirmed = r.o.Now()
		r.log.Warn().Str(logCluster, in.Cluster).Str(logMachine, in.Machine).Str("provider", rep.provider).
			Str("worker", rep.worker).Str("action", r.o.Orphans).Msg("orphan machine: the provider has it and no record wants it")
		return true
	}
	return false
}

// reportDone compares a complete report with the records it covers:
// every record of the provider, or, for a provider whose machines live on
// one host, the records of the reporting worker. A Running machine the
// report does not list (or lists as not running) is suspected, and marked
// missing once a report answering a request made after the suspicion
// says so again; an orphan the report no longer lists is forgotten. It
// reports whether the orphans changed.
func (r *Reconciler) reportDone(ctx context.Context, p *partial) bool {
	iv := &r.inv
	rep := &p.rep
	h := iv.providers[rep.provider]
	if h == nil {
		h = &heard{answered: map[string]int{}}
		iv.providers[rep.provider] = h
	}
	h.hostBound = rep.hostBound
	if prev, ok := h.answered[rep.worker]; !ok || rep.seq > prev {
		h.answered[rep.worker] = rep.seq
	}
	covers := func(provider, worker string) bool {
		return provider == rep.provider && (!rep.hostBound || worker == rep.worker)
	}
	for _, ms := range r.machines {
		for _, m := range ms {
			marked := m.listed&p.bit != 0
			m.listed &^= p.bit // every entry's mark goes: the bit may serve another report
			rec := m.rec
			if !covers(rec.Provider, rec.Worker) {
				continue
			}
			key := "" // made only when a map is asked
			if len(p.listed) > 0 || len(iv.suspects) > 0 {
				key = rec.key()
			}
			l, ok := p.lists(marked, key)
			if rec.Phase != wire.PhaseRunning || (ok && l.reason == "") {
				if len(iv.suspects) > 0 {
					delete(iv.suspects, key)
				}
				continue
			}
			if key == "" {
				key = rec.key()
			}
			if rec.Running.After(rep.began.Add(-clockSlack)) {
				// Running since the List began: the List may have come
				// before the machine. Suspecting it would ask every
				// worker for another report, and while machines keep
				// coming, one report after another.
				continue
			}
			after, suspected := iv.suspects[key]
			switch {
			case !suspected:
				iv.suspects[key] = iv.next()
			case rep.seq >= after:
				delete(iv.suspects, key)
				r.markMissing(ctx, m, rep, l, ok)
			}
		}
	}
	iv.bits &^= p.bit
	p.bit = 0
	iv.pruneRemoved(r.o.Now())
	changed := false
	for key, o := range iv.orphans {
		if _, still := p.listed[o.machineKey()]; !still && covers(o.provider, o.worker) {
			delete(iv.orphans, key)
			changed = true
		}
	}
	return changed
}

// makeRoom makes room for n more machines listed in p's report, and for
// the report, within maxListed and maxReports: it drops other reports,
// which are then never whole (each counted as a malformed inventory) —
// those of the worker credential that holds the most of what is over
// (machines listed, or reports), whose last part came longest ago first.
// Workers publish reports in their own credential's name only, so a flood
// sent with one worker's credentials makes room with its own reports,
// even while it goes on, and another worker's report in progress keeps
// its parts. False means p's report must go itself: it is the last of the
// credential that holds the most, or alone lists too many.
func (r *Reconciler) makeRoom(p *partial, n int) bool {
	iv := &r.inv
	dropped := 0
	for iv.listedN+n > maxListed || len(iv.parts) > maxReports {
		q := iv.heaviest(iv.listedN+n > maxListed, p)
		if q == nil {
			return false
		}
		r.dropReport(q)
		dropped++
	}
	if dropped > 0 {
		if r.floodLog("inventory") {
			r.log.Warn().Int("dropped", dropped).Str("worker", p.rep.worker).Int("reports", len(iv.parts)).Int("listed", iv.listedN).
				Msg("dropping the inventory reports whose parts came longest ago to make room: the reports being received list too many machines no record marks, or are too many (a worker flooding inventories?)")
		}
		r.metrics.Malformed.WithLabelValues("inventory").Add(float64(dropped))
	}
	return true
}

// heaviest is the report makeRoom drops next for p: of the worker
// credential whose reports list the most machines (byListed) or are the
// most, the one whose last part came longest ago, not p; when p is the
// only one of that credential, nil (p must go), unless it holds no more
// than another credential does, which then gives its oldest.
func (iv *inventory) heaviest(byListed bool, p *partial) *partial {
	size := func(l *load) int {
		if byListed {
			return l.listed
		}
		return l.reports
	}
	var heavy *load
	for _, l := range iv.loads {
		if heavy == nil || size(l) > size(heavy) || (size(l) == size(heavy) && l != p.load) {
			heavy = l
		}
	}
	var oldest *partial
	for e := iv.idle.Front(); e != nil; e = e.Next() {
		q := e.Value.(*partial)
		if q == p {
			continue
		}
		if q.load == heavy {
			return q
		}
		if oldest == nil {
			oldest = q
		}
	}
	if heavy != p.load {
		return oldest
	}
	return nil
}

// dropReport forgets p, complete or not, and takes its mark off every
// machine entry (reportDone did for a complete one), so that its bit may
// serve another.
func (r *Reconciler) dropReport(p *partial) {
	delete(r.inv.parts, p.id)
	r.inv.idle.Remove(p.elem)
	r.inv.listedN -= len(p.listed)
	p.load.listed -= len(p.listed)
	if p.load.reports--; p.load.reports == 0 {
		delete(r.inv.loads, p.load.cred)
	}
	p.listed = nil
	if p.bit == 0 {
		return
	}
	for _, ms := range r.machines {
		for _, m := range ms {
			m.listed &^= p.bit
		}
	}
	r.inv.bits &^= p.bit
}

// pruneRemoved forgets the removals no report still in the making can
// predate, at most once a second.
func (iv *inventory) pruneRemoved(now time.Time) {
	if now.Sub(iv.lastPrune) < time.Second {
		return
	}
	iv.lastPrune = now
	for key, at := range iv.removed {
		if now.Sub(at) > listAge+clockSlack {
			delete(iv.removed, key)
		}
	}
	for key, o := range iv.orphans {
		if o.confirmed.IsZero() && now.Sub(o.found) > orphanWait {
			delete(iv.orphans, key) // no report confirmed it
		}
	}
}

// markMissing records a Running machine that its provider no longer has
// (or reports dead) as Failed: the planner replaces it as a MachineSet
// replaces a machine that is gone. A late Running event does not bring it
// back (applyEvent).
func (r *Reconciler) markMissing(ctx context.Context, m *machine, rep *report, in listing, listed bool) {
	next := m.rec.clone()
	next.Phase = wire.PhaseFailed
	reason, message := ReasonMachineMissing, fmt.Sprintf("provider %s no longer has the machine (inventory of worker %s)", rep.provider, rep.worker)
	if listed {
		reason, message = in.reason, in.message
		if message == "" {
			message = fmt.Sprintf("provider %s reports the machine %s", rep.provider, in.reason)
		}
	}
	next.setWhy(reason, message)
	if r.commit(ctx, m, next) == nil {
		return // tried again with the next inventory
	}
	r.metrics.Missing.WithLabelValues(rep.provider, next.Reason).Inc()
	r.log.Warn().Str(logCluster, next.Cluster).Str(logMachine, next.Name).Str("reason", next.Reason).
		Str("detail", next.Message).Msg("machine is gone; it will be replaced")
}

// adopt makes a record for a machine a provider has while the leader
// rebuilds an empty store: the machine keeps its name, its creation time
// and source commit as the status branch has them, and counts as Running
// (or Failed, when the provider says it is dead) from now.
func (r *Reconciler) adopt(ctx context.Context, rep *report, in wire.Instance) {
	now := r.o.Now()
	// A shape of its own, so set below without touching another's.
	rec := &Record{Name: in.Machine, Shape: &Shape{Cluster: in.Cluster, Deployment: in.Deployment, Role: in.Role,
		Provider: rep.provider, Version: in.Version, TemplateHash: in.TemplateHash, Labels: in.Labels, Annotations: in.Annotations,
		Cause: "record rebuilt from the provider's inventory after the store was lost"},
		Worker: rep.worker, Phase: wire.PhaseRunning, Created: StampOf(now), Attempt: 1, Published: StampOf(now)}
	rec.setTask(wire.OpCreate)
	rec.setProviderID(in.ProviderID)
	rec.setAddresses(in.Addresses)
	if rec.Role == "" {
		rec.Role = wire.RoleWorker
		if in.Deployment == "" {
			rec.Role = wire.RoleControlPlane
		}
	}
	if ms, ok := r.inv.rebuild.listed[rec.key()]; ok {
		rec.Created = StampOf(ms.Created)
		rec.SourceCommit = ms.SourceCommit
	}
	if in.Reason != "" {
		rec.Phase, rec.Reason, rec.Message = wire.PhaseFailed, in.Reason, in.Message
	}
	m := r.commit(ctx, nil, rec)
	if m == nil {
		return // adopted from the next report
	}
	m.beat, m.healthy = assumedBeat(now, rec.Created.Time()), true
	r.log.Info().Str(logCluster, rec.Cluster).Str(logMachine, rec.Name).Str("provider", rep.provider).
		Str("worker", rep.worker).Msg("record rebuilt from the provider's inventory")
}

// startRebuild is called when the machines bucket is empty at start: until
// the providers answered, the leader adopts what they have and plans
// nothing, so a lost store does not create the fleet a second time.
func (r *Reconciler) startRebuild() {
	rb := &rebuild{start: r.o.Now(), listed: map[string]status.MachineStatus{}}
	if r.o.Status != nil {
		snap, err := r.o.Status.Committed()
		if err != nil {
			r.log.Warn().Err(err).Msg("rebuild: cannot read the status branch; rebuilding from the inventories alone")
		}
		if snap != nil {
			for _, c := range snap.Clusters {
				for _, m := range c.Machines {
					rb.listed[recordKey(c.Name, m.Name)] = m
				}
			}
		}
	}
	rb.seq = r.inv.next()
	r.inv.rebuild = rb
	r.requestInventory()
	r.log.Info().Int("listed", len(rb.listed)).Msg("the machines bucket is empty: rebuilding records from the providers' inventories before planning")
}

// rebuilding reports whether planning waits for the rebuild, ending it
// when the providers answered: every provider whose machines the status
// branch lists (and for a host-bound provider, every worker it names), and
// every provider the fleet uses, or InventoryWait passed for those the
// status branch does not list. After RebuildTimeout the leader plans
// anyway, and says so.
func (r *Reconciler) rebuilding() bool {
	rb := r.inv.rebuild
	if rb == nil {
		return false
	}
	now := r.o.Now()
	answered := func(provider, worker string) bool {
		h := r.inv.providers[provider]
		if h == nil {
			return false
		}
		if h.hostBound && worker != "" {
			return h.answered[worker] >= rb.seq
		}
		for _, seq := range h.answered {
			if seq >= rb.seq {
				return true
			}
		}
		return false
	}
	var waiting, providers []string
	for _, m := range rb.listed {
		if !answered(m.Provider, m.Worker) {
			w := "provider " + m.Provider
			if h := r.inv.providers[m.Provider]; h != nil && h.hostBound && m.Worker != "" {
				w += " worker " + m.Worker
			}
			waiting, providers = append(waiting, w), append(providers, m.Provider)
		}
	}
	if r.desired != nil && now.Sub(rb.start) < r.o.InventoryWait {
		for _, dc := range r.desired.Clusters {
			for _, p := range append([]planner.Pool{dc.ControlPlane}, dc.Deployments...) {
				if p.Replicas > 0 && !answered(p.Provider, "") {
					waiting, providers = append(waiting, "provider "+p.Provider), append(providers, p.Provider)
				}
			}
		}
	} else if r.desired == nil {
		waiting = append(waiting, "the fleet's first revision")
	}
	slices.Sort(waiting)
	waiting = slices.Compact(waiting)
	msg := strings.Join(waiting, ", ")
	if len(waiting) > 0 && now.Sub(rb.start) < r.o.RebuildTimeout {
		if msg != rb.waiting {
			slices.Sort(providers)
			rb.waiting, rb.providers = msg, slices.Compact(providers)
			r.log.Info().Str("waiting", msg).Msg("rebuild: waiting for inventories before planning")
			r.writeFleet()
		}
		r.inv.want = r.inv.want || now.Sub(r.inv.last) > 5*time.Second
		r.requestInventory()
		return true
	}
	if len(waiting) > 0 {
		r.log.Warn().Str("waiting", msg).Dur("after", r.o.RebuildTimeout).
			Msg("rebuild: planning without these inventories; machines they hold may be created again, and deleted as orphans once reported")
	}
	r.inv.rebuild = nil
	n := 0
	for _, ms := range r.machines {
		n += len(ms)
	}
	r.log.Info().Int("machines", n).Msg("rebuild done: records rebuilt from the inventories")
	for name := range r.machines {
		r.dirty[name] = true
	}
	r.writeFleet()
	return false
}

// secondCopy says whether the machine a host-bound worker reports is a
// copy: its record says another worker holds the machine, and the create
// is over. Two workers ran one create (one paused past its ack wait, or
// killed mid-create and redelivered); the copy the record does not name is
// an orphan of the worker that reports it, and a worker carries out its
// delete because the record names another worker (wire.Task.Stale).
func secondCopy(m *machine, rep *report) bool {
	return rep.hostBound && m.rec.Worker != "" && m.rec.Worker != rep.worker && !m.rec.InFlight()
}

// orphanKey names an orphan: its machine's record key, and for a
// host-bound provider the worker too, as a copy may live on two workers.
func orphanKey(rep *report, machineKey string) string {
	if rep.hostBound {
		return machineKey + "@" + rep.worker
	}
	return machineKey
}

// machineKey is the record key of the orphan's machine.
func (o *orphan) machineKey() string { return recordKey(o.inst.Cluster, o.inst.Machine) }

// checkOrphans deletes the orphans whose grace period is over, when the
// daemon deletes orphans: an orphan task (wire.Task.Orphan), which a worker
// carries out only while no record wants the machine. An orphan still
// reported a task timeout after its delete was published is deleted again,
// as the next attempt.
func (r *Reconciler) checkOrphans(ctx context.Context) {
	if r.o.Orphans != OrphansDelete || r.inv.rebuild != nil {
		return
	}
	now := r.o.Now()
	for _, key := range slices.Sorted(maps.Keys(r.inv.orphans)) {
		o := r.inv.orphans[key]
		if o.confirmed.IsZero() || now.Sub(o.confirmed) < r.o.OrphanGrace ||
			(!o.deleted.IsZero() && now.Sub(o.deleted) < r.o.TaskTimeout) {
			continue
		}
		if r.o.Fence != nil && r.o.Fence() != nil {
			return
		}
		in := o.inst
		id := orphanTaskPrefix + in.Cluster + "." + in.Machine
		if o.hostBound {
			id += "." + o.worker // one machine may have a copy on two workers
		}
		t := &wire.Task{ID: id, Attempt: o.attempt + 1, Operation: wire.OpDelete,
			Orphan: true, Machine: wire.Machine{Name: in.Machine, Cluster: in.Cluster, Role: in.Role,
				Deployment: in.Deployment, Version: in.Version, Provider: o.provider, TemplateHash: in.TemplateHash, Labels: in.Labels}}
		if o.hostBound {
			t.Worker = o.worker
		}
		if err := r.publishOne(ctx, t); err != nil {
			r.log.Error().Err(err).Str("task", t.ID).Msg("cannot publish an orphan's delete; will try again")
			continue
		}
		o.attempt, o.deleted = t.Attempt, now
		r.metrics.TasksPublished.WithLabelValues(string(wire.OpDelete)).Inc()
		r.log.Warn().Str(logCluster, in.Cluster).Str(logMachine, in.Machine).Str("provider", o.provider).
			Int("attempt", t.Attempt).Msg("deleting orphan machine")
	}
}

// publishOne publishes t and waits for NATS to store it.
func (r *Reconciler) publishOne(ctx context.Context, t *wire.Task) error {
	f, err := r.pub.Publish(ctx, t)
	if err != nil {
		return err
	}
	select {
	case <-f.Ok():
		return nil
	case err := <-f.Err():
		return err
	case <-time.After(10 * time.Second):
		return fmt.Errorf("publish %s: no acknowledgement from NATS", t.ID)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Reconciler) countOrphans() {
	counts := map[string]int{}
	for p := range r.inv.providers {
		counts[p] = 0
	}
	for _, o := range r.inv.orphans {
		if !o.confirmed.IsZero() {
			counts[o.provider]++
		}
	}
	for p, n := range counts {
		r.metrics.Orphans.WithLabelValues(p).Set(float64(n))
	}
}

// orphanList is fleet.yaml's list of confirmed orphans, sorted.
func (r *Reconciler) orphanList() []status.Orphan {
	var out []status.Orphan
	for _, o := range r.inv.orphans {
		if o.confirmed.IsZero() {
			continue
		}
		out = append(out, status.Orphan{Cluster: o.inst.Cluster, Machine: o.inst.Machine, Provider: o.provider,
			Worker: o.worker, ProviderID: o.inst.ProviderID, Since: o.confirmed.UTC().Truncate(time.Second), Action: r.o.Orphans})
	}
	slices.SortFunc(out, func(a, b status.Orphan) int {
		return strings.Compare(a.Cluster+"/"+a.Machine, b.Cluster+"/"+b.Machine)
	})
	return out
}
