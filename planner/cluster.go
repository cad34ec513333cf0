package planner

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/schemas/patch"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// ClusterInput is what PlanCluster needs for one cluster: its desired state
// (nil when the cluster was removed from the fleet), its machines, its
// record, and the gate its class rollout puts on it.
type ClusterInput struct {
	Name     string
	Desired  *DesiredCluster
	Machines []ObservedMachine // this cluster's machines only
	// Record is the cluster's record from earlier plans (nil: none).
	Record  *ClusterRecord
	Gate    Gate
	Now     time.Time
	NewName func(cluster, pool string) string
	Backoff Backoff
	// Scale holds the replicas asked for the cluster's autoscaled pools
	// (by pool name), kept by the daemon; a pool with none runs its
	// minimum, and every count is held within the pool's bounds.
	Scale map[string]ScaleRequest
	// Locate places the problems a Blocked condition names at their
	// fields' lines and columns (nil: at their documents' first lines).
	Locate Locator
	// Removed are the cluster's machines the daemon removed for their
	// health or absence in earlier plans (a Step's Removal), oldest first,
	// that no create has replaced yet (a Step's Replaces). A create that
	// makes up for one names it in its reason, so that the replacement
	// does not read as a spec change's work.
	Removed []Removed
}

// Removed is a machine removed for its health or absence: its name, its
// pool and why (a Step's Removal).
type Removed struct {
	Name       string `json:"name"`
	Deployment string `json:"deployment,omitempty"`
	Why        string `json:"why"`
}

// ReplacesPrefix begins the reason of a create that replaces a machine
// removed for its health or absence: "replaces c1-md-0-x7k2p (gone:
// NodeExited)". Such a create is the daemon's own doing, not the spec
// commit's in force.
const ReplacesPrefix = "replaces "

// ScaleRequest is the size last asked for an autoscaled pool, by whom and
// when.
type ScaleRequest struct {
	Replicas int
	By       string
	At       time.Time
}

// ClusterResult is one cluster's steps and status, and its record after
// this plan.
type ClusterResult struct {
	Steps  []Step
	Status ClusterStatus
	// Record is the cluster's record now; RecordChanged says it differs
	// from the input's and must be persisted before any step is carried
	// out. A record with no admission and no backoff may be deleted.
	Record        ClusterRecord
	RecordChanged bool
	// Wake is when time alone will change this cluster's plan (a pool's
	// backoff ends); zero when nothing is waiting.
	Wake time.Time
	// Settled names the input's Removed machines whose pools lack no
	// machine now (made smaller before they were replaced) or are no
	// longer in the cluster: nothing will replace them, and the caller
	// forgets them, so that a later scale-up, or a pool of that name
	// added back, is not named a replacement.
	Settled []string
}

// mstate is one live machine (not Deleted) as this pass sees it.
type mstate struct {
	m         *ObservedMachine
	ready     bool
	available bool   // ready, for its pool's minReadySeconds
	unhealthy string // why it must be remediated; "" if healthy
	hc        int    // deciding health check, -1 for none
	stopped   bool   // unhealthy, but its health check's remediation stopped
	upToDate  bool   // runs the pool's template at the step version
	deleting  bool   // Deleting already, or deleted by this pass
}

// clusterPass carries one cluster's planning.
type clusterPass struct {
	in      *ClusterInput
	desired *DesiredCluster // as written in Git
	dc      *DesiredCluster // what the cluster moves to: desired with its admitted templates
	res     ClusterResult
	pools   map[string][]*mstate // by Deployment ("" = control plane)
	backoff []PoolBackoff
	taken   map[string]bool // machine names in use; made by the first create
	removed []Removed       // removed for their health, not replaced yet: the input's, then this pass's
	// haltHeld are the pools, as "md (1 of 2 machines)", whose missing
	// machines are not made while the rollout that holds the cluster
	// waits for its wave or is halted (heldByGate).
	haltHeld []string
}

// PlanCluster plans one cluster. Plan calls it for every cluster; the daemon
// calls it alone when an event about one of the cluster's machines arrives.
func PlanCluster(in ClusterInput) ClusterResult {
	if in.NewName == nil {
		n := 0
		in.NewName = func(cluster, pool string) string { n++; return fmt.Sprintf("%s-%s-%d", cluster, pool, n) }
	}
	desired := Scaled(in.Desired, in.Scale)
	p := &clusterPass{in: &in, desired: desired, dc: desired, pools: map[string][]*mstate{},
		removed: slices.Clone(in.Removed)}
	p.res.Status.Name = in.Name
	for i := range in.Machines {
		m := &in.Machines[i]
		if m.Phase == wire.PhaseDeleted {
			continue
		}
		s := &mstate{m: m, deleting: m.Phase == wire.PhaseDeleting, hc: -1}
		p.pools[m.Deployment] = append(p.pools[m.Deployment], s)
	}
	for _, ms := range p.pools {
		sort.Slice(ms, func(i, j int) bool { return older(ms[i].m, ms[j].m) })
	}
	prev := ClusterRecord{Cluster: in.Name}
	if in.Record != nil {
		prev = *in.Record
	}
	rec := ClusterRecord{Cluster: in.Name}
	p.backoff = updateBackoff(prev.Backoff, in.Desired, in.Name, in.Machines, in.Now, in.Backoff)
	if p.dc == nil {
		p.planRemoval()
	} else {
		adm := advance(upgraded(prev.Admission, p.desired), p.desired, in.Machines, in.Now)
		if g := in.Gate; g.Admit {
			// Admitting may change no machine: then it is done at once.
			adm = advance(newAdmission(p.desired, g.Revision, g.AdmitState, in.Now), p.desired, in.Machines, in.Now)
		}
		rec.Admission = adm
		p.dc = admitted(p.desired, adm)
		if at := watchedAll(p.dc, adm, in.Machines, in.Now); !at.IsZero() {
			p.wakeAt(at) // it may be done then
		}
		p.plan()
		p.res.Status.Rollout = rolloutStatus(adm, &in.Gate, p.desired.WaveName)
	}
	if p.desired != nil || len(p.pools) > 0 {
		rec.Backoff = p.backoff // a removed cluster's goes with its last machine
	}
	p.res.Record = rec
	p.res.RecordChanged = !rec.Equal(prev)
	for _, b := range rec.Backoff {
		if b.NextRetry.After(in.Now) && (p.res.Wake.IsZero() || b.NextRetry.Before(p.res.Wake)) {
			p.res.Wake = b.NextRetry
		}
	}
	return p.res
}

func older(a, b *ObservedMachine) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	return a.Name < b.Name
}

func (p *clusterPass) cond(t, format string, args ...any) {
	p.res.Status.Conditions = append(p.res.Status.Conditions, Condition{Type: t, Message: fmt.Sprintf(format, args...)})
}

func (p *clusterPass) del(s *mstate, reason string) {
	s.deleting = true
	p.res.Steps = append(p.res.Steps, Step{Op: wire.OpDelete, Machine: s.m.Machine(), Reason: reason})
}

// remove deletes an unhealthy machine (remediation, or a machine gone) and
// keeps it for the create that makes up for it (replace).
func (p *clusterPass) remove(s *mstate, reason string) {
	why := "remediated: " + s.unhealthy
	if s.m.Gone() {
		why = "gone: " + s.m.Reason
	}
	p.del(s, reason)
	p.res.Steps[len(p.res.Steps)-1].Removal = why
	p.removed = append(p.removed, Removed{Name: s.m.Name, Deployment: s.m.Deployment, Why: why})
}

// settle forgets the removed machines of pool, which lacks no machine
// (or is no longer in the cluster): nothing replaces them
// (ClusterResult.Settled).
func (p *clusterPass) settle(pool string) {
	p.removed = slices.DeleteFunc(p.removed, func(r Removed) bool {
		if r.Deployment != pool {
			return false
		}
		if slices.ContainsFunc(p.in.Removed, func(in Removed) bool { return in.Name == r.Name }) {
			p.res.Settled = append(p.res.Settled, r.Name)
		}
		return true
	})
}

// create asks for a machine of pool, unless the pool backs off after
// failed creates.
func (p *clusterPass) create(pool *Pool, ver, hash, reason string) {
	p.createFor(pool, ver, hash, reason, "")
}

// replace asks for a machine of pool that makes up for a missing one: the
// oldest machine of the pool removed for its health and not replaced yet
// is named (its reason says what it replaces and why), else the create's
// reason is the pool's count, as create's.
func (p *clusterPass) replace(pool *Pool, ver, hash, reason string) {
	i := slices.IndexFunc(p.removed, func(r Removed) bool { return r.Deployment == pool.Name })
	if i < 0 {
		p.create(pool, ver, hash, reason)
		return
	}
	r := p.removed[i]
	p.removed = slices.Delete(p.removed, i, i+1)
	p.createFor(pool, ver, hash, fmt.Sprintf("%s%s (%s)", ReplacesPrefix, r.Name, r.Why), r.Name)
}

func (p *clusterPass) createFor(pool *Pool, ver, hash, reason, replaces string) {
	if waiting(p.backoff, PoolName(pool.Name), p.in.Now) != nil || p.heldByGate(pool, hash) {
		return
	}
	name, ok := p.newName(pool)
	if !ok {
		p.cond(CondBackingOff, "pool %s: the %d names drawn for a new machine are all taken by the cluster's machines (a machineNaming template that keeps too little of {{ .random }}?); drawing again in %s",
			PoolName(pool.Name), nameDraws, nameRetry)
		p.wakeAt(p.in.Now.Add(nameRetry))
		return
	}
	p.res.Steps = append(p.res.Steps, Step{Op: wire.OpCreate, Reason: reason, Replaces: replaces, Machine: wire.Machine{
		Name: name, Cluster: p.in.Name, Role: pool.Role, Deployment: pool.Name, Version: ver,
		Provider: pool.Provider, Spec: pool.Spec, FailureDomain: pool.FailureDomain, TemplateHash: hash,
		Labels: pool.Labels, Annotations: pool.Annotations, // shared by the pool's machines: read only
	}})
}

// heldByGate says whether a machine of pool made from hash now would be
// made from a revision its wave has not admitted the cluster to, of which
// the cluster holds no admission: the cluster was never admitted
// (Gate.Hold: its records lost, say) and its class's rollout waits for
// the cluster's wave or halted. Such a pool makes no machine, as a new
// cluster makes none on a halt, unless its machines all run hash: that is
// the template the pool runs, not one the gate keeps from it. The pool is
// noted for the cluster's WaitingForWave or RolloutHalted condition.
func (p *clusterPass) heldByGate(pool *Pool, hash string) bool {
	if !p.in.Gate.Hold {
		return false
	}
	live, runs := 0, true
	for _, s := range p.pools[pool.Name] {
		if !s.deleting {
			live++
			runs = runs && s.m.TemplateHash == hash
		}
	}
	if live > 0 && runs {
		return false
	}
	note := fmt.Sprintf("%s (%d of %d machines)", PoolName(pool.Name), live, pool.Replicas)
	if !slices.Contains(p.haltHeld, note) {
		p.haltHeld = append(p.haltHeld, note)
	}
	return true
}

// nameDraws is how many names create draws for one machine before it gives
// up until nameRetry has passed: random names are 5 of 27 characters, so
// only a naming template that keeps a part of them runs out.
const (
	nameDraws = 16
	nameRetry = 10 * time.Second
)

// newName names a new machine of pool: NewName's random name, through the
// pool's naming template, drawn again while a machine of the cluster (one
// being deleted included) or a create of this pass has it. A name taken
// would make the create a no-op for the daemon, which has a record by that
// name, and the pool would never reach its size.
func (p *clusterPass) newName(pool *Pool) (string, bool) {
	if p.taken == nil {
		p.taken = make(map[string]bool, len(p.in.Machines)+1)
		for i := range p.in.Machines {
			p.taken[p.in.Machines[i].Name] = true
		}
	}
	for range nameDraws {
		name := p.in.NewName(p.in.Name, PoolName(pool.Name))
		if pool.Naming != "" {
			// The random part is what follows NewName's last '-'.
			random := name[strings.LastIndex(name, "-")+1:]
			if n, err := patch.MachineName(pool.Naming, p.in.Name, pool.Name, random); err == nil {
				name = n
			}
		}
		if !p.taken[name] {
			p.taken[name] = true
			return name, true
		}
	}
	return "", false
}

// planRemoval deletes a removed cluster: workers first, then, once no
// worker is left, the control plane.
func (p *clusterPass) planRemoval() {
	st := &p.res.Status
	st.Phase = PhaseDeleting
	workersLeft := false
	for dep, ms := range p.pools {
		if dep != "" && len(ms) > 0 {
			workersLeft = true
		}
	}
	total := 0
	for _, dep := range sortedKeys(p.pools) {
		if dep == "" && workersLeft {
			continue
		}
		for _, s := range p.pools[dep] {
			total++
			if s.deleting {
				continue
			}
			if dep == "" {
				p.del(s, "cluster removed from the fleet; workers are gone, deleting the control plane")
			} else {
				p.del(s, "cluster removed from the fleet; workers go first")
			}
		}
	}
	if total == 0 {
		st.Phase = PhaseDeleted
		return
	}
	if workersLeft {
		p.cond(CondDeleting, "deleting %s: workers first, the control plane after them", plural(total, "machine"))
	} else {
		p.cond(CondDeleting, "deleting %d control-plane machines", total)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// minVersion is the lowest version among live, non-deleting machines of ms.
func minVersion(ms []*mstate) string {
	low := ""
	for _, s := range ms {
		if s.deleting {
			continue
		}
		if low == "" || compareVersions(s.m.Version, low) < 0 {
			low = s.m.Version
		}
	}
	return low
}

func (p *clusterPass) plan() {
	dc, st := p.dc, &p.res.Status
	st.Class, st.Version, st.Wave = dc.Class, dc.Version, dc.WaveName
	p.assess()
	cpMs := p.pools[""]
	cpVer := minVersion(cpMs)
	cpStep, workersWant, verErr := p.versions(cpVer)
	if refused := versionRefused(p.desired, p.in.Machines); refused != nil {
		verErr = refused
	}

	p.markUpToDate(cpStep, workersWant)
	switch {
	case len(dc.Problems) > 0:
		st.Phase = PhaseBlocked
		p.cond(CondBlocked, "%s", joinProblems(dc.Problems, p.in.Locate))
		return
	case verErr != nil:
		st.Phase = PhaseBlocked
		p.cond(CondBlocked, "%s", verErr.Place(p.in.Locate).Error())
		return
	case dc.Paused:
		st.Phase = PhasePaused
		p.cond(CondPaused, "spec.paused is true in %s: no machine is created or deleted", dc.Source)
		return
	case p.in.Gate.Halted:
		st.Phase = PhaseBlocked
		p.cond(CondRolloutHalted, "%s", p.in.Gate.Reason)
		return
	case p.in.Gate.OnHalt && p.in.Gate.Hold && len(p.pools) == 0:
		// A new cluster would be made from the revision whose rollout
		// halted: it waits, with no machine, until that is released.
		st.Phase = PhaseWaiting
		p.cond(CondRolloutHalted, "new cluster, no machine made: %s", p.in.Gate.Reason)
		return
	}
	// Like Cluster API, worker pools do not start replacing machines while
	// the control plane moves to another version: a worker replaced now
	// would be replaced again at the new version.
	cpUpgrading := false
	for _, s := range cpMs {
		if !s.deleting && s.m.Version != cpStep {
			cpUpgrading = true
		}
	}
	p.remediate()
	p.planOrphans()
	p.planControlPlane(cpStep)
	initialized := false
	for _, s := range cpMs {
		if s.m.Phase == wire.PhaseRunning {
			initialized = true
		}
	}
	for i := range dc.Deployments {
		pool := &dc.Deployments[i]
		if !initialized {
			continue
		}
		ver := workersWant[i]
		p.planDeployment(pool, ver, pool.hashAt(ver), cpUpgrading)
	}
	p.setPhase(initialized, cpStep, workersWant)
	p.backoffStatus()
}

// backoffStatus reports the pools whose creates back off after failures.
func (p *clusterPass) backoffStatus() {
	st := &p.res.Status
	for _, b := range p.backoff {
		ps := st.pool(b.Pool)
		if ps == nil {
			continue
		}
		ps.Failures, ps.LastFailure, ps.NextRetry = b.Failures, b.Reason, b.NextRetry
		if p.in.Now.Before(b.NextRetry) {
			p.cond(CondBackingOff, "%s", b.String())
		}
	}
}

// setPhase sums the cluster up after its steps are planned.
func (p *clusterPass) setPhase(initialized bool, cpStep string, want []string) {
	st, dc := &p.res.Status, p.dc
	outdated, ready := 0, true
	pools := append([]PoolStatus{st.ControlPlane}, st.Deployments...)
	for _, ps := range pools {
		outdated += ps.Machines - ps.UpToDate
		ready = ready && ps.Machines == ps.Replicas && ps.Ready == ps.Replicas
	}
	upgrading := cpStep != dc.Version
	for i := range dc.Deployments {
		upgrading = upgrading || want[i] != dc.Deployments[i].Version
	}
	switch {
	case !initialized:
		st.Phase = PhaseProvisioning
	case (outdated > 0 || upgrading) && p.in.Gate.Hold && p.in.Gate.OnHalt:
		// Never admitted, on a halted rollout: nothing replaces its
		// outdated machines, and only a person releases the halt.
		st.Phase = PhaseWaiting
		p.cond(p.waitCondition(), "%s", p.waitMessage())
	case outdated > 0 || upgrading:
		st.Phase = PhaseRollingOut
		p.cond(CondRollingOut, "%s to replace; control plane moving to %s, target %s", plural(outdated, "machine"), cpStep, dc.Version)
		if p.in.Gate.Waiting {
			p.cond(p.waitCondition(), "%s", p.waitMessage())
		}
	case p.in.Gate.Waiting:
		// Its machines run what it was admitted to; a newer revision
		// waits for its wave, which comes by itself, or on a halt,
		// which only a person releases: then nothing moves.
		st.Phase = PhaseRollingOut
		if p.in.Gate.OnHalt {
			st.Phase = PhaseWaiting
		}
		if ready {
			p.cond(CondReady, "every pool has its replicas ready")
		}
		p.cond(p.waitCondition(), "%s", p.waitMessage())
	default:
		// Like Cluster API: once the control plane runs, the cluster is
		// Provisioned; Ready says whether every machine is there and ready.
		st.Phase = PhaseProvisioned
		if ready {
			p.cond(CondReady, "every pool has its replicas ready")
		}
	}
}

// waitMessage is the message of the cluster's wait condition: the gate's
// reason, after the pools whose missing machines the gate keeps from
// being made (heldByGate).
func (p *clusterPass) waitMessage() string {
	switch {
	case len(p.haltHeld) == 0:
		return p.in.Gate.Reason
	case p.in.Gate.OnHalt:
		return fmt.Sprintf("no record of the templates it runs, so no machine is made from the halted revision for %s: %s",
			strings.Join(p.haltHeld, ", "), p.in.Gate.Reason)
	}
	return fmt.Sprintf("no record of the templates it runs, so no machine is made from revision %s before its wave admits it for %s: %s",
		p.in.Gate.PendingRevision, strings.Join(p.haltHeld, ", "), p.in.Gate.Reason)
}

// waitCondition is the condition of a cluster a newer revision waits
// for: RolloutHalted when that revision's rollout halted, else
// WaitingForWave.
func (p *clusterPass) waitCondition() string {
	if p.in.Gate.OnHalt {
		return CondRolloutHalted
	}
	return CondWaitingForWave
}

// versions resolves the version the control plane moves to now and the
// version each worker pool runs now: one minor at a time, control plane
// first, workers never newer than the control plane's oldest machine. The
// control plane only starts its next minor when every worker caught up.
func (p *clusterPass) versions(cpVer string) (string, []string, *Problem) {
	dc := p.dc
	want := make([]string, len(dc.Deployments))
	if cpVer == "" {
		for i := range dc.Deployments {
			want[i] = lowerVersion(dc.Deployments[i].Version, dc.Version)
		}
		return dc.Version, want, nil
	}
	chain, verr := upgradeChain(cpVer, dc.Version, dc.KubernetesVersions)
	if verr != nil {
		src, field := dc.VersionSource, dc.VersionField
		prob := Problem{Source: src, Field: field, Message: verr.message}
		if verr.field != "" {
			prob.Message = fmt.Sprintf("%s (class %s)", verr.message, dc.Class)
		}
		return cpVer, want, &prob
	}
	caughtUp := true
	for i := range dc.Deployments {
		pool := &dc.Deployments[i]
		want[i] = lowerVersion(pool.Version, cpVer)
		for _, s := range p.pools[pool.Name] {
			if !s.deleting && compareVersions(s.m.Version, want[i]) < 0 {
				caughtUp = false
			}
		}
	}
	step := cpVer
	if len(chain) > 0 && caughtUp && !p.in.Gate.Hold {
		step = chain[0]
	}
	return step, want, nil
}

func lowerVersion(a, b string) string {
	if compareVersions(a, b) <= 0 {
		return a
	}
	return b
}

func joinProblems(ps []Problem, loc Locator) string {
	var b strings.Builder
	for i, pr := range ps {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(pr.Place(loc).Error())
	}
	return b.String()
}

// assess marks every live machine ready or unhealthy, and available once
// it has been Running its pool's minReadySeconds.
func (p *clusterPass) assess() {
	for dep, ms := range p.pools {
		_, pool := p.dc.pool(dep)
		for _, s := range ms {
			s.unhealthy, s.hc = unhealthy(s.m, p.dc, p.in.Now)
			s.ready = s.unhealthy == "" && s.m.Ready()
			s.available = s.ready
			if s.ready && pool != nil && pool.MinReady > 0 && !s.m.Running.IsZero() {
				if at := s.m.Running.Add(pool.MinReady); p.in.Now.Before(at) {
					s.available = false
					p.wakeAt(at)
				}
			}
		}
	}
}

// wakeAt asks to be planned again at t, when time alone changes the plan.
func (p *clusterPass) wakeAt(t time.Time) {
	if p.res.Wake.IsZero() || t.Before(p.res.Wake) {
		p.res.Wake = t
	}
}

// Scaled returns dc with each autoscaled pool at the size asked for it,
// within its bounds (a bound changed in Git applies at once); dc itself
// when it has no autoscaled pool. Expansions are shared and never changed:
// a copy is.
func Scaled(dc *DesiredCluster, scale map[string]ScaleRequest) *DesiredCluster {
	if dc == nil || !slices.ContainsFunc(dc.Deployments, func(p Pool) bool { return p.Autoscale != nil }) {
		return dc
	}
	out := *dc
	out.Deployments = slices.Clone(dc.Deployments)
	for i := range out.Deployments {
		p := &out.Deployments[i]
		if p.Autoscale == nil {
			continue
		}
		if r, ok := scale[p.Name]; ok {
			p.Replicas = min(max(r.Replicas, p.Autoscale.Min), p.Autoscale.Max)
		}
	}
	return &out
}
