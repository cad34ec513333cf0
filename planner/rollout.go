package planner

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
)

// Gates is every class rollout's decision for every cluster, and the
// rollout records after them.
type Gates struct {
	d       *Desired // the clusters' classes, for For
	byClass map[string]*classGates
	classes []ClassRollout
	records map[string]RolloutRecord
	changed []string // classes whose record changed
}

// classGates is one class's decision and what it was decided on: the next
// pass reuses it when those are the same (RolloutsSince). Never changed
// once made, so Gates share them.
type classGates struct {
	class *DesiredClass
	names []string  // the class's clusters, in name order
	sums  []Summary // their summaries, in the same order
	// from and ver: the Summaries the decision read and the class's
	// version there (nil: a map's, no version).
	from  *Summaries
	ver   uint64
	rec   RolloutRecord
	cr    ClassRollout
	gates map[string]Gate
}

// Summaries are the clusters' summaries a caller keeps from pass to pass,
// as the daemon does, with a version for each class that moves whenever a
// summary of one of its clusters does: RolloutsSince then knows that a
// class's summaries are the ones it decided on without comparing 10,000
// of them. Every change goes through Set and Delete, so none is missed.
type Summaries struct {
	m    map[string]Summary
	ver  map[string]uint64 // by class
	last uint64
}

// NewSummaries returns an empty set, with room for n clusters.
func NewSummaries(n int) *Summaries {
	return &Summaries{m: make(map[string]Summary, n), ver: map[string]uint64{}}
}

// Get returns a cluster's summary.
func (s *Summaries) Get(cluster string) (Summary, bool) {
	sum, ok := s.m[cluster]
	return sum, ok
}

func (s *Summaries) get(cluster string) Summary {
	if s == nil {
		return Summary{} // none kept: every cluster unsummarized
	}
	return s.m[cluster]
}

// Set stores a cluster's summary and reports whether it differs from the
// one stored: then the versions of its class, and of the class of the
// summary it replaces, move.
func (s *Summaries) Set(cluster string, sum Summary) bool {
	old, ok := s.m[cluster]
	if ok && old == sum {
		return false
	}
	s.m[cluster] = sum
	s.bump(sum.Class)
	if ok && old.Class != sum.Class {
		s.bump(old.Class)
	}
	return true
}

// Delete removes a cluster's summary, moving its class's version, and
// returns it.
func (s *Summaries) Delete(cluster string) (Summary, bool) {
	old, ok := s.m[cluster]
	if ok {
		delete(s.m, cluster)
		s.bump(old.Class)
	}
	return old, ok
}

func (s *Summaries) bump(class string) {
	s.last++
	s.ver[class] = s.last
}

// For returns the gate of one cluster (the zero Gate: nothing to admit).
func (g *Gates) For(cluster string) Gate {
	dc := g.d.Cluster(cluster)
	if dc == nil {
		return Gate{}
	}
	if cg := g.byClass[dc.Class]; cg != nil {
		return cg.gates[cluster]
	}
	return Gate{}
}

// Classes returns the rollout state of every class, sorted by class.
func (g *Gates) Classes() []ClassRollout { return g.classes }

// Records returns every class's rollout record after this decision.
func (g *Gates) Records() map[string]RolloutRecord { return g.records }

// Changed returns the rollout records that changed, to persist before any
// step is carried out.
func (g *Gates) Changed() []RolloutRecord {
	out := make([]RolloutRecord, 0, len(g.changed))
	for _, c := range g.changed {
		out = append(out, g.records[c])
	}
	return out
}

// Rollouts decides, from per-cluster summaries and each class's rollout
// record, which clusters are admitted to their class's revision now.
//
// A class's rollout is its current revision: a new revision starts a new
// rollout. A cluster waits for its wave when it is not admitted to the
// revision yet and admitting it changes machines; it is admitted when
// every cluster of the waves before it is done on the revision (or failed
// on it, or takes no part), its wave has fewer than maxConcurrent clusters
// moving to the revision, and the rollout has not halted. When failures
// reach maxFailures the rollout halts: no other cluster is admitted,
// clusters moving finish, failed ones get no steps. A cluster that is new,
// or whose change is in its own files, is admitted at once; a new one
// waits while the rollout is halted, as the revision it would be made from
// is the one that failed.
func Rollouts(d *Desired, sums map[string]Summary, records map[string]RolloutRecord, now time.Time) *Gates {
	return rollouts(nil, d, func(n string) Summary { return sums[n] }, nil, records, now)
}

// RolloutsSince is Rollouts for a caller that decided before (prev; nil
// for none): a class whose definition, clusters, their summaries and
// rollout record are those prev decided on keeps prev's decision, the one
// Rollouts would make again. sums are the caller's, kept from pass to
// pass: a class none of whose summaries moved since (its version in sums)
// is not looked at; one whose summaries moved is compared summary by
// summary, and decided again only when one differs.
func RolloutsSince(prev *Gates, d *Desired, sums *Summaries, records map[string]RolloutRecord, now time.Time) *Gates {
	return rollouts(prev, d, sums.get, sums, records, now)
}

func rollouts(prev *Gates, d *Desired, get func(string) Summary, sums *Summaries, records map[string]RolloutRecord, now time.Time) *Gates {
	g := &Gates{d: d, byClass: make(map[string]*classGates, len(d.Classes)), records: make(map[string]RolloutRecord, len(d.Classes))}
	byClass := d.classMembers()
	for _, class := range d.Classes {
		names, rr := byClass[class.Name], records[class.Name]
		cg := prev.reusable(class, names, sums, rr)
		if cg == nil {
			cg = g.rollout(class, names, get, rr, d.Change, now)
			if sums != nil {
				cg.from, cg.ver = sums, sums.ver[class.Name]
			}
		}
		g.byClass[class.Name] = cg
		g.records[class.Name] = cg.rec
		g.classes = append(g.classes, cg.cr)
	}
	return g
}

// reusable returns prev's decision for class when it was made on the same
// inputs, else nil. The time and the change a new rollout starts with are
// inputs only when the record is not of the class's revision, and a
// decision's record always is.
func (prev *Gates) reusable(class *DesiredClass, names []string, sums *Summaries, rr RolloutRecord) *classGates {
	if prev == nil || sums == nil {
		return nil
	}
	cg := prev.byClass[class.Name]
	if cg == nil || !sameNames(cg.names, names) || !cg.rec.equal(rr) {
		return nil
	}
	if cg.class != class && !reflect.DeepEqual(cg.class, class) {
		return nil
	}
	ver := sums.ver[class.Name]
	if cg.from == sums && cg.ver == ver {
		return cg // no summary of the class moved since
	}
	for i, n := range names {
		if sums.m[n] != cg.sums[i] {
			return nil
		}
	}
	// The summaries moved and came back: the same decision, at the
	// version now.
	again := *cg
	again.from, again.ver = sums, ver
	return &again
}

// sameNames: two lists of a class's clusters are the same; one list
// shared by two expansions is not compared name by name.
func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || slices.Equal(a, b)
}

// Where a cluster stands in its class's rollout.
const (
	standSkip     = iota // takes no part
	standFinished        // done on the revision, or failed on it
	standMoving          // admitted to the revision, not done yet
	standPending         // not admitted; admitting it changes machines
)

func (g *Gates) rollout(class *DesiredClass, names []string, get func(string) Summary, rr RolloutRecord, change Change, now time.Time) *classGates {
	changed := false
	if rr.Class == class.Name && rr.Revision == class.legacy && class.legacy != class.Revision {
		// Recorded by an earlier gitfleet, of the class as it is: the
		// same rollout, under the revision this gitfleet computes.
		rr.Revision = class.Revision
		changed = true
	}
	if rr.Revision != class.Revision || rr.Class != class.Name {
		rr = RolloutRecord{Class: class.Name, Revision: class.Revision, Started: now, Change: change}
		changed = true
	}
	rev := class.Revision
	cr := ClassRollout{Class: class.Name, Revision: rev, Started: rr.Started, Change: rr.Change, MaxFailures: class.MaxFailures,
		Waves: make([]WaveStatus, len(class.Waves))}
	for i, w := range class.Waves {
		cr.Waves[i].Name = w.Name
		if w.MaxConcurrent != nil {
			cr.Waves[i].MaxConcurrent = w.MaxConcurrent.String()
		}
	}
	// Each member's summary, looked up once: a class of 10,000 clusters
	// is gone through at every pass that moves one of them.
	ss := make([]Summary, len(names))
	for i, n := range names {
		ss[i] = get(n)
		s := &ss[i]
		if s.Revision == rev && s.State == AdmissionFailed && !s.FailedAt.Before(rr.Started) && !rr.failed(n) {
			rr.Failed = append(append([]RolloutFailure(nil), rr.Failed...), RolloutFailure{Cluster: n, Reason: s.Reason, At: s.FailedAt})
			changed = true
		}
	}
	if changed {
		g.changed = append(g.changed, class.Name)
	}
	cg := &classGates{class: class, names: names, sums: ss, rec: rr, gates: map[string]Gate{}}
	for _, f := range rr.Failed {
		cr.Failed = append(cr.Failed, f.Cluster)
	}
	cr.Halted = len(rr.Failed) >= class.MaxFailures
	if cr.Halted {
		cr.Reason = fmt.Sprintf("halted: %d of maxFailures %d clusters failed (%s); change the class again to release it (a fix or a revert), or raise spec.rollout.maxFailures in %s",
			len(rr.Failed), class.MaxFailures, strings.Join(cr.Failed, ", "), class.Source)
	}

	// Where each cluster stands, by its index in names; clusters admitted
	// without a wave are admitted here. Slices, not maps by name: a class
	// of 10,000 clusters is gone through at every pass that moves one of
	// them.
	waveOf := make([]int, len(names))
	sizes := make([]int, len(cr.Waves))
	stand := make([]int, len(names))
	state := make([]string, len(names)) // admission state after this decision
	for i, n := range names {
		s := ss[i]
		wi := min(max(s.Wave, 0), len(cr.Waves)-1)
		waveOf[i] = wi
		sizes[wi]++
		st, admit := standOf(s, &rr, cr.Halted)
		if admit != "" {
			cg.gates[n] = Gate{Admit: true, Revision: rev, AdmitState: admit}
			state[i] = admit
		} else {
			state[i] = s.State
		}
		stand[i] = st
		if st == standSkip && s.Paused && !(s.Revision == rev && s.Current) {
			// It takes no part: the rollout passes it over.
			cg.gates[n] = Gate{Paused: true, PendingRevision: rev,
				Reason: fmt.Sprintf("spec.paused is true: the rollout of class %s at revision %s passes it over, and it takes part again once unpaused", class.Name, rev)}
		}
		if cr.Halted && st == standFinished && state[i] == AdmissionFailed {
			// Its failed machines stay for a person to look at.
			cg.gates[n] = Gate{Halted: true, Reason: haltedWhy(&cr)}
		}
	}
	// Each wave's clusters, as indexes in names order, cut from one array.
	members := make([][]int, len(cr.Waves))
	all := make([]int, 0, len(names))
	for wi, size := range sizes {
		members[wi] = all[len(all) : len(all) : len(all)+size]
		all = all[:len(all)+size]
	}
	for i, wi := range waveOf {
		members[wi] = append(members[wi], i)
	}
	for wi, m := range members {
		if len(m) == 0 {
			continue // nil, as before any cluster joins it
		}
		cr.Waves[wi].Clusters = make([]string, len(m))
		for j, i := range m {
			cr.Waves[wi].Clusters[j] = names[i]
		}
	}
	current := -1
	var passed []string // waves passed over: every cluster paused
	for wi := range cr.Waves {
		w := &cr.Waves[wi]
		for _, i := range members[wi] {
			if cg.gates[names[i]].Paused {
				w.Paused = append(w.Paused, names[i])
			}
			switch stand[i] {
			case standFinished:
				if state[i] == AdmissionDone {
					w.Done++
				}
			case standMoving:
				w.Updating = append(w.Updating, names[i])
				if current < 0 {
					current = wi
				}
			case standPending:
				if current < 0 {
					current = wi
				}
			}
		}
		if current < 0 && len(w.Paused) > 0 && len(w.Paused) == len(w.Clusters) {
			passed = append(passed, w.Name)
		}
	}
	if current >= 0 {
		cr.CurrentWave = cr.Waves[current].Name
		if !cr.Halted {
			cr.Reason = fmt.Sprintf("wave %s: %d of %d clusters done", cr.CurrentWave, cr.Waves[current].Done, len(cr.Waves[current].Clusters))
			if len(passed) > 0 {
				cr.Reason += fmt.Sprintf(" (wave %s passed over: every cluster of it paused)", strings.Join(passed, ", "))
			}
		}
	}
	for wi := range cr.Waves {
		cg.gateWave(class, &cr, wi, current, ss, names, members[wi], stand, state)
	}
	cg.cr = cr
	return cg
}

// standOf says where a cluster stands on revision rr.Revision, and the
// state to admit it in at once ("" when it is not admitted now). A new
// cluster is admitted at once unless the rollout halted: it would be made
// from the revision that failed.
func standOf(s Summary, rr *RolloutRecord, halted bool) (stand int, admit string) {
	switch {
	case s.Skip:
		return standSkip, ""
	case s.Revision == "":
		if s.Fresh && !halted {
			return standMoving, AdmissionUpdating
		}
		return standPending, ""
	case s.Revision == rr.Revision && !s.Current:
		// The class is the same: the change is in the cluster's own files.
		if s.State == AdmissionProgressing {
			return standMoving, AdmissionProgressing
		}
		return standMoving, AdmissionUpdating
	case s.Revision == rr.Revision:
		switch s.State {
		case AdmissionDone:
			return standFinished, ""
		case AdmissionFailed:
			if rr.failed(s.Cluster) {
				return standFinished, ""
			}
			return standPending, "" // failed on an earlier rollout of the same revision
		}
		return standMoving, ""
	case s.Current && s.State == AdmissionDone:
		// The class changed, not this cluster's templates.
		return standFinished, AdmissionDone
	}
	return standPending, ""
}

func (cg *classGates) gateWave(class *DesiredClass, cr *ClassRollout, wi, current int, ss []Summary, names []string, members []int, stand []int, state []string) {
	w := &cr.Waves[wi]
	slots := class.Waves[wi].slots(len(w.Clusters))
	for _, i := range members {
		if stand[i] == standMoving && state[i] == AdmissionProgressing {
			slots--
		}
	}
	for _, i := range members {
		if stand[i] != standPending {
			continue
		}
		n, s := names[i], &ss[i]
		var why string
		switch {
		case cr.Halted:
			why = haltedWhy(cr)
		case current >= 0 && wi > current:
			prev := &cr.Waves[current]
			why = fmt.Sprintf("waiting for wave %s of class %s: %d of %d clusters done", prev.Name, cr.Class, prev.Done, len(prev.Clusters))
		case slots <= 0:
			why = fmt.Sprintf("waiting for a slot in wave %s of class %s (maxConcurrent %s)", w.Name, cr.Class, class.Waves[wi].MaxConcurrent)
		default:
			slots--
			w.Updating = append(w.Updating, n)
			cg.gates[n] = Gate{Admit: true, Revision: cr.Revision, AdmitState: AdmissionProgressing}
			continue
		}
		w.Waiting = append(w.Waiting, n)
		gate := Gate{Waiting: true, PendingRevision: cr.Revision, Hold: s.Revision == "", OnHalt: cr.Halted, Reason: why}
		if s.State == AdmissionFailed {
			// Failed on a rollout this one replaced: its failed machines
			// stay until its wave admits it to this revision.
			gate.Halted = true
			gate.Reason = fmt.Sprintf("failed on an earlier revision of class %s (%s); %s", cr.Class, s.Reason, why)
		}
		cg.gates[n] = gate
	}
	sort.Strings(w.Updating)
}

// haltedWhy says that a class's rollout halted, at which revision, why,
// and what releases it.
func haltedWhy(cr *ClassRollout) string {
	return fmt.Sprintf("rollout of class %s halted at revision %s%s", cr.Class, cr.Revision, strings.TrimPrefix(cr.Reason, "halted"))
}
