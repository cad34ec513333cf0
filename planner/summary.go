package planner

import (
	"time"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// Summary is what a class rollout needs to know of one cluster. The daemon
// keeps one per cluster and recomputes only the cluster an event is about.
type Summary struct {
	Cluster string
	Class   string
	Wave    int
	// Skip: paused or broken (Problems); the cluster takes no part in its
	// class's rollout and does not hold it back.
	Skip bool
	// Outdated: some machine does not run the cluster's final template.
	Outdated bool
	// Started: outdated, and the replacement began (a machine runs the
	// final template, a task is in flight, or its machines' versions differ).
	Started bool
	// Done: every pool has exactly its replicas, all on the final template,
	// Running and reported healthy by a heartbeat sent after their creation.
	Done bool
	// Failed: started, not done, and a machine is Failed or unhealthy.
	Failed bool
}

// Summarize sums one cluster up for its class rollout.
func Summarize(dc *DesiredCluster, ms []ObservedMachine, now time.Time) Summary {
	s := Summary{Cluster: dc.Name, Class: dc.Class, Wave: dc.Wave, Skip: dc.Paused || len(dc.Problems) > 0}
	live := make([]int, 1+len(dc.Deployments)) // per pool, index 0 the control plane
	doneSoFar, bad, upToDate, inFlight, mixed := true, false, false, false, false
	firstVersion := ""
	for i := range ms {
		m := &ms[i]
		if m.Phase == wire.PhaseDeleted {
			continue
		}
		pi, pool := dc.pool(m.Deployment)
		if pool == nil || m.TemplateHash != pool.TemplateHash {
			s.Outdated = true
		} else {
			upToDate = true
		}
		if m.InFlight() {
			inFlight = true
		}
		if firstVersion == "" {
			firstVersion = m.Version
		} else if m.Version != firstVersion {
			mixed = true
		}
		why, _ := unhealthy(m, dc.HealthChecks, now)
		if why != "" {
			bad = true
		}
		if pool != nil && m.Phase != wire.PhaseDeleting {
			live[pi]++
		}
		if m.Phase == wire.PhaseDeleting || why != "" || !m.Ready() {
			doneSoFar = false
		}
	}
	if live[0] != dc.ControlPlane.Replicas {
		doneSoFar = false
	}
	for i := range dc.Deployments {
		if live[i+1] != dc.Deployments[i].Replicas {
			doneSoFar = false
		}
	}
	s.Done = doneSoFar && !s.Outdated
	s.Started = s.Outdated && (upToDate || inFlight || mixed)
	s.Failed = s.Started && !s.Done && bad
	return s
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
