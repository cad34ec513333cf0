package planner

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// stepHash is the hash machines of pool get at version v.
func stepHash(pool *Pool, v string) string {
	if v == pool.Version {
		return pool.TemplateHash
	}
	return pool.hashAt(v)
}

// markUpToDate compares each machine with its pool's template at the version
// it moves to now, and fills the pool counts of the status.
func (p *clusterPass) markUpToDate(cpStep string, want []string) {
	st := &p.res.Status
	st.ControlPlane = p.poolStatus(&p.dc.ControlPlane, cpStep)
	st.Deployments = st.Deployments[:0]
	for i := range p.dc.Deployments {
		st.Deployments = append(st.Deployments, p.poolStatus(&p.dc.Deployments[i], want[i]))
	}
}

func (p *clusterPass) poolStatus(pool *Pool, ver string) PoolStatus {
	hash := stepHash(pool, ver)
	ps := PoolStatus{Name: PoolName(pool.Name), Replicas: pool.Replicas, Version: ver}
	if a := pool.Autoscale; a != nil {
		r := p.in.Scale[pool.Name]
		ps.Autoscale = &AutoscaleStatus{Min: a.Min, Max: a.Max, By: r.By, At: r.At}
	}
	after := !pool.RolloutAfter.IsZero() && !p.in.Now.Before(pool.RolloutAfter)
	if !pool.RolloutAfter.IsZero() && !after {
		p.wakeAt(pool.RolloutAfter)
	}
	for _, s := range p.pools[pool.Name] {
		// rollout.after: once passed, a machine made before it is outdated.
		s.upToDate = s.m.TemplateHash == hash && !(after && s.m.Created.Before(pool.RolloutAfter))
		if s.deleting {
			continue
		}
		ps.Machines++
		if s.ready {
			ps.Ready++
		}
		if s.upToDate {
			ps.UpToDate++
		}
	}
	return ps
}

// remediate deletes unhealthy workers (all at once, as a MachineSet does,
// or as many at a time as their health check's remediation.maxInFlight
// allows, else their standalone MachineDeployment's) unless their health
// check's triggerIf short-circuit stopped remediation; unhealthy
// control-plane machines are left to planControlPlane. A pool's machine
// being deleted, for whatever reason, counts as a remediation in flight.
func (p *clusterPass) remediate() {
	var live []*mstate
	deleting := map[string]int{}
	for _, dep := range sortedKeys(p.pools) {
		for _, s := range p.pools[dep] {
			if !s.deleting {
				live = append(live, s)
			} else {
				deleting[dep]++
			}
		}
	}
	replicas := map[string]int{}
	poolLimit := map[string]*v1alpha1.IntOrPercent{}
	for _, d := range p.dc.Deployments {
		replicas[d.Name] = d.Replicas
		poolLimit[d.Name] = d.MaxInFlight
	}
	blocked, stopped := remediation(live, p.dc)
	for _, msg := range blocked {
		p.cond(CondRemediationBlocked, "%s", msg)
	}
	n, waiting := 0, 0
	for _, s := range live {
		if s.unhealthy == "" {
			continue
		}
		if s.hc >= 0 && stopped[s.hc] && !s.m.Gone() {
			s.stopped = true
			continue
		}
		if s.m.Deployment == "" {
			continue
		}
		if s.hc >= 0 && !s.m.Gone() {
			limit := p.dc.HealthChecks[s.hc].MaxInFlight
			if limit == nil {
				limit = poolLimit[s.m.Deployment]
			}
			if limit != nil && deleting[s.m.Deployment] >= limit.Scaled(replicas[s.m.Deployment], true, 0) {
				waiting++
				continue
			}
		}
		n++
		deleting[s.m.Deployment]++
		p.remove(s, remediatePrefix+s.unhealthy)
	}
	if n > 0 || waiting > 0 {
		msg := fmt.Sprintf("replacing %d unhealthy worker machines", n)
		if waiting > 0 {
			msg += fmt.Sprintf("; %d more wait for remediation.maxInFlight", waiting)
		}
		p.cond(CondRemediating, "%s", msg)
	}
}

// planControlPlane moves the control plane one machine at a time, the way
// Cluster API's KubeadmControlPlane does: nothing while a machine is in
// flight; remediation only when quorum survives; scale up first (surge 1),
// then delete an outdated machine once all are ready.
func (p *clusterPass) planControlPlane(ver string) {
	pool := &p.dc.ControlPlane
	hash := stepHash(pool, ver)
	var live []*mstate
	for _, s := range p.pools[""] {
		if s.deleting || (s.m.InFlight() && s.unhealthy == "") {
			return // one control-plane change at a time
		}
		live = append(live, s)
	}
	quorum := pool.Replicas/2 + 1
	for _, s := range live {
		if s.unhealthy == "" || s.stopped {
			continue
		}
		others := 0
		for _, o := range live {
			if o != s && o.ready {
				others++
			}
		}
		// Before the control plane ever ran there is no etcd to lose; a
		// machine that is gone has no member left to lose.
		if others >= quorum || neverRan(live) || s.m.Gone() {
			p.remove(s, remediateControlPlanePrefix+s.unhealthy)
			p.cond(CondRemediating, "replacing unhealthy control-plane machine %s", s.m.Name)
			return
		}
		p.cond(CondRemediationBlocked, "deleting control-plane machine %s (%s) would leave %d ready, fewer than the quorum of %d; fix it by hand or restore another control-plane machine",
			s.m.Name, s.unhealthy, others, quorum)
		break
	}
	allReady := true
	var outdated []*mstate
	for _, s := range live {
		allReady = allReady && s.ready
		if !s.upToDate {
			outdated = append(outdated, s)
		}
	}
	hold := p.in.Gate.Hold
	if len(live) >= pool.Replicas {
		p.settle(pool.Name)
	}
	switch n := len(live); {
	case n < pool.Replicas:
		p.replace(pool, ver, hash, fmt.Sprintf("control plane has %d of %d machines", n, pool.Replicas))
	case len(outdated) > 0 && !hold && n == pool.Replicas:
		p.create(pool, ver, hash, fmt.Sprintf("rolling update of the control plane to %s: surge one machine before removing an outdated one (%d outdated)", ver, len(outdated)))
	case n > pool.Replicas && allReady:
		victims := deleteOrder(live, v1alpha1.DeleteOldest, func(s *mstate) bool { return !s.upToDate })
		s := victims[0]
		if !s.upToDate && !hold {
			p.del(s, fmt.Sprintf("rolling update of the control plane to %s: replaced by a new machine that is ready", ver))
		} else {
			p.del(s, fmt.Sprintf("scale down control plane from %d to %s", n, plural(pool.Replicas, "machine")))
		}
	}
}

// neverRan reports whether no machine of ms ever sent a heartbeat.
func neverRan(ms []*mstate) bool {
	for _, s := range ms {
		if !s.m.LastHeartbeat.IsZero() {
			return false
		}
	}
	return true
}

// deleteOrder sorts machines for deletion: unready first, then those
// preferred, then by the pool's deletion.order: the oldest (Oldest, and
// ""), the newest (Newest), or in an order fixed by a hash of their names
// (Random: the planner is a pure function, so the same machines always
// draw the same lots).
func deleteOrder(ms []*mstate, order string, preferred func(*mstate) bool) []*mstate {
	out := append([]*mstate(nil), ms...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.ready != b.ready {
			return !a.ready
		}
		if pa, pb := preferred(a), preferred(b); pa != pb {
			return pa
		}
		switch order {
		case v1alpha1.DeleteNewest:
			return older(b.m, a.m)
		case v1alpha1.DeleteRandom:
			if la, lb := lot(a.m.Name), lot(b.m.Name); la != lb {
				return la < lb
			}
		}
		return older(a.m, b.m)
	})
	return out
}

// planDeployment scales and replaces one worker pool per its strategy.
// RollingUpdate keeps machines <= replicas+maxSurge and ready machines >=
// replicas-maxUnavailable; OnDelete (and a pool deferred while the control
// plane upgrades, or a cluster held with no admission) never deletes a
// machine only for being outdated. A pending pool (not admitted yet) gets
// no machine.
func (p *clusterPass) planDeployment(pool *Pool, ver, hash string, deferred bool) {
	if pool.pending {
		return
	}
	var live []*mstate
	deleting := 0
	for _, s := range p.pools[pool.Name] {
		if s.deleting {
			deleting++
			continue
		}
		live = append(live, s)
	}
	newN, available := 0, 0
	for _, s := range live {
		if s.upToDate {
			newN++
		}
		if s.available {
			available++
		}
	}
	rolling := pool.Strategy.Type != "OnDelete" && !p.in.Gate.Hold && !deferred
	r := pool.Replicas
	if len(live) >= r {
		p.settle(pool.Name)
	}
	var create int
	if rolling {
		create = min(r-newN, r+pool.Strategy.MaxSurge-len(live)-deleting)
	} else {
		create = r - len(live)
	}
	for i := range max(create, 0) {
		if rolling && len(live) >= r {
			p.create(pool, ver, hash, fmt.Sprintf("rolling update of %s to %s: %d of %d machines up to date, surge one", pool.Name, ver, newN, r))
			continue
		}
		reason := fmt.Sprintf("%s has %d of %d machines", pool.Name, len(live), r)
		if i < r-len(live) {
			p.replace(pool, ver, hash, reason) // a missing machine: one removed for its health?
		} else {
			p.create(pool, ver, hash, reason)
		}
	}

	// Deletions: outdated machines (rolling only) and machines beyond replicas.
	var victims []*mstate
	if rolling {
		for _, s := range live {
			if !s.upToDate {
				victims = append(victims, s)
			}
		}
		extra := newN - r
		for _, s := range deleteOrder(live, pool.DeletionOrder, func(*mstate) bool { return false }) {
			if extra <= 0 {
				break
			}
			if s.upToDate {
				victims = append(victims, s)
				extra--
			}
		}
	} else if extra := len(live) - r; extra > 0 {
		victims = deleteOrder(live, pool.DeletionOrder, func(s *mstate) bool { return !s.upToDate })[:extra]
	}
	// Only available machines (ready for minReadySeconds) count: an
	// outdated one goes once enough replacements are available.
	budget := available - (r - pool.Strategy.MaxUnavailable)
	if !rolling {
		budget = len(victims)
	}
	for _, s := range deleteOrder(victims, pool.DeletionOrder, func(s *mstate) bool { return !s.upToDate }) {
		if s.stopped {
			continue
		}
		if s.available {
			if budget <= 0 {
				continue
			}
			budget--
		}
		switch {
		case !s.upToDate && rolling:
			p.del(s, fmt.Sprintf("rolling update of %s to %s (maxSurge %d, maxUnavailable %d)", pool.Name, ver, pool.Strategy.MaxSurge, pool.Strategy.MaxUnavailable))
		default:
			p.del(s, fmt.Sprintf("scale down %s to %s", pool.Name, plural(r, "machine")))
		}
	}
}

// planOrphans deletes machines of pools no longer in the cluster.
func (p *clusterPass) planOrphans() {
	known := map[string]bool{"": true}
	for _, d := range p.dc.Deployments {
		known[d.Name] = true
	}
	for _, dep := range sortedKeys(p.pools) {
		if known[dep] {
			continue
		}
		for _, s := range p.pools[dep] {
			if !s.deleting && s.m.Role == wire.RoleWorker {
				p.del(s, fmt.Sprintf("MachineDeployment %s was removed from cluster %s", dep, p.in.Name))
			}
		}
	}
	// Machines removed from such a pool are settled: nothing replaces
	// them, and a pool of that name added back later is the spec's doing.
	for _, r := range slices.Clone(p.removed) {
		if !known[r.Deployment] {
			p.settle(r.Deployment)
		}
	}
}

// lot is a machine's draw for deletion.order Random.
func lot(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}
