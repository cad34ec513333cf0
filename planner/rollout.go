package planner

import (
	"fmt"
	"strings"
)

// Gates is every class rollout's decision for every cluster.
type Gates struct {
	classes []ClassRollout
	gates   map[string]Gate
}

// For returns the gate of one cluster (the zero Gate lets it go).
func (g *Gates) For(cluster string) Gate { return g.gates[cluster] }

// Classes returns the rollout state of every class, sorted by class.
func (g *Gates) Classes() []ClassRollout { return g.classes }

// Rollouts decides, from per-cluster summaries, which clusters may replace
// outdated machines now. A wave starts only when every cluster of the
// waves before it is Done (failed clusters below maxFailures and skipped
// clusters do not hold it back); within a wave at most maxConcurrent
// clusters are started at once; reaching maxFailures halts the rollout:
// started clusters finish, failed ones stop, no other cluster starts.
func Rollouts(d *Desired, sums map[string]Summary) *Gates {
	g := &Gates{gates: map[string]Gate{}}
	byClass := map[string][]string{}
	for _, dc := range d.Clusters {
		byClass[dc.Class] = append(byClass[dc.Class], dc.Name)
	}
	for _, class := range d.Classes {
		g.classes = append(g.classes, g.rollout(class, byClass[class.Name], sums))
	}
	return g
}

func (g *Gates) rollout(class *DesiredClass, names []string, sums map[string]Summary) ClassRollout {
	cr := ClassRollout{Class: class.Name, Waves: make([]WaveStatus, len(class.Waves))}
	for i, w := range class.Waves {
		cr.Waves[i].Name = w.Name
	}
	for _, n := range names {
		s := sums[n]
		if s.Wave < 0 || s.Wave >= len(cr.Waves) {
			s.Wave = len(cr.Waves) - 1
		}
		cr.Waves[s.Wave].Clusters = append(cr.Waves[s.Wave].Clusters, n)
		if s.Failed && !s.Skip {
			cr.Failed = append(cr.Failed, n)
		}
	}
	cr.Halted = len(cr.Failed) >= class.MaxFailures
	if cr.Halted {
		cr.Reason = fmt.Sprintf("halted: %d of maxFailures %d clusters failed (%s); fix them, or raise spec.rollout.maxFailures in %s",
			len(cr.Failed), class.MaxFailures, strings.Join(cr.Failed, ", "), class.Source)
	}
	current := -1
	for wi := range cr.Waves {
		w := &cr.Waves[wi]
		for _, n := range w.Clusters {
			s := sums[n]
			switch {
			case s.Done:
				w.Done++
			case s.Skip || s.Failed:
			default:
				if current < 0 {
					current = wi
				}
			}
		}
	}
	if current >= 0 {
		cr.CurrentWave = cr.Waves[current].Name
		if !cr.Halted {
			cr.Reason = fmt.Sprintf("wave %s: %d of %d clusters done", cr.CurrentWave, cr.Waves[current].Done, len(cr.Waves[current].Clusters))
		}
	}
	for wi := range cr.Waves {
		g.gateWave(class, &cr, wi, current, sums)
	}
	return cr
}

func (g *Gates) gateWave(class *DesiredClass, cr *ClassRollout, wi, current int, sums map[string]Summary) {
	w := &cr.Waves[wi]
	slots := len(w.Clusters)
	if mc := class.Waves[wi].MaxConcurrent; mc != nil {
		slots = max(mc.Scaled(len(w.Clusters), false, slots), 1)
	}
	for _, n := range w.Clusters {
		if s := sums[n]; s.Started && !s.Done && !s.Skip {
			w.Updating = append(w.Updating, n)
			slots--
		}
	}
	for _, n := range w.Clusters {
		s := sums[n]
		switch {
		case s.Skip || !s.Outdated:
		case cr.Halted && s.Failed:
			g.gates[n] = Gate{Halted: true, Reason: fmt.Sprintf("rollout of class %s %s", cr.Class, cr.Reason)}
		case s.Started:
		case cr.Halted:
			g.hold(w, n, fmt.Sprintf("rollout of class %s %s", cr.Class, cr.Reason))
		case current >= 0 && wi > current:
			prev := &cr.Waves[current]
			g.hold(w, n, fmt.Sprintf("waiting for wave %s of class %s: %d of %d clusters done", prev.Name, cr.Class, prev.Done, len(prev.Clusters)))
		case slots <= 0:
			g.hold(w, n, fmt.Sprintf("waiting for a slot in wave %s of class %s (maxConcurrent %s)", w.Name, cr.Class, class.Waves[wi].MaxConcurrent))
		default:
			slots--
			w.Updating = append(w.Updating, n)
		}
	}
}

func (g *Gates) hold(w *WaveStatus, n, reason string) {
	w.Waiting = append(w.Waiting, n)
	g.gates[n] = Gate{Hold: true, Reason: reason}
}
