package planner

import (
	"time"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Summary is what a class rollout needs to know of one cluster: its
// recorded admission, moved forward by what its machines show. The daemon
// keeps one per cluster and recomputes only the cluster an event is about.
// Summaries are comparable: when one changes, the gates of the other
// clusters of its class may change.
type Summary struct {
	Cluster string
	Class   string
	Wave    int
	// Skip: paused, broken (Problems) or its version change refused; the
	// cluster takes no part in its class's rollout and does not hold it
	// back. Paused: it is paused (spec.paused).
	Skip   bool
	Paused bool
	// Revision, State, AdmittedAt and FailedAt are the cluster's admission
	// after this look at its machines; Revision is "" when it was never
	// admitted.
	Revision   string
	State      string
	AdmittedAt time.Time
	FailedAt   time.Time
	Reason     string
	// Current: the admission holds exactly what the desired cluster acts
	// on but its sizes (templates and rules: Admission.current).
	Current bool
	// Fresh: never admitted, and admitting it changes no machine (it has
	// none, or they all run the desired templates).
	Fresh bool
}

// Summarize sums one cluster up for its class rollout. rec is the cluster's
// record (nil when there is none).
func Summarize(dc *DesiredCluster, rec *ClusterRecord, ms []ObservedMachine, now time.Time) Summary {
	s := Summary{Cluster: dc.Name, Class: dc.Class, Wave: dc.Wave, Paused: dc.Paused,
		Skip: dc.Paused || len(dc.Problems) > 0 || versionRefused(dc, ms) != nil}
	var a *Admission
	if rec != nil {
		a = advance(upgraded(rec.Admission, dc), dc, ms, now)
	}
	if a == nil {
		s.Fresh = runsDesired(dc, ms)
		return s
	}
	s.Revision, s.State, s.AdmittedAt, s.FailedAt, s.Reason = a.Revision, a.State, a.AdmittedAt, a.FailedAt, a.Reason
	s.Current = a.current(dc)
	return s
}

// versionRefused says why the cluster's desired version cannot be reached
// from the version its control plane runs (a downgrade, a major change, a
// missing intermediate minor), or nil.
func versionRefused(dc *DesiredCluster, ms []ObservedMachine) *Problem {
	cpVer := ""
	for i := range ms {
		m := &ms[i]
		if m.Deployment != "" || m.Phase == wire.PhaseDeleted || m.Phase == wire.PhaseDeleting {
			continue
		}
		if cpVer == "" || compareVersions(m.Version, cpVer) < 0 {
			cpVer = m.Version
		}
	}
	if cpVer == "" {
		return nil
	}
	_, verr := upgradeChain(cpVer, dc.Version, dc.KubernetesVersions)
	if verr == nil {
		return nil
	}
	prob := Problem{Source: dc.VersionSource, Field: dc.VersionField, Message: verr.message}
	if verr.field != "" {
		prob.Message = verr.message + " (class " + dc.Class + ")"
	}
	return &prob
}

// pool returns the index (0 control plane, i+1 deployment i) and the pool a
// machine of deployment dep belongs to, or nil.
func (dc *DesiredCluster) pool(dep string) (int, *Pool) {
	if dep == "" {
		return 0, &dc.ControlPlane
	}
	for i := range dc.Deployments {
		if dc.Deployments[i].Name == dep {
			return i + 1, &dc.Deployments[i]
		}
	}
	return -1, nil
}
