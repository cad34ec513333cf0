package planner

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// sim is a small fleet simulator: it plans, applies every step, advances the
// clock one tick, lets machines progress (provisioning -> Running with a
// heartbeat, Deleting -> Deleted), and repeats until nothing is left to do.
type sim struct {
	t        testing.TB
	desired  *Desired
	machines map[string]*ObservedMachine
	now      time.Time
	tick     time.Duration
	names    int
	log      strings.Builder
	quiet    bool
	round    int
	minRound int        // keep ticking until this round even when nothing happens
	rng      *rand.Rand // nil: every machine is ready one tick after creation
	delay    map[string]int
	dead     map[string]bool // machines that stopped sending heartbeats
	sick     map[string]bool // machines whose heartbeats say not healthy
	scale    map[string]map[string]ScaleRequest
	fail     func(m *ObservedMachine) bool   // machines that fail to provision
	failSpec func(spec json.RawMessage) bool // creates that will fail, by their spec
	doomed   map[string]bool
	hooks    map[int]func(s *sim)                          // run before planning round n
	check    func(s *sim, before, after []ObservedMachine) // invariants after each round's steps
	last     Result
	// records are the planner's decisions, persisted between rounds as
	// the daemon does.
	records Records
	backoff Backoff
	shown   map[string]string // status lines last logged
	// recBefore are the records before this round's plan.
	recBefore Records
	// gates are the rollouts decided by RolloutsSince at the last round,
	// held to what Rollouts decides afresh at every round.
	gates *Gates
	sums  *Summaries // kept from round to round, as the daemon keeps them
	// applied are the steps carried out, in order.
	applied []Step
}

func (r Records) clone() Records {
	out := Records{Clusters: make(map[string]ClusterRecord, len(r.Clusters)), Rollouts: make(map[string]RolloutRecord, len(r.Rollouts))}
	for k, v := range r.Clusters {
		out.Clusters[k] = v
	}
	for k, v := range r.Rollouts {
		out.Rollouts[k] = v
	}
	return out
}

var simStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newSim(t testing.TB, f *v1alpha1.Fleet) *sim {
	s := &sim{t: t, machines: map[string]*ObservedMachine{}, now: simStart, tick: 10 * time.Second,
		delay: map[string]int{}, dead: map[string]bool{}, doomed: map[string]bool{}, hooks: map[int]func(*sim){}}
	s.setFleet(f)
	return s
}

func (s *sim) setFleet(f *v1alpha1.Fleet) {
	d, probs := Expand(f)
	if len(probs) > 0 {
		s.t.Fatalf("fleet has problems: %v", probs)
	}
	s.desired = d
}

func (s *sim) newName(cluster, pool string) string {
	s.names++
	return fmt.Sprintf("%s-%s-%d", cluster, pool, s.names)
}

func (s *sim) observed() []ObservedMachine {
	out := make([]ObservedMachine, 0, len(s.machines))
	for _, m := range s.machines {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cluster != out[j].Cluster {
			return out[i].Cluster < out[j].Cluster
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func (s *sim) logf(format string, args ...any) {
	if !s.quiet {
		fmt.Fprintf(&s.log, format, args...)
	}
}

// run plans and applies until converged (no step, nothing in flight, no
// backoff running) and fails the test after max rounds.
func (s *sim) run(max int) {
	s.t.Helper()
	for i := 0; i < max; i++ {
		if !s.step() {
			return
		}
	}
	s.t.Fatalf("not converged after %d rounds:\n%s", max, s.log.String())
}

// step runs one round: plan, apply the steps, check, advance the clock. It
// reports false (and applies nothing) when the fleet has converged.
func (s *sim) step() bool {
	s.t.Helper()
	s.round++
	if h := s.hooks[s.round]; h != nil {
		h(s)
	}
	before := s.observed()
	s.recBefore = s.records.clone()
	res := s.plan()
	inFlight := false
	for _, m := range s.machines {
		inFlight = inFlight || m.InFlight()
	}
	decided := len(res.Records.Clusters) + len(res.Records.Rollouts)
	if len(res.Steps) == 0 && !inFlight && res.Wake.IsZero() && decided == 0 && s.round > s.minRound {
		s.logf("converged after %d rounds\n", s.round-1)
		s.logStatus(res, true)
		if s.check != nil {
			s.check(s, before, before)
		}
		return false
	}
	s.logf("round %d (+%s)\n", s.round, s.now.Sub(simStart))
	for _, st := range res.Steps {
		s.apply(st)
	}
	s.logStatus(res, false)
	if s.check != nil {
		s.check(s, before, s.observed())
	}
	s.advance()
	return true
}

// plan plans the fleet as it is now and keeps the records it changed.
func (s *sim) plan() Result {
	s.checkRolloutsSince()
	res := Plan(Input{Desired: s.desired, Observed: s.observed(), Records: s.records, Now: s.now, NewName: s.newName, Backoff: s.backoff, Scale: s.scale})
	s.last = res
	s.keep(res.Records)
	return res
}

// checkRolloutsSince decides the rollouts as the daemon does, from the
// last round's decision, and fails the test when that differs in anything
// from deciding afresh, as Plan does.
func (s *sim) checkRolloutsSince() {
	s.t.Helper()
	by := groupByCluster(s.observed())
	sums := make(map[string]Summary, len(s.desired.Clusters))
	for _, dc := range s.desired.Clusters {
		sums[dc.Name] = Summarize(Scaled(dc, s.scale[dc.Name]), s.records.Cluster(dc.Name), by[dc.Name], s.now)
	}
	if s.sums == nil {
		s.sums = NewSummaries(len(sums))
	}
	for name, sum := range sums {
		s.sums.Set(name, sum)
	}
	for name := range s.sums.m {
		if _, ok := sums[name]; !ok {
			s.sums.Delete(name)
		}
	}
	fresh := Rollouts(s.desired, sums, s.records.Rollouts, s.now)
	since := RolloutsSince(s.gates, s.desired, s.sums, s.records.Rollouts, s.now)
	if diff := cmp.Diff(fresh.Classes(), since.Classes()); diff != "" {
		s.t.Fatalf("round %d: RolloutsSince's classes differ from Rollouts' (-fresh +since):\n%s", s.round, diff)
	}
	if diff := cmp.Diff(fresh.Records(), since.Records()); diff != "" {
		s.t.Fatalf("round %d: RolloutsSince's records differ from Rollouts' (-fresh +since):\n%s", s.round, diff)
	}
	if diff := cmp.Diff(fresh.Changed(), since.Changed()); diff != "" {
		s.t.Fatalf("round %d: RolloutsSince's changed records differ from Rollouts' (-fresh +since):\n%s", s.round, diff)
	}
	for _, dc := range s.desired.Clusters {
		if f, g := fresh.For(dc.Name), since.For(dc.Name); f != g {
			s.t.Fatalf("round %d: cluster %s: RolloutsSince's gate %+v, Rollouts' %+v", s.round, dc.Name, g, f)
		}
	}
	s.gates = since
}

// keep stores changed records; an empty cluster record is deleted.
func (s *sim) keep(changed Records) {
	if s.records.Clusters == nil {
		s.records = Records{Clusters: map[string]ClusterRecord{}, Rollouts: map[string]RolloutRecord{}}
	}
	for n, r := range changed.Clusters {
		if r.Admission == nil && len(r.Backoff) == 0 {
			delete(s.records.Clusters, n)
			continue
		}
		s.records.Clusters[n] = r
	}
	for n, r := range changed.Rollouts {
		s.records.Rollouts[n] = r
	}
}

func (s *sim) apply(st Step) {
	s.applied = append(s.applied, st)
	m := st.Machine
	switch st.Op {
	case wire.OpCreate:
		if _, dup := s.machines[m.Name]; dup {
			s.t.Fatalf("create of existing machine %s", m.Name)
		}
		s.machines[m.Name] = &ObservedMachine{Name: m.Name, Cluster: m.Cluster, Deployment: m.Deployment, Role: m.Role,
			Provider: m.Provider, Version: m.Version, TemplateHash: m.TemplateHash, Phase: wire.PhaseProvisioning,
			Created: s.now, Labels: m.Labels}
		if s.rng != nil {
			s.delay[m.Name] = s.rng.Intn(3)
		}
		if s.failSpec != nil && s.failSpec(m.Spec) {
			s.doomed[m.Name] = true
		}
		s.logf("  create %-22s %-8s %s  %s\n", m.Name, m.Version, m.TemplateHash, st.Reason)
	case wire.OpDelete:
		om := s.machines[m.Name]
		if om == nil {
			s.t.Fatalf("delete of unknown machine %s", m.Name)
		}
		if om.Phase == wire.PhaseDeleting {
			s.t.Fatalf("delete of machine %s already deleting", m.Name)
		}
		om.Phase = wire.PhaseDeleting
		if DeleteReason(st.Reason) == "" {
			// The daemon words the machine's entry in its cluster's
			// deleted list from it (docs/status.md).
			s.t.Errorf("delete of %s: DeleteReason has no word for %q", m.Name, st.Reason)
		}
		if got := RemovalOf(st.Reason, om.Reason); got != st.Removal {
			// A new leader rebuilds the removed machines from it.
			s.t.Errorf("delete of %s: RemovalOf(%q, %q) = %q, want its Removal %q", m.Name, st.Reason, om.Reason, got, st.Removal)
		}
		s.logf("  delete %-22s %-8s %s  %s\n", m.Name, om.Version, om.TemplateHash, st.Reason)
	}
}

// advance moves the clock one tick and lets every machine progress.
func (s *sim) advance() {
	s.now = s.now.Add(s.tick)
	for name, m := range s.machines {
		switch m.Phase {
		case wire.PhaseDeleting:
			delete(s.machines, name)
		case wire.PhaseProvisioning:
			if s.delay[name] > 0 {
				s.delay[name]--
				continue
			}
			if s.fail != nil && s.fail(m) || s.doomed[name] {
				m.Phase = wire.PhaseFailed
				m.Message = "provider says no"
				continue
			}
			m.Phase, m.Running = wire.PhaseRunning, s.now
			fallthrough
		case wire.PhaseRunning:
			switch {
			case s.sick[name]:
				if m.Healthy || m.UnhealthySince.IsZero() {
					m.UnhealthySince = s.now
				}
				m.LastHeartbeat, m.Healthy = s.now, false
			case !s.dead[name]:
				m.LastHeartbeat, m.Healthy, m.UnhealthySince = s.now, true, time.Time{}
			}
		}
	}
}

// logStatus logs each cluster's status and each class's rollout when it
// differs from the last round's (all of them when all is set).
func (s *sim) logStatus(res Result, all bool) {
	if s.shown == nil {
		s.shown = map[string]string{}
	}
	show := func(key, text string) {
		if all || s.shown[key] != text {
			s.logf("%s", text)
		}
		s.shown[key] = text
	}
	for _, c := range res.Clusters {
		var b strings.Builder
		fmt.Fprintf(&b, "  %s: %s cp %s", c.Name, c.Phase, poolCounts(c.ControlPlane))
		for _, d := range c.Deployments {
			fmt.Fprintf(&b, " %s %s", d.Name, poolCounts(d))
		}
		if r := c.Rollout; r != nil {
			fmt.Fprintf(&b, " rollout %s %s", r.Revision, r.State)
			if r.PendingRevision != "" {
				fmt.Fprintf(&b, " (%s waits)", r.PendingRevision)
			}
		}
		b.WriteString("\n")
		for _, cond := range c.Conditions {
			if cond.Type != CondReady && cond.Type != CondRollingOut {
				fmt.Fprintf(&b, "    %s: %s\n", cond.Type, cond.Message)
			}
		}
		show("cluster "+c.Name, b.String())
	}
	for _, cr := range res.Classes {
		if len(cr.Waves) > 1 && (cr.CurrentWave != "" || cr.Halted) {
			show("class "+cr.Class, fmt.Sprintf("  class %s: wave %q %s\n", cr.Class, cr.CurrentWave, cr.Reason))
		}
	}
}

func poolCounts(p PoolStatus) string {
	return fmt.Sprintf("[want %d have %d ready %d new %d %s]", p.Replicas, p.Machines, p.Ready, p.UpToDate, p.Version)
}

// --- fleet builders ---

func ptr[T any](v T) *T { return &v }

type clusterOpt func(*v1alpha1.Cluster)

func testClass(version string, extra ...string) *v1alpha1.ClusterClass {
	return &v1alpha1.ClusterClass{
		Metadata: v1alpha1.ObjectMeta{Name: "standard"},
		Source:   v1alpha1.Source{Path: "classes/standard.yaml", Line: 1},
		Spec: v1alpha1.ClusterClassSpec{
			Version:            version,
			KubernetesVersions: extra,
			ControlPlane: v1alpha1.ControlPlaneClass{MachineTemplate: v1alpha1.MachineTemplate{
				Provider: "inmemory", Spec: map[string]any{"cpus": 2}}},
			Workers: v1alpha1.WorkersClass{MachineDeployments: []v1alpha1.MachineDeploymentClass{{
				Class: "default", Template: v1alpha1.MachineTemplate{Provider: "inmemory", Spec: map[string]any{"cpus": 4}}}}},
		},
	}
}

func testCluster(name string, cp, workers int, opts ...clusterOpt) *v1alpha1.Cluster {
	c := &v1alpha1.Cluster{
		Metadata: v1alpha1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Source:   v1alpha1.Source{Path: "clusters/" + name + ".yaml", Line: 1},
		Spec: v1alpha1.ClusterSpec{Topology: v1alpha1.Topology{
			ClassRef:     v1alpha1.ClassRef{Name: "standard"},
			ControlPlane: v1alpha1.ControlPlaneTopology{Replicas: ptr(cp)},
			Workers: v1alpha1.WorkersTopology{MachineDeployments: []v1alpha1.MachineDeploymentTopology{{
				Class: "default", Name: "md", Replicas: ptr(workers)}}},
		}},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func rolling(surge, unavail int) clusterOpt {
	return func(c *v1alpha1.Cluster) {
		c.Spec.Topology.Workers.MachineDeployments[0].Rollout = &v1alpha1.MachineRollout{Strategy: &v1alpha1.MachineDeploymentStrategy{
			Type: v1alpha1.StrategyRollingUpdate, RollingUpdate: &v1alpha1.RollingUpdateStrategy{
				MaxSurge: v1alpha1.Int(surge), MaxUnavailable: v1alpha1.Int(unavail)}}}
	}
}

func labels(kv ...string) clusterOpt {
	return func(c *v1alpha1.Cluster) {
		for i := 0; i+1 < len(kv); i += 2 {
			c.Metadata.Labels[kv[i]] = kv[i+1]
		}
	}
}

func testFleet(class *v1alpha1.ClusterClass, clusters ...*v1alpha1.Cluster) *v1alpha1.Fleet {
	return &v1alpha1.Fleet{Classes: []*v1alpha1.ClusterClass{class}, Clusters: clusters}
}

// workerPatch is a class patch with one definition, for worker class
// class, of the given JSON patches.
func workerPatch(name, class string, ops ...v1alpha1.JSONPatch) v1alpha1.ClassPatch {
	return v1alpha1.ClassPatch{Name: name, Definitions: []v1alpha1.PatchDefinition{{
		Selector: v1alpha1.PatchSelector{MatchResources: v1alpha1.MatchResources{
			MachineDeploymentClass: &v1alpha1.MachineClassMatcher{Names: []string{class}}}},
		JSONPatches: ops,
	}}}
}

// fromVar adds the field at path from a variable.
func fromVar(path, variable string) v1alpha1.JSONPatch {
	return v1alpha1.JSONPatch{Op: v1alpha1.PatchAdd, Path: path, ValueFrom: &v1alpha1.ValueFrom{Variable: variable}}
}
