package planner

import (
	"fmt"
	"time"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// newAdmission admits a desired cluster to its class's revision now: the
// record keeps the templates of every pool, so the cluster is moved to them
// and to nothing newer until it is admitted again.
func newAdmission(dc *DesiredCluster, revision, state string, now time.Time) *Admission {
	a := &Admission{Revision: revision, Wave: dc.WaveName, AdmittedAt: now, State: state, Version: dc.Version}
	for _, p := range dc.pools() {
		a.Pools = append(a.Pools, PoolTemplate{Name: p.Name, Version: p.Version, Provider: p.Provider,
			Spec: p.Spec, FailureDomain: p.FailureDomain, Hash: p.TemplateHash})
	}
	return a
}

// upgraded returns a recorded admission as this gitfleet reads it. An
// earlier gitfleet computed class revisions over less of the class
// (legacyRevision): an admission to the class's legacy revision whose
// templates are the desired cluster's is an admission to the class's
// revision now, so that an upgrade of gitfleet starts no rollout. One
// whose templates are not (a change was merged while gitfleet was being
// upgraded) stays an admission to an earlier revision: the cluster waits
// for its wave.
func upgraded(a *Admission, dc *DesiredCluster) *Admission {
	if a == nil || dc.legacy == "" || a.Revision != dc.legacy || dc.legacy == dc.revision || !a.current(dc) {
		return a
	}
	n := *a
	n.Revision = dc.revision
	return &n
}

// pools returns the control plane followed by the worker pools.
func (dc *DesiredCluster) pools() []*Pool {
	out := make([]*Pool, 0, 1+len(dc.Deployments))
	out = append(out, &dc.ControlPlane)
	for i := range dc.Deployments {
		out = append(out, &dc.Deployments[i])
	}
	return out
}

// current reports whether an admission's templates are exactly the desired
// cluster's: nothing is left to admit.
func (a *Admission) current(dc *DesiredCluster) bool {
	if a.Version != dc.Version || len(a.Pools) != 1+len(dc.Deployments) {
		return false
	}
	for _, p := range dc.pools() {
		t := a.pool(p.Name)
		if t == nil || t.Hash != p.TemplateHash {
			return false
		}
	}
	return true
}

// admitted returns the cluster the planner moves to: the desired cluster's
// sizes, strategies, labels and health checks with the admission's
// templates and versions. A desired pool the admission lacks is pending:
// its machines are created once the cluster is admitted to it.
func admitted(dc *DesiredCluster, a *Admission) *DesiredCluster {
	if a == nil {
		return dc
	}
	ed := *dc
	ed.Version = a.Version
	ed.ControlPlane = withTemplate(dc.ControlPlane, a.pool(""))
	ed.Deployments = make([]Pool, len(dc.Deployments))
	for i := range dc.Deployments {
		ed.Deployments[i] = withTemplate(dc.Deployments[i], a.pool(dc.Deployments[i].Name))
	}
	return &ed
}

func withTemplate(p Pool, t *PoolTemplate) Pool {
	if t == nil {
		p.pending = true
		return p
	}
	p.Version, p.Provider, p.Spec, p.FailureDomain, p.TemplateHash = t.Version, t.Provider, t.Spec, t.FailureDomain, t.Hash
	return p
}

// advance moves an admission forward by what the machines show: Done once
// every pool runs the admitted templates, ready; Failed when a machine
// created since a wave admitted the cluster failed or became unhealthy
// first. It returns a changed copy, or a unchanged.
func advance(a *Admission, dc *DesiredCluster, ms []ObservedMachine, now time.Time) *Admission {
	if a == nil || a.State == AdmissionDone {
		return a
	}
	ed := admitted(dc, a)
	if convergedOn(ed, ms, now) {
		n := *a
		n.State, n.Reason, n.FailedAt = AdmissionDone, "", time.Time{}
		return &n
	}
	if a.State != AdmissionProgressing {
		return a
	}
	for i := range ms {
		m := &ms[i]
		if m.Phase == wire.PhaseDeleted || m.Phase == wire.PhaseDeleting || m.Created.Before(a.AdmittedAt) {
			continue
		}
		if why, _ := unhealthy(m, dc, now); why != "" {
			n := *a
			n.State, n.FailedAt = AdmissionFailed, now
			n.Reason = fmt.Sprintf("machine %s: %s", m.Name, why)
			if m.Phase == wire.PhaseFailed && m.Message != "" {
				n.Reason += ": " + m.Message
			}
			return &n
		}
	}
	return a
}

// convergedOn reports whether every pool of ed has exactly its replicas,
// all on the pool's template at its final version, Running and ready, with
// nothing in flight and no machine of a pool ed does not have.
func convergedOn(ed *DesiredCluster, ms []ObservedMachine, now time.Time) bool {
	live := make([]int, 1+len(ed.Deployments))
	for i := range ms {
		m := &ms[i]
		if m.Phase == wire.PhaseDeleted {
			continue
		}
		pi, pool := ed.pool(m.Deployment)
		if pool == nil || pool.pending || m.TemplateHash != pool.TemplateHash || !m.Ready() || m.InFlight() {
			return false
		}
		if why, _ := unhealthy(m, ed, now); why != "" {
			return false
		}
		live[pi]++
	}
	for i, p := range ed.pools() {
		if !p.pending && live[i] != p.Replicas {
			return false
		}
	}
	return true
}

// runsDesired reports whether every live machine already runs its pool's
// desired template: a cluster never admitted is then admitted at once,
// since admitting it changes no machine.
func runsDesired(dc *DesiredCluster, ms []ObservedMachine) bool {
	for i := range ms {
		m := &ms[i]
		if m.Phase == wire.PhaseDeleted {
			continue
		}
		_, pool := dc.pool(m.Deployment)
		if pool == nil || m.TemplateHash != pool.TemplateHash {
			return false
		}
	}
	return true
}
