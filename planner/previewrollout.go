package planner

import (
	"fmt"
	"slices"
	"strings"
)

// ObservedRollouts are the fleet's rollouts as the status branch shows
// them, for a preview: each class's rollout (fleet.yaml's rollouts; the
// waves' cluster lists may be empty) and each cluster's place in it (its
// file's rollout). With them a preview knows which clusters the daemon
// holds, and why, rather than taking every machine that differs from
// head for a change merging makes.
type ObservedRollouts struct {
	Classes  map[string]ClassRollout   // by class
	Clusters map[string]ClusterRollout // by cluster
}

// RolloutPlan is what merging does to one class's fleet rollout.
type RolloutPlan struct {
	Class string `json:"class"`
	// Revision is head's class revision. NewRollout: head changes what
	// the class's machines are made of (base's revision differs), so
	// merging starts a rollout of Revision, from the first wave.
	Revision   string `json:"revision"`
	NewRollout bool   `json:"newRollout,omitempty"`
	// Waves are head's declared waves, in order; MaxFailures is how many
	// failed clusters halt head's rollout.
	Waves       []string `json:"waves,omitempty"`
	MaxFailures int      `json:"maxFailures"`
	// Limits are the declared waves that set maxConcurrent: how many of
	// their clusters move to the revision at a time.
	Limits []WaveLimit `json:"limits,omitempty"`
	// GateChanges are the fields of spec.rollout (waves, maxConcurrent,
	// maxFailures) head changes, when it also starts a new rollout: that
	// rollout runs by head's gate, not base's; or when the rollout under
	// way admits or moves clusters by it (Admits, Moves). GateBefore and
	// Gate sum base's and head's gate up ("waves canary, prod
	// (maxConcurrent 1); maxFailures 1").
	GateChanges []FieldChange `json:"gateChanges,omitempty"`
	GateBefore  string        `json:"gateBefore,omitempty"`
	Gate        string        `json:"gate,omitempty"`
	// PassedOver are the waves of a rollout head starts whose every
	// cluster is paused: the rollout passes them over (paused clusters
	// take no part), so the first wave the change reaches is a later one
	// (FirstWave).
	PassedOver []PausedWave `json:"passedOver,omitempty"`
	FirstWave  string       `json:"firstWave,omitempty"`
	// Running is the rollout the daemon runs now (the status branch), of
	// base's revision; nil when not known, or of another revision.
	Running *RunningRollout `json:"running,omitempty"`
	// Waiting are head's clusters the running rollout holds (not admitted
	// to it: they wait for their wave, or on the halt) with the revision
	// they run, New those it holds with no machine (added while it is
	// halted), and Failed those that failed on it; only when head leaves
	// the class's machines as they are (the running rollout goes on).
	Waiting []string `json:"waiting,omitempty"`
	New     []string `json:"new,omitempty"`
	Failed  []string `json:"failed,omitempty"`
	// Admits are the clusters the running rollout admits at the merge by
	// the gate head sets (a wave's maxConcurrent, the waves its clusters
	// fall in), which base's gate kept waiting; Moves those it keeps
	// waiting elsewhere than base's did (another wave, another number of
	// their wave at a time). GateChanges, GateBefore and Gate then say
	// what of the gate head changes, if spec.rollout.
	Admits []string `json:"admits,omitempty"`
	Moves  []string `json:"moves,omitempty"`
}

// WaveLimit is a wave's maxConcurrent as written ("1", "50%") and the
// number of its clusters that makes, at least 1 (Slots), as the planner
// gates the wave, of the Clusters head puts in it.
type WaveLimit struct {
	Wave          string `json:"wave"`
	MaxConcurrent string `json:"maxConcurrent"`
	Slots         int    `json:"slots"`
	Clusters      int    `json:"clusters"` // in the wave
}

// limit returns wave's limit, or nil when it sets none (or p is nil).
func (p *RolloutPlan) limit(wave string) *WaveLimit {
	if p == nil {
		return nil
	}
	for i := range p.Limits {
		if p.Limits[i].Wave == wave {
			return &p.Limits[i]
		}
	}
	return nil
}

// PausedWave is a wave whose every cluster is paused.
type PausedWave struct {
	Name     string   `json:"name"`
	Clusters []string `json:"clusters"`
}

// RunningRollout is a class's rollout as the status branch shows it.
type RunningRollout struct {
	Revision    string   `json:"revision"`
	Change      Change   `json:"change,omitzero"`
	CurrentWave string   `json:"currentWave,omitempty"`
	Halted      bool     `json:"halted,omitempty"`
	Failed      []string `json:"failed,omitempty"`
	MaxFailures int      `json:"maxFailures"`
}

// Releases says whether merging releases a halted rollout: head starts a
// new one, or raises maxFailures above its failures.
func (p *RolloutPlan) Releases() bool {
	return p.Running != nil && p.Running.Halted && (p.NewRollout || !p.haltsAt())
}

// halts says whether merging halts the rollout under way: head lowers
// maxFailures to its failures, and starts no rollout in its place.
func (p *RolloutPlan) halts() bool {
	return p.Running != nil && !p.Running.Halted && !p.NewRollout && p.haltsAt()
}

// haltsAt says whether head's maxFailures halts the running rollout, its
// failures being what they are.
func (p *RolloutPlan) haltsAt() bool {
	return p.Running != nil && len(p.Running.Failed) >= max(p.MaxFailures, 1)
}

// How a running rollout holds a cluster of head (holdOf).
const (
	holdNone      = iota // compared as it is
	holdUnchanged        // head changes nothing it runs: what moves is the running rollout's doing
	holdTemplates        // not admitted to the running revision: its sizes apply, its templates wait
	holdAll              // no step at all: failed on a halted rollout, or new while it is halted
)

// runningRollouts returns, by class, the rollout the status branch shows
// for each class whose revision is base's and head's: head leaves the
// class's machines as they are, so that rollout goes on after the merge.
func runningRollouts(bd, hd *Desired, obs *ObservedRollouts) map[string]*running {
	if obs == nil {
		return nil
	}
	out := map[string]*running{}
	for _, hc := range hd.Classes {
		bc := bd.Class(hc.Name)
		cr, ok := obs.Classes[hc.Name]
		if !ok || bc == nil || cr.Revision != bc.Revision || bc.Revision != hc.Revision {
			continue
		}
		// Head's maxFailures decides: raised, it releases a halt; lowered,
		// it may halt the rollout.
		run := &running{ClassRollout: cr, released: cr.Halted && len(cr.Failed) < hc.MaxFailures}
		run.Halted = len(cr.Failed) >= hc.MaxFailures
		out[hc.Name] = run
	}
	return out
}

// running is a class's rollout the status branch shows, which head leaves
// going on: halted or not by head's maxFailures. released: the status
// shows it halted, and head's maxFailures releases it.
type running struct {
	ClassRollout
	released bool
}

// holdOf says how class's running rollout (nil: none goes on) holds
// cluster h (b is base's, nil for a cluster head adds; cr its place in the
// rollout, nil when it has none; machines its live machines), and why.
func holdOf(b, h *DesiredCluster, run *running, cr *ClusterRollout, machines int) (int, string) {
	if h == nil || run == nil || (b != nil && b.Class != h.Class) || run.released {
		// A halt the change releases lets the rollout go on: the
		// clusters it held move to its revision in their waves.
		return holdNone, ""
	}
	if b != nil && sameRun(b, h) {
		return holdUnchanged, ""
	}
	admitted := cr != nil && cr.Revision == run.Revision
	switch {
	case !admitted && machines == 0 && (cr == nil || cr.Revision == ""):
		if run.Halted {
			return holdAll, fmt.Sprintf("the rollout of class %s is halted at revision %s: a new cluster waits, with no machine, until a fix or a revert of the class releases it", h.Class, run.Revision)
		}
		return holdNone, "" // admitted at once
	case admitted && cr.State == AdmissionFailed && run.Halted:
		if b != nil && !sameTemplates(b, h) {
			return holdNone, "" // its own change: admitted again at once
		}
		return holdAll, fmt.Sprintf("it failed on the rollout of class %s at revision %s, which halted: it keeps its failed machines and gets no step until a fix or a revert of the class releases it", h.Class, run.Revision)
	case admitted:
		return holdNone, ""
	}
	runs := ""
	if cr != nil && cr.Revision != "" {
		runs = " (revision " + cr.Revision + ")"
	}
	if run.Halted {
		return holdTemplates, fmt.Sprintf("the rollout of class %s is halted at revision %s: its machines keep the templates they run%s until a fix or a revert of the class releases it; new sizes apply now", h.Class, run.Revision, runs)
	}
	wave := ""
	if run.CurrentWave != "" {
		wave = ", at wave " + run.CurrentWave
	}
	return holdTemplates, fmt.Sprintf("it waits for its wave in the rollout of class %s at revision %s under way%s: its machines keep the templates they run%s until its wave admits it; new sizes apply now", h.Class, run.Revision, wave, runs)
}

// sameRun says whether base and head run a cluster alike: same pools,
// replicas, templates and version, paused alike.
func sameRun(b, h *DesiredCluster) bool {
	return b.Version == h.Version && b.Paused == h.Paused && samePools(b, h)
}

// sameTemplates says whether base and head make a cluster's machines
// alike (its sizes aside).
func sameTemplates(b, h *DesiredCluster) bool {
	if b.Version != h.Version || len(b.Deployments) != len(h.Deployments) || b.ControlPlane.TemplateHash != h.ControlPlane.TemplateHash {
		return false
	}
	for i := range b.Deployments {
		if b.Deployments[i].Name != h.Deployments[i].Name || b.Deployments[i].TemplateHash != h.Deployments[i].TemplateHash {
			return false
		}
	}
	return true
}

// rolloutPlans says, for each class of head, what merging does to its
// rollout: a class whose machines head changes, or whose rollout the
// status branch shows halted or holding a cluster the change edits, or
// whose gate the change moves clusters of.
func rolloutPlans(bd, hd *Desired, obs *ObservedRollouts, runs map[string]*running, by map[string][]ObservedMachine, fd *fleetDiff, changes []ClusterChange, untouched []UnchangedCluster) []RolloutPlan {
	held, admits, moves := map[string][]string{}, map[string][]string{}, map[string][]string{}
	for i := range changes {
		if c := &changes[i]; c.Held != "" {
			held[c.Class] = append(held[c.Class], c.Name)
		} else if c.Admitted != "" {
			admits[c.Class] = append(admits[c.Class], c.Name)
		}
	}
	for i := range untouched {
		if u := &untouched[i]; u.Gate != "" {
			moves[u.Class] = append(moves[u.Class], u.Name)
		}
	}
	var out []RolloutPlan
	for _, hc := range hd.Classes {
		p := RolloutPlan{Class: hc.Name, Revision: hc.Revision, MaxFailures: hc.MaxFailures}
		for wi, w := range hc.Waves[:len(hc.Waves)-1] {
			p.Waves = append(p.Waves, w.Name)
			if w.MaxConcurrent != nil {
				n := 0
				for _, c := range hd.classMembers()[hc.Name] {
					if hd.Cluster(c).Wave == wi {
						n++
					}
				}
				p.Limits = append(p.Limits, WaveLimit{Wave: w.Name, MaxConcurrent: w.MaxConcurrent.String(),
					Slots: w.slots(n), Clusters: n})
			}
		}
		bc := bd.Class(hc.Name)
		p.NewRollout = bc == nil || bc.Revision != hc.Revision
		if cr, ok := obs.class(hc.Name); ok && bc != nil && cr.Revision == bc.Revision {
			p.Running = &RunningRollout{Revision: cr.Revision, Change: cr.Change, CurrentWave: cr.CurrentWave,
				Halted: cr.Halted, Failed: cr.Failed, MaxFailures: cr.MaxFailures}
		}
		p.Admits, p.Moves = admits[hc.Name], moves[hc.Name]
		if p.NewRollout && bc != nil || len(p.Admits)+len(p.Moves) > 0 {
			for _, c := range fd.changes["class "+hc.Name] {
				if strings.HasPrefix(c.Path, "spec.rollout") {
					p.GateChanges = append(p.GateChanges, c)
				}
			}
			if len(p.GateChanges) > 0 {
				p.GateBefore, p.Gate = gateText(bc), gateText(hc)
			}
		}
		if p.NewRollout {
			p.PassedOver, p.FirstWave = pausedWaves(hd, hc)
		}
		if run := runs[hc.Name]; run != nil {
			for _, n := range hd.classMembers()[hc.Name] {
				c, ok := obs.Clusters[n]
				switch {
				case ok && c.Revision == run.Revision, slices.Contains(p.Admits, n):
				case ok && c.Revision != "":
					p.Waiting = append(p.Waiting, n)
				case run.Halted && live(by[n]) == 0:
					p.New = append(p.New, n)
				case ok:
					p.Waiting = append(p.Waiting, n) // never admitted, its machines kept
				}
			}
			p.Failed = run.Failed
		}
		switch {
		case p.NewRollout && len(hd.classMembers()[hc.Name]) > 0,
			p.Running != nil && (p.Running.Halted || p.haltsAt()),
			len(held[hc.Name]) > 0, len(p.Admits)+len(p.Moves) > 0:
			out = append(out, p)
		}
	}
	return out
}

func (o *ObservedRollouts) class(name string) (ClassRollout, bool) {
	if o == nil {
		return ClassRollout{}, false
	}
	cr, ok := o.Classes[name]
	return cr, ok
}

// gateText sums a class's rollout gate up: its waves, each with its
// maxConcurrent, and maxFailures.
func gateText(c *DesiredClass) string {
	var waves []string
	for _, w := range c.Waves[:len(c.Waves)-1] {
		if w.MaxConcurrent != nil {
			waves = append(waves, fmt.Sprintf("%s (maxConcurrent %s)", w.Name, w.MaxConcurrent))
		} else {
			waves = append(waves, w.Name)
		}
	}
	if len(waves) == 0 {
		return fmt.Sprintf("no waves; maxFailures %d", c.MaxFailures)
	}
	return fmt.Sprintf("waves %s; maxFailures %d", strings.Join(waves, ", "), c.MaxFailures)
}

// pausedWaves are class's declared waves whose every cluster (one at
// least) is paused and that come before the first wave with a cluster
// that is not: the rollout passes them over, and that wave is the first
// it reaches ("" when every cluster is paused).
func pausedWaves(hd *Desired, class *DesiredClass) ([]PausedWave, string) {
	waves := make([]PausedWave, len(class.Waves))
	moves := make([]bool, len(class.Waves))
	for _, n := range hd.classMembers()[class.Name] {
		dc := hd.Cluster(n)
		if dc.Paused {
			waves[dc.Wave].Clusters = append(waves[dc.Wave].Clusters, n)
		} else {
			moves[dc.Wave] = true
		}
	}
	var out []PausedWave
	for wi, w := range waves {
		if moves[wi] {
			if len(out) == 0 {
				return nil, ""
			}
			return out, class.Waves[wi].Name
		}
		if len(w.Clusters) > 0 && wi < len(class.Waves)-1 {
			out = append(out, PausedWave{Name: class.Waves[wi].Name, Clusters: w.Clusters})
		}
	}
	return nil, ""
}
