package reconciler

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
	"github.com/gitfleet/gitfleet/sources"
)

// writeClusters hands a planning pass's clusters to the status writer,
// which commits a file only when something a user would notice changed:
// the counts in order, then the status files built and encoded on every
// core (a restart's first pass writes all 10,000). The loop's state is
// only read meanwhile: the loop waits here.
func (r *Reconciler) writeClusters(planned []plannedCluster, planID string) {
	var set []plannedCluster
	for _, pc := range planned {
		if r.countCluster(pc.name, pc.status, planID) {
			set = append(set, pc)
		}
	}
	origin := r.origin(planID)
	workers := min(runtime.GOMAXPROCS(0), len(set)/parallelStatusMin+1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(set); i += workers {
				r.setClusterStatus(set[i].name, set[i].status, origin)
			}
		})
	}
	wg.Wait()
}

// parallelStatusMin is how many status files a goroutine is worth.
const parallelStatusMin = 64

// plannedCluster is a cluster a pass planned, with the status it led to.
type plannedCluster struct {
	name   string
	status planner.ClusterStatus
}

// origin is what a pass's status changes come from.
func (r *Reconciler) origin(planID string) status.Origin {
	origin := status.Origin{PlanID: planID}
	if r.rev != nil {
		origin.SourceCommit = r.rev.Commit
	}
	return origin
}

// countCluster updates the fleet's counts with a planned cluster and, for
// a cluster that is gone, removes its status file; it reports whether the
// cluster's status file is to be written (setClusterStatus).
func (r *Reconciler) countCluster(name string, ps planner.ClusterStatus, planID string) bool {
	gone := r.desired.Cluster(name) == nil && len(r.machines[name]) == 0
	if gone {
		r.counts.dropCluster(name)
	} else {
		r.counts.setCluster(name, ps.Phase, ps.Class)
	}
	if r.o.Status == nil {
		return false
	}
	if gone {
		delete(r.deleted, name)
		delete(r.removed, name)
		if !r.gone[name] {
			r.gone[name] = true
			r.log.Info().Str(logCluster, name).Msg("cluster deleted")
			r.forgetPKI(name)
			if err := r.o.Status.DeleteCluster(name, r.origin(planID)); err != nil {
				r.log.Error().Err(err).Msg("status: delete cluster")
			}
		}
		return false
	}
	return true
}

// setClusterStatus writes a cluster's status file from its plan and its
// machines' records, unless its newest status was made from the same
// (statusKey); it only reads the loop's state.
func (r *Reconciler) setClusterStatus(name string, ps planner.ClusterStatus, origin status.Origin) {
	cs := clusterHead(ps)
	cs.Deleted = r.deleted[name]
	ms := r.machines[name]
	key := statusKey(&cs, ms)
	if r.o.Status.MadeFrom(name, key) {
		return
	}
	cs.Machines = machineStatuses(ms)
	if err := r.o.Status.SetClusterFrom(cs, key, origin); err != nil {
		r.log.Error().Err(err).Str(logCluster, name).Msg("status: set cluster")
	}
}

// clusterHead turns the planner's view of a cluster into the status
// branch's file, but for the machines (machineStatuses). Planner
// conditions hold when present; Ready is always written, False when the
// planner did not set it.
func clusterHead(ps planner.ClusterStatus) status.ClusterStatus {
	cs := status.ClusterStatus{Name: ps.Name, Class: ps.Class, Version: ps.Version, Phase: ps.Phase,
		Paused: ps.Has(planner.CondPaused)}
	if !ps.Has(planner.CondReady) {
		reason, msg := notReady(ps)
		cs.Conditions = append(cs.Conditions, status.Condition{Type: status.ConditionReady, Status: status.ConditionFalse, Reason: reason, Message: msg})
	}
	for _, c := range ps.Conditions {
		cs.Conditions = append(cs.Conditions, status.Condition{Type: c.Type, Status: status.ConditionTrue, Reason: c.Type, Message: c.Message})
	}
	sort.Slice(cs.Conditions, func(i, j int) bool { return cs.Conditions[i].Type < cs.Conditions[j].Type })
	cs.ControlPlane = replicas(ps.ControlPlane)
	for _, d := range ps.Deployments {
		cs.Deployments = append(cs.Deployments, status.DeploymentStatus{Name: d.Name, Replicas: replicas(d)})
	}
	if r := ps.Rollout; r != nil {
		cs.Rollout = &status.Rollout{ClassRevision: r.Revision, Wave: r.Wave, AdmittedAt: r.AdmittedAt,
			State: r.State, Reason: r.Reason, PendingRevision: r.PendingRevision}
	}
	return cs
}

// machineStatuses are the status file's entries of a cluster's machines,
// by name: machineList keeps them in that order (find searches it).
func machineStatuses(ms machineList) []status.MachineStatus {
	if len(ms) == 0 {
		return nil
	}
	out := make([]status.MachineStatus, 0, len(ms))
	for _, m := range ms {
		out = append(out, machineStatus(m.rec))
	}
	return out
}

// notReadyOrder ranks the planner's conditions by how much they explain a
// cluster that is not Ready: what stops all work first, then what holds
// it, then work in progress.
var notReadyOrder = []string{planner.CondDeleting, planner.CondPaused, planner.CondBlocked, planner.CondRolloutHalted,
	planner.CondRemediationBlocked, planner.CondBackingOff, planner.CondWaitingForWave, planner.CondRollingOut, planner.CondRemediating}

// notReady is the Ready condition's reason and message for a cluster that
// is not Ready, as Cluster API's summary does: the weightiest condition
// the planner set, else the pools that miss ready machines.
func notReady(ps planner.ClusterStatus) (reason, message string) {
	for _, t := range notReadyOrder {
		for _, c := range ps.Conditions {
			if c.Type == t {
				return t, c.Message
			}
		}
	}
	var short []string
	for _, p := range append([]planner.PoolStatus{ps.ControlPlane}, ps.Deployments...) {
		if p.Ready < p.Replicas {
			name := p.Name
			if name == planner.ControlPlanePool || name == "" {
				name = "control plane"
			}
			short = append(short, fmt.Sprintf("%s: %d of %d ready", name, p.Ready, p.Replicas))
		}
	}
	if len(short) == 0 {
		return "WaitingForMachines", "machines are being created or replaced"
	}
	return "WaitingForMachines", strings.Join(short, "; ")
}

func replicas(p planner.PoolStatus) status.Replicas {
	r := status.Replicas{Version: p.Version, Desired: p.Replicas, Replicas: p.Machines, Ready: p.Ready,
		Updated: p.UpToDate, Unavailable: max(p.Replicas-p.Ready, 0)}
	if p.Failures > 0 {
		r.Backoff = &status.Backoff{Failures: p.Failures, LastFailure: p.LastFailure, NextRetry: p.NextRetry}
	}
	if a := p.Autoscale; a != nil {
		r.Autoscale = &status.Autoscale{Min: a.Min, Max: a.Max, By: a.By, At: a.At}
	}
	return r
}

// machineStatus is one machine's entry in its cluster's status file.
func machineStatus(m *Record) status.MachineStatus {
	ms := status.MachineStatus{
		Name: m.Name, Role: string(m.Role), Deployment: m.Deployment, Phase: string(m.Phase),
		Version: m.Version, Provider: m.Provider, ProviderID: m.providerID(), Worker: m.Worker, Addresses: m.addresses(),
		TemplateHash: m.TemplateHash, Reason: m.Reason, Message: m.Message, Cause: m.Cause,
		SourceCommit: m.SourceCommit, Created: m.Created.Time().Truncate(1e9), Joined: m.Joined.Time().Truncate(1e9),
	}
	if h := m.Health; h != nil && !h.Healthy && m.Phase == wire.PhaseRunning {
		ms.Unhealthy = true
		ms.Conditions = []status.Condition{{Type: status.ConditionHealthy, Status: status.ConditionFalse,
			Reason: h.Reason, Message: h.Message, LastTransitionTime: h.Since}}
	}
	return ms
}

// writeFleet hands fleet.yaml's part the daemon owns to the status writer:
// the last applied and rejected revisions, the loop's problems as a
// Reconciling condition, and the orphans.
func (r *Reconciler) writeFleet() {
	if r.o.Status == nil {
		return
	}
	var f status.FleetStatus
	var o status.Origin
	if r.rev != nil {
		f.LastApplied = &status.SourceCommit{Commit: r.rev.Commit, Subject: r.rev.Subject()}
		o.SourceCommit = r.rev.Commit
	} else {
		f.LastApplied = r.appliedBefore // absent only while no daemon ever applied one
	}
	if rej := r.lastRejected; rej != nil {
		f.LastRejected = rej
		o.SourceCommit = rej.Commit
	}
	f.Conditions = r.fleetConditions()
	f.Orphans = r.orphanList()
	f.Rollouts = r.rollouts
	r.o.Status.SetFleet(f, o)
}

// fleetConditions are fleet.yaml's conditions: the loop's problems as
// Reconciling, unanswered tasks as TasksAnswered, a rebuild that waits as
// RecordsRebuilt. Each records the clusters or providers it is about, as
// the loop knew them when it set it (status.FleetCondition), so that
// describe need not find them in the message. Reconciling, one condition
// for every problem, records each problem's cluster: once it records one,
// describe no longer reads its message, so a store error about one
// cluster's machine would otherwise show only under the cluster of a
// bootstrap error raised meanwhile.
func (r *Reconciler) fleetConditions() []status.FleetCondition {
	var cs []status.FleetCondition
	if ps := r.health.Problems(); len(ps) > 0 {
		c := status.FleetCondition{Condition: status.Condition{Type: status.ConditionReconciling, Status: status.ConditionFalse,
			Reason: ps[0].Kind + "Failing", LastTransitionTime: ps[0].Since}}
		var msgs []string
		for _, p := range ps {
			msgs = append(msgs, fmt.Sprintf("%s: %s", strings.ToLower(p.Kind), p.Message))
			if p.Since.Before(c.LastTransitionTime) {
				c.LastTransitionTime = p.Since
			}
			if p.Cluster != "" {
				c.Clusters = append(c.Clusters, p.Cluster)
			}
		}
		c.Message = strings.Join(msgs, "; ")
		slices.Sort(c.Clusters)
		c.Clusters = slices.Compact(c.Clusters)
		cs = append(cs, c)
	}
	if c := r.unansweredCondition(); c != nil {
		cs = append(cs, *c)
	}
	if rb := r.inv.rebuild; rb != nil && rb.waiting != "" {
		cs = append(cs, status.FleetCondition{Condition: status.Condition{Type: status.ConditionRecordsRebuilt, Status: status.ConditionFalse,
			Reason: "WaitingForInventory", LastTransitionTime: rb.start.UTC().Truncate(1e9),
			Message: "the machines store was empty: no plan until the inventory of " + rb.waiting + " is in"},
			Providers: rb.providers})
	}
	return cs
}

// rejection is fleet.yaml's lastRejected for a refused revision.
func rejection(rev *sources.Revision) *status.Rejection {
	rej := &status.Rejection{SourceCommit: status.SourceCommit{Commit: rev.Commit, Subject: rev.Subject()}}
	for _, e := range rev.Errors {
		rej.Errors = append(rej.Errors, e.Error())
	}
	if len(rej.Errors) == 0 && rev.Err != nil {
		rej.Errors = []string{rev.Err.Error()}
	}
	return rej
}

// carryApplied keeps the commit fleet.yaml shows applied until this leader
// applies a revision: its machines run that commit meanwhile. Before, a
// fleet.yaml written first (a condition, orphans, while the source was
// slow or unreachable) dropped lastApplied, and `gitfleet plan` then
// compared a change with an empty fleet, and the next start had no last
// good revision to fall back on.
//
// That commit counts as applied already: when the source hands it over
// first, gitfleet_revisions_applied_total does not count it once more.
// Before, every new leader (a restart, a failover, a lease regained) counted
// the revision in force again.
func (r *Reconciler) carryApplied() {
	r.appliedBefore = r.o.Status.Fleet().LastApplied
}

// carryRejection starts from the refusal fleet.yaml shows on the branch,
// and the commit it shows applied: a new leader on a refused head applies
// that commit again first (sources.WatchOptions.LastGood), and a refusal
// dropped until the head is refused once more was committed without it,
// so fleet.yaml, describe and the dashboard showed it gone and back.
//
// The refused commit counts as reported too: when the source hands it over
// again it is no new refusal, and gitfleet_revisions_rejected_total does
// not count it once more. Before, every new leader (a restart, a failover,
// a lease regained) counted it again, and increase() over the restart
// showed a refusal nobody made.
func (r *Reconciler) carryRejection() {
	f := r.o.Status.Fleet()
	if f.LastRejected == nil {
		return
	}
	r.lastRejected = f.LastRejected
	r.rejected = f.LastRejected.Commit
	r.log.Info().Str(logCommit, short(r.rejected)).Int("errors", len(f.LastRejected.Errors)).
		Msg("fleet.yaml shows this commit refused; it stays refused, and is not counted again, until another is applied")
	if f.LastApplied != nil {
		r.rejectedOver = f.LastApplied.Commit
	}
}

// statusRollouts are the class rollouts as fleet.yaml shows them.
func statusRollouts(classes []planner.ClassRollout) []status.ClassRollout {
	out := make([]status.ClassRollout, 0, len(classes))
	for _, c := range classes {
		sc := status.ClassRollout{Class: c.Class, Revision: c.Revision, Started: c.Started, MaxFailures: c.MaxFailures,
			CurrentWave: c.CurrentWave, Halted: c.Halted, Reason: c.Reason, Failed: c.Failed}
		if c.Change.Commit != "" {
			sc.Change = &status.SourceCommit{Commit: c.Change.Commit, Subject: c.Change.Subject, Author: c.Change.Author}
		}
		for _, w := range c.Waves {
			sc.Waves = append(sc.Waves, status.WaveRollout{Name: w.Name, MaxConcurrent: w.MaxConcurrent, Clusters: len(w.Clusters),
				Done: w.Done, Updating: len(w.Updating), Waiting: len(w.Waiting), Paused: len(w.Paused)})
		}
		out = append(out, sc)
	}
	return out
}
