package planner

import (
	"testing"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// checkFleetRules checks the class rollout rules after a round, from the
// records the planner kept before and after it and the steps it gave:
//
//   - no cluster is admitted by its wave to its class's revision before every
//     cluster of the waves before it is done (or failed) on that revision;
//   - no wave ever has more than maxConcurrent clusters moving to the
//     revision;
//   - a halted rollout admits no cluster;
//   - every machine created runs a template of its cluster's admission: no
//     step moves a cluster to a revision it was not admitted to;
//   - an admission turns Done only when every pool has its replicas, all on
//     the admitted templates, ready.
func checkFleetRules(t testing.TB, s *sim, before []ObservedMachine) {
	t.Helper()
	after := s.records
	by := groupByCluster(before)
	for _, class := range s.desired.Classes {
		rev := class.Revision
		rrBefore, hadRecord := s.recBefore.Rollouts[class.Name]
		haltedBefore := hadRecord && rrBefore.Revision == rev && len(rrBefore.Failed) >= class.MaxFailures
		rr := after.Rollouts[class.Name]
		moving := make([]int, len(class.Waves))
		for _, dc := range s.desired.Clusters {
			if dc.Class != class.Name {
				continue
			}
			a := after.Clusters[dc.Name].Admission
			if a == nil || a.Revision != rev {
				continue
			}
			if a.State == AdmissionProgressing {
				moving[dc.Wave]++
			}
			var was *Admission
			if rec, ok := s.recBefore.Clusters[dc.Name]; ok {
				was = rec.Admission
			}
			admitted := a.State == AdmissionProgressing && (was == nil || was.Revision != rev || was.State != AdmissionProgressing || !was.AdmittedAt.Equal(a.AdmittedAt))
			if !admitted {
				continue
			}
			if was != nil && was.Revision == rev && was.current(dc) == false {
				continue // re-admitted for a change of its own
			}
			if haltedBefore {
				t.Errorf("round %d: %s admitted to %s of class %s after the rollout halted", s.round, dc.Name, rev, class.Name)
			}
			for _, other := range s.desired.Clusters {
				if other.Class != class.Name || other.Wave >= dc.Wave || other.Paused || len(other.Problems) > 0 || versionRefused(other, by[other.Name]) != nil {
					continue
				}
				oa := after.Clusters[other.Name].Admission
				done := oa != nil && oa.Revision == rev && (oa.State == AdmissionDone || oa.State == AdmissionFailed && rr.failed(other.Name))
				if !done {
					t.Errorf("round %d: %s (wave %s) admitted to %s of class %s while %s (wave %s) is not done on it (%+v)",
						s.round, dc.Name, dc.WaveName, rev, class.Name, other.Name, other.WaveName, oa)
				}
			}
		}
		for wi, w := range class.Waves {
			n := 0
			for _, dc := range s.desired.Clusters {
				if dc.Class == class.Name && dc.Wave == wi {
					n++
				}
			}
			limit := n
			if w.MaxConcurrent != nil {
				limit = max(w.MaxConcurrent.Scaled(n, false, n), 1)
			}
			if moving[wi] > limit {
				t.Errorf("round %d: wave %s of class %s has %d clusters moving to %s, more than maxConcurrent %d", s.round, w.Name, class.Name, moving[wi], rev, limit)
			}
		}
	}
	for _, st := range s.last.Steps {
		if st.Op != wire.OpCreate {
			continue
		}
		m := st.Machine
		dc := s.desired.Cluster(m.Cluster)
		if dc == nil {
			continue
		}
		if !admittedHash(dc, after.Clusters[m.Cluster].Admission, m.Deployment, m.Version, m.TemplateHash) {
			t.Errorf("round %d: %s created with template %s at %s, not one of its admission (%+v)", s.round, m.Name, m.TemplateHash, m.Version, after.Clusters[m.Cluster].Admission)
		}
	}
	for name, rec := range after.Clusters {
		a, dc := rec.Admission, s.desired.Cluster(name)
		if a == nil || dc == nil || a.State != AdmissionDone {
			continue
		}
		dc = Scaled(dc, s.scale[name]) // an autoscaled pool's size is the daemon's
		if was := s.recBefore.Clusters[name].Admission; was != nil && was.State == AdmissionDone {
			continue // done before (perhaps carried over to a revision that changes none of its templates)
		}
		count := map[string]int{}
		for _, m := range by[name] {
			tpl := a.pool(m.Deployment)
			if tpl == nil || m.TemplateHash != tpl.Hash || !m.Ready() {
				t.Errorf("round %d: %s Done on %s but machine %s runs %s (%s)", s.round, name, a.Revision, m.Name, m.TemplateHash, m.Phase)
			}
			count[m.Deployment]++
		}
		for _, p := range dc.pools() {
			if a.pool(p.Name) != nil && count[p.Name] != p.Replicas {
				t.Errorf("round %d: %s Done on %s with %d machines in pool %q, want %d", s.round, name, a.Revision, count[p.Name], p.Name, p.Replicas)
			}
		}
	}
}

// admittedHash reports whether hash is what a machine of pool dep at
// version v is made of under admission a (the desired pool when the
// cluster was never admitted), computed from the record itself.
func admittedHash(dc *DesiredCluster, a *Admission, dep, v, hash string) bool {
	if a == nil {
		_, pool := dc.pool(dep)
		return pool != nil && pool.hashAt(v) == hash
	}
	t := a.pool(dep)
	if t == nil {
		return false
	}
	p := Pool{Provider: t.Provider, Spec: t.Spec, FailureDomain: t.FailureDomain}
	return p.hashAt(v) == hash
}
