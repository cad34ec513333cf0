package planner

import (
	"fmt"
	"reflect"
	"time"
)

// gateMove is what head's gate does at the merge to a cluster that a
// class's rollout under way has not finished: admit it at once, or keep
// it waiting elsewhere than base's gate did (another wave, more or fewer
// of its wave at a time).
type gateMove struct {
	admits bool
	// why says it, for the plan; place is where the cluster waits
	// (moves only).
	why, place string
}

// gatesAtMerge compares, for each class whose rollout under way head
// leaves going on (runs: neither halted by head's maxFailures nor released
// by it), the daemon's gates right after the merge with those before it:
// the planner's own Rollouts decides both, from base's and from head's
// waves, with every cluster's place in the rollout as the status branch
// shows it (obs) and its machines (by). A change of a wave's
// maxConcurrent or of the waves a cluster falls in (a relabel, a
// selector) starts no rollout, but the rollout under way goes on by it:
// more slots, a wave the cluster moves into that the rollout has reached,
// or a slot a moving cluster leaves, admit waiting clusters at once.
// Those are what the result marks admits; the clusters still waiting
// whose wave, or whose wave's slots, the change moves are the others.
func gatesAtMerge(bd, hd *Desired, obs *ObservedRollouts, runs map[string]*running, by map[string][]ObservedMachine) map[string]gateMove {
	if obs == nil {
		return nil
	}
	records := map[string]RolloutRecord{}
	bsums, hsums := map[string]Summary{}, map[string]Summary{}
	for _, hc := range hd.Classes {
		run := runs[hc.Name]
		if run == nil || run.Halted || run.released || !gateInputsDiffer(bd, hd, hc, run) {
			continue
		}
		rr := RolloutRecord{Class: hc.Name, Revision: run.Revision, Started: run.Started}
		for _, f := range run.Failed {
			rr.Failed = append(rr.Failed, RolloutFailure{Cluster: f})
		}
		records[hc.Name] = rr
		for _, n := range bd.classMembers()[hc.Name] {
			b := bd.Cluster(n)
			bsums[n] = observedSummary(b, b, obs, by[n], run.Revision)
		}
		for _, n := range hd.classMembers()[hc.Name] {
			hsums[n] = observedSummary(hd.Cluster(n), bd.Cluster(n), obs, by[n], run.Revision)
		}
	}
	if len(records) == 0 {
		return nil
	}
	// Only the classes of records are read: the time starts no rollout
	// of theirs.
	bg, hg := Rollouts(bd, bsums, records, time.Time{}), Rollouts(hd, hsums, records, time.Time{})
	out := map[string]gateMove{}
	for n := range hsums {
		h, b := hd.Cluster(n), bd.Cluster(n)
		if b == nil || b.Class != h.Class {
			continue // new to the class: admitted as a new cluster is
		}
		after, before := hg.For(n), bg.For(n)
		run := runs[h.Class]
		hp, hw := hg.place(hd, n)
		bp, bw := bg.place(bd, n)
		switch {
		case after.Admit && after.AdmitState == AdmissionProgressing && !before.Admit && (before.Waiting || before.Paused || bsums[n].Skip):
			// Base's gate kept it out of the rollout: waiting, passed
			// over or taking no part. One base already has moving (no
			// gate: admitted, Progressing) is admitted again by a change
			// of its own files, not by head's gate.
			was := "took no part in it"
			switch {
			case before.Paused:
				was = "was passed over (spec.paused)"
			case before.Reason != "" && hp != bp:
				was = "was in " + bw + ", " + before.Reason
			case before.Reason != "":
				was = "was " + before.Reason
			}
			out[n] = gateMove{admits: true, why: fmt.Sprintf("at the merge, to class %s's rollout of revision %s under way, in %s; before this change it %s; its machines move to that revision now",
				h.Class, run.Revision, hw, was)}
		case after.Waiting && before.Waiting && !after.OnHalt && hp != bp:
			out[n] = gateMove{place: hw, why: fmt.Sprintf("no machine of it changes at the merge, but this change moves it in class %s's rollout of revision %s under way: it waits in %s, not in %s as before, now %s",
				h.Class, run.Revision, hw, bw, after.Reason)}
		}
	}
	return out
}

// place says where cluster n waits in its class's rollout decided by g
// (of d): its wave, and how many of the wave's clusters move at a time
// (slots; 0: all of them), and in words.
func (g *Gates) place(d *Desired, n string) (p wavePlace, text string) {
	dc := d.Cluster(n)
	cg := g.byClass[dc.Class]
	wi := min(max(dc.Wave, 0), len(cg.cr.Waves)-1)
	w := &cg.class.Waves[wi]
	size := len(cg.cr.Waves[wi].Clusters)
	p.wave, text = w.Name, "wave "+w.Name
	if wi == len(cg.class.Waves)-1 {
		text = "the clusters no wave selects"
	}
	if p.slots = w.slots(size); p.slots < size {
		return p, fmt.Sprintf("%s (%s, %d at a time)", text, plural(size, "cluster"), p.slots)
	}
	p.slots = 0
	return p, fmt.Sprintf("%s (%s, all at once)", text, plural(size, "cluster"))
}

// wavePlace is a wave and how many of its clusters move at a time (0: all).
type wavePlace struct {
	wave  string
	slots int
}

// observedSummary is cluster dc's Summary as the status branch shows it
// (obs, its machines ms) for the rollout of revision rev: its admission's
// revision and state. b is base's cluster: head's is current on rev only
// when an admission made of base's is current for it (its own change is
// admitted again, at once).
func observedSummary(dc, b *DesiredCluster, obs *ObservedRollouts, ms []ObservedMachine, rev string) Summary {
	s := Summary{Cluster: dc.Name, Class: dc.Class, Wave: dc.Wave, Paused: dc.Paused,
		Skip: dc.Paused || len(dc.Problems) > 0 || versionRefused(dc, ms) != nil}
	cr, ok := obs.Clusters[dc.Name]
	if !ok || cr.Revision == "" {
		s.Fresh = runsDesired(dc, ms)
		return s
	}
	s.Revision, s.State, s.AdmittedAt = cr.Revision, cr.State, cr.AdmittedAt
	s.Current = cr.Revision == rev && b != nil && (b == dc || newAdmission(b, rev, AdmissionDone, time.Time{}).current(dc))
	return s
}

// gateInputsDiffer says whether base and head may gate class hc's
// rollout under way (run) apart: its waves differ, or its clusters, or
// the wave, pause, problems or version of one of them. Deciding both
// gates costs ~50 ms at 10,000 clusters, for what mostly changes nothing:
// a cluster the change leaves as it is keeps base's expansion, which is
// not compared. When the rollout has nothing left to move (no current
// wave), only a cluster that takes part again can be admitted.
func gateInputsDiffer(bd, hd *Desired, hc *DesiredClass, run *running) bool {
	bc := bd.Class(hc.Name)
	if bc == nil {
		return false
	}
	moved := !reflect.DeepEqual(bc.Waves, hc.Waves)
	bm, hm := bd.classMembers()[hc.Name], hd.classMembers()[hc.Name]
	members, again := len(bm) != len(hm), false
	for _, n := range hm {
		h, b := hd.Cluster(n), bd.Cluster(n)
		switch {
		case b == h:
		case b == nil || b.Class != h.Class:
			members = true
		default:
			skip, was := h.Paused || len(h.Problems) > 0, b.Paused || len(b.Problems) > 0
			again = again || was && !skip
			moved = moved || b.Wave != h.Wave || skip != was || b.Version != h.Version
		}
	}
	return (moved || members) && run.CurrentWave != "" || again
}
