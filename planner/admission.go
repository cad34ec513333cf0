package planner

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// newAdmission admits a desired cluster to its class's revision now: the
// record keeps the templates and rules of every pool, the health checks
// and the versions a chained upgrade passes, so the cluster is moved to
// them and acts on them, and on nothing newer, until it is admitted again.
func newAdmission(dc *DesiredCluster, revision, state string, now time.Time) *Admission {
	a := &Admission{Revision: revision, Wave: dc.WaveName, AdmittedAt: now, State: state, Version: dc.Version,
		Rules: true, HealthChecks: dc.HealthChecks, KubernetesVersions: dc.KubernetesVersions}
	for _, p := range dc.pools() {
		a.Pools = append(a.Pools, PoolTemplate{Name: p.Name, Version: p.Version, Provider: p.Provider,
			Spec: p.Spec, FailureDomain: p.FailureDomain, Hash: p.TemplateHash, Rules: p.rules()})
	}
	return a
}

// rules are what the pool acts on besides its template and size.
func (p *Pool) rules() PoolRules {
	return PoolRules{Strategy: p.strategy, RolloutAfter: p.RolloutAfter, DeletionOrder: p.DeletionOrder, MinReady: p.MinReady,
		Naming: p.Naming, MaxInFlight: p.MaxInFlight, Labels: p.Labels, Annotations: p.Annotations}
}

// setRules makes the pool act on r; its strategy is resolved against its
// replicas (kept as it is when r's is the pool's own).
func (p *Pool) setRules(r *PoolRules) {
	if !r.Strategy.equal(p.strategy) {
		p.Strategy = r.Strategy.resolve(p.Replicas)
	}
	p.strategy, p.RolloutAfter, p.DeletionOrder, p.MinReady = r.Strategy, r.RolloutAfter, r.DeletionOrder, r.MinReady
	p.Naming, p.MaxInFlight, p.Labels, p.Annotations = r.Naming, r.MaxInFlight, r.Labels, r.Annotations
}

// upgraded returns a recorded admission as this gitfleet reads it.
//
// An admission recorded before gitfleet recorded rules (Admission.Rules
// false) holds templates only: it is read with the desired cluster's
// rules, health checks and versions, which are what the cluster acted on
// then, unless a class change was merged while gitfleet was being
// upgraded. PlanCluster records them with its next record, so they are
// filled in once.
//
// Such an admission names a class revision an earlier gitfleet computed
// over less of the class (legacyRevision): one to the class's legacy
// revision whose templates are the desired cluster's is an admission to the
// class's revision now, so that an upgrade of gitfleet starts no rollout.
// One whose templates are not (a change was merged while gitfleet was
// being upgraded) stays an admission to an earlier revision: the cluster
// waits for its wave.
func upgraded(a *Admission, dc *DesiredCluster) *Admission {
	if a == nil || a.Rules {
		return a
	}
	n := *a
	n.Rules, n.HealthChecks, n.KubernetesVersions = true, dc.HealthChecks, dc.KubernetesVersions
	n.Pools = slices.Clone(a.Pools)
	for i := range n.Pools {
		if _, p := dc.pool(n.Pools[i].Name); p != nil {
			n.Pools[i].Rules = p.rules()
		}
	}
	if dc.legacy != "" && n.Revision == dc.legacy && dc.legacy != dc.revision && n.current(dc) {
		n.Revision = dc.revision
	}
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

// current reports whether an admission holds exactly what the desired
// cluster acts on but its sizes: its templates and versions, its pools'
// rules, its health checks and the versions a chained upgrade passes.
// Then nothing is left to admit.
func (a *Admission) current(dc *DesiredCluster) bool {
	if a.Version != dc.Version || len(a.Pools) != 1+len(dc.Deployments) {
		return false
	}
	for _, p := range dc.pools() {
		t := a.pool(p.Name)
		if t == nil || t.Hash != p.TemplateHash {
			return false
		}
		if r := p.rules(); a.Rules && !t.Rules.equal(&r) {
			return false
		}
	}
	return !a.Rules || slices.Equal(a.KubernetesVersions, dc.KubernetesVersions) &&
		slices.EqualFunc(a.HealthChecks, dc.HealthChecks, HealthCheck.same)
}

// admitted returns the cluster the planner moves to: the desired cluster's
// sizes and spec.paused with the admission's templates, versions, pool
// rules and health checks. A desired pool the admission lacks is pending:
// its machines are created once the cluster is admitted to it.
func admitted(dc *DesiredCluster, a *Admission) *DesiredCluster {
	if a == nil {
		return dc
	}
	ed := *dc
	ed.Version = a.Version
	if a.Rules {
		ed.KubernetesVersions = a.KubernetesVersions
		ed.HealthChecks = placed(a.HealthChecks, dc.HealthChecks)
	}
	ed.ControlPlane = withTemplate(dc.ControlPlane, a, a.pool(""))
	ed.Deployments = make([]Pool, len(dc.Deployments))
	for i := range dc.Deployments {
		ed.Deployments[i] = withTemplate(dc.Deployments[i], a, a.pool(dc.Deployments[i].Name))
	}
	return &ed
}

func withTemplate(p Pool, a *Admission, t *PoolTemplate) Pool {
	if t == nil {
		p.pending = true
		return p
	}
	p.Version, p.Provider, p.Spec, p.FailureDomain, p.TemplateHash = t.Version, t.Provider, t.Spec, t.FailureDomain, t.Hash
	if a.Rules {
		p.setRules(&t.Rules)
	}
	return p
}

// placed returns the admitted health checks, each at the place the desired
// health check of its name is written now (for the messages that name
// it), when there is one.
func placed(admitted, desired []HealthCheck) []HealthCheck {
	out := admitted
	for i := range admitted {
		for j := range desired {
			if desired[j].Name != admitted[i].Name || desired[j].Source == admitted[i].Source {
				continue
			}
			if &out[0] == &admitted[0] {
				out = slices.Clone(admitted)
			}
			out[i].Source = desired[j].Source
		}
	}
	return out
}

// same: the same health check, wherever it is written.
func (h HealthCheck) same(o HealthCheck) bool {
	return h.Name == o.Name && sameSelector(h.Selector, o.Selector) && h.NodeStartupTimeout == o.NodeStartupTimeout &&
		h.HeartbeatTimeout == o.HeartbeatTimeout && h.NotReadyTimeout == o.NotReadyTimeout &&
		sameIntOrPercent(h.MaxUnhealthy, o.MaxUnhealthy) && h.InRange == o.InRange && h.RangeMin == o.RangeMin &&
		h.RangeMax == o.RangeMax && sameIntOrPercent(h.MaxInFlight, o.MaxInFlight)
}

// sameSelector: the same selector, whether a map or a list is empty or nil.
func sameSelector(a, b v1alpha1.LabelSelector) bool {
	return maps.Equal(a.MatchLabels, b.MatchLabels) &&
		slices.EqualFunc(a.MatchExpressions, b.MatchExpressions, func(x, y v1alpha1.LabelSelectorRequirement) bool {
			return x.Key == y.Key && x.Operator == y.Operator && slices.Equal(x.Values, y.Values)
		})
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
	if convergedOn(ed, ms, a.AdmittedAt, now) {
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
		if why, _ := unhealthy(m, ed, now); why != "" {
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
// all on the pool's template at its final version and made after its
// rollout.after, Running and ready, with nothing in flight and no machine
// of a pool ed does not have, and whether ed's health checks have watched
// each machine since (admitted) for their Ready timeouts.
//
// A machine made before a rollout.after still to come is not converged:
// it will be replaced then, and the revision that set the time is not
// done before its machines were. A machine a health check has not watched
// for its timeout under the revision is not either: until then the check
// cannot have found it unhealthy, and a health check the revision brings
// has judged nothing yet.
func convergedOn(ed *DesiredCluster, ms []ObservedMachine, since, now time.Time) bool {
	live := make([]int, 1+len(ed.Deployments))
	for i := range ms {
		m := &ms[i]
		if m.Phase == wire.PhaseDeleted {
			continue
		}
		pi, pool := ed.pool(m.Deployment)
		if pool == nil || pool.pending || m.TemplateHash != pool.TemplateHash || pool.dueForRollout(m) || !m.Ready() || m.InFlight() ||
			now.Before(watched(ed, m, since)) {
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
// desired template, made after its rollout.after, and, unless the cluster
// has no machine at all (a new cluster), every pool that wants machines
// has one running it: a cluster never admitted is then admitted at once,
// since admitting it changes no machine and makes none from a template it
// is not known to run. A pool with no machine left (its records lost, and
// then its machines) runs no known template: made from the desired one
// before its wave, its machines would carry a class change past the
// earlier waves, so such a cluster waits for its wave (heldByGate).
func runsDesired(dc *DesiredCluster, ms []ObservedMachine) bool {
	live := make([]int, 1+len(dc.Deployments))
	any := false
	for i := range ms {
		m := &ms[i]
		if m.Phase == wire.PhaseDeleted {
			continue
		}
		i, pool := dc.pool(m.Deployment)
		if pool == nil || m.TemplateHash != pool.TemplateHash || pool.dueForRollout(m) {
			return false
		}
		any = true
		if m.Phase != wire.PhaseDeleting {
			live[i]++
		}
	}
	for i, p := range dc.pools() {
		if any && p.Replicas > 0 && live[i] == 0 {
			return false
		}
	}
	return true
}

// watched is when ed's health checks will have watched m for longer than
// their Ready timeouts (Unknown, False: they find a machine unhealthy
// after more than the timeout) since it was made or since (the
// admission), whichever is later; zero when no such check selects it.
func watched(ed *DesiredCluster, m *ObservedMachine, since time.Time) time.Time {
	var timeout time.Duration
	for i := range ed.HealthChecks {
		hc := &ed.HealthChecks[i]
		if hc.Selector.Matches(ed.labelsOf(m)) {
			timeout = max(timeout, hc.HeartbeatTimeout, hc.NotReadyTimeout)
		}
	}
	if timeout == 0 {
		return time.Time{}
	}
	if m.Created.After(since) {
		since = m.Created
	}
	return since.Add(timeout + time.Nanosecond)
}

// watchedAll is when ed's health checks will have watched every live
// machine for their timeouts since the admission a (zero: when they have,
// or there is no such check): the cluster is planned again then.
func watchedAll(ed *DesiredCluster, a *Admission, ms []ObservedMachine, now time.Time) time.Time {
	var last time.Time
	if a == nil || a.State == AdmissionDone || a.State == AdmissionFailed {
		return last
	}
	for i := range ms {
		if m := &ms[i]; m.Phase != wire.PhaseDeleted {
			if at := watched(ed, m, a.AdmittedAt); at.After(now) && at.After(last) {
				last = at
			}
		}
	}
	return last
}

// dueForRollout reports whether m was made before the pool's rollout.after, so
// that it is replaced once that time has passed.
func (p *Pool) dueForRollout(m *ObservedMachine) bool {
	return !p.RolloutAfter.IsZero() && m.Created.Before(p.RolloutAfter)
}
