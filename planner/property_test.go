package planner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// The property test: generated fleets (several classes and waves, pinned
// pools, scale changes, template-only, variable, version and chained
// changes, provisioning failures, dead machines, a second change landing in
// the middle of the rollout) are rolled out in the simulator, which checks
// every rule of checkInvariants after every round.

// genFleet is a fleet as the generator sees it: a few knobs per class and
// cluster, built into API objects by fleet().
type genFleet struct {
	classes  []*genClass
	clusters []*genCluster
}

type genClass struct {
	name        string
	version     string
	cpCPUs      int
	workerCPUs  map[string]int // by worker class
	sizeDefault string
	bad         map[string]bool // pool classes ("control-plane", a worker class) whose machines always fail
	waves       []v1alpha1.RolloutWave
	maxFailures int
}

type genCluster struct {
	name, class, tier string
	cp                int
	pools             []genPool
	size              string // the cluster's own value of variable size; "" for the default
	paused            bool
	pinned            int  // replicas of a standalone pool pinned to v1.29.4; 0 for none
	mhc               bool // a health check replaces dead workers
}

type genPool struct {
	name, class string
	replicas    int
	strategy    *v1alpha1.MachineDeploymentStrategy
}

var genVersions = []string{"v1.29.4", "v1.30.3", "v1.31.1"}

func (g *genFleet) clone() *genFleet {
	out := &genFleet{}
	for _, c := range g.classes {
		cc := *c
		cc.workerCPUs = map[string]int{}
		for k, v := range c.workerCPUs {
			cc.workerCPUs[k] = v
		}
		cc.bad = map[string]bool{}
		for k, v := range c.bad {
			cc.bad[k] = v
		}
		out.classes = append(out.classes, &cc)
	}
	for _, c := range g.clusters {
		cc := *c
		cc.pools = slices.Clone(c.pools)
		out.clusters = append(out.clusters, &cc)
	}
	return out
}

func newGenFleet(rng *rand.Rand) *genFleet {
	g := &genFleet{}
	for i := range 1 + rng.Intn(2) {
		c := &genClass{name: fmt.Sprintf("class%d", i), version: genVersions[0], cpCPUs: 2,
			workerCPUs: map[string]int{"default": 4, "big": 8}, sizeDefault: "s", bad: map[string]bool{},
			maxFailures: 1 + rng.Intn(2)}
		tiers := []string{"canary", "stage", "prod"}
		for _, tier := range tiers[:rng.Intn(4)] {
			w := v1alpha1.RolloutWave{Name: tier, Selector: v1alpha1.LabelSelector{MatchLabels: map[string]string{"tier": tier}}}
			switch rng.Intn(3) {
			case 1:
				w.MaxConcurrent = v1alpha1.Int(1 + rng.Intn(2))
			case 2:
				w.MaxConcurrent = v1alpha1.Percent(25 + 25*rng.Intn(3))
			}
			c.waves = append(c.waves, w)
		}
		g.classes = append(g.classes, c)
	}
	for i := range 2 + rng.Intn(6) {
		c := &genCluster{name: fmt.Sprintf("c%d", i), class: g.classes[rng.Intn(len(g.classes))].name,
			tier: []string{"canary", "stage", "prod", "other"}[rng.Intn(4)], cp: []int{1, 1, 3}[rng.Intn(3)],
			paused: rng.Intn(12) == 0, mhc: rng.Intn(2) == 0}
		for j := range 1 + rng.Intn(2) {
			c.pools = append(c.pools, genPool{name: fmt.Sprintf("md%d", j), class: []string{"default", "big"}[j],
				replicas: rng.Intn(4), strategy: randomStrategy(rng)})
		}
		if rng.Intn(4) == 0 {
			c.pinned = 1 + rng.Intn(2)
		}
		g.clusters = append(g.clusters, c)
	}
	return g
}

// change makes one kind of change to g; it returns what it did.
func (g *genFleet) change(rng *rand.Rand, mayFail bool) string {
	class := g.classes[rng.Intn(len(g.classes))]
	switch k := rng.Intn(8); {
	case k == 0:
		class.workerCPUs["default"]++
		return class.name + ": worker template"
	case k == 1:
		class.cpCPUs++
		return class.name + ": control-plane template"
	case k == 2:
		class.sizeDefault += "m"
		return class.name + ": variable default"
	case k == 3:
		i := slices.Index(genVersions, class.version)
		class.version = genVersions[min(i+1, len(genVersions)-1)]
		return class.name + ": version " + class.version
	case k == 4:
		class.version = genVersions[len(genVersions)-1]
		class.workerCPUs["big"]++
		return class.name + ": chained version " + class.version + " and worker template"
	case k == 5:
		c := g.clusters[rng.Intn(len(g.clusters))]
		c.pools[0].replicas = rng.Intn(5)
		return c.name + ": scale"
	case k == 6:
		c := g.clusters[rng.Intn(len(g.clusters))]
		c.size = "xl"
		return c.name + ": its own variable"
	case mayFail:
		pool := []string{ControlPlanePool, "default", "big"}[rng.Intn(3)]
		class.bad[pool] = true
		class.workerCPUs["default"]++
		return class.name + ": bad template for " + pool
	}
	class.workerCPUs["big"]++
	return class.name + ": worker template"
}

func (g *genFleet) hasBad() bool {
	for _, c := range g.classes {
		if len(c.bad) > 0 {
			return true
		}
	}
	return false
}

// fleet builds the API objects.
func (g *genFleet) fleet() *v1alpha1.Fleet {
	f := &v1alpha1.Fleet{}
	for _, c := range g.classes {
		spec := func(pool string, cpus int) map[string]any {
			s := map[string]any{"cpus": cpus}
			if c.bad[pool] {
				s["bad"] = true
			}
			return s
		}
		cc := &v1alpha1.ClusterClass{
			Metadata: v1alpha1.ObjectMeta{Name: c.name},
			Source:   v1alpha1.Source{Path: "classes/" + c.name + ".yaml", Line: 1},
			Spec: v1alpha1.ClusterClassSpec{
				Version: c.version, KubernetesVersions: genVersions,
				ControlPlane: v1alpha1.ControlPlaneClass{MachineTemplate: v1alpha1.MachineTemplate{Provider: "inmemory", Spec: spec(ControlPlanePool, c.cpCPUs)}},
				Variables:    []v1alpha1.ClassVariable{{Name: "size", Default: c.sizeDefault}},
				Patches:      []v1alpha1.ClassPatch{workerPatch("size", "default", fromVar("/spec/size", "size"))},
				Rollout:      &v1alpha1.RolloutSpec{Waves: c.waves, MaxFailures: ptr(c.maxFailures)},
			},
		}
		for _, w := range []string{"default", "big"} {
			cc.Spec.Workers.MachineDeployments = append(cc.Spec.Workers.MachineDeployments, v1alpha1.MachineDeploymentClass{
				Class: w, Template: v1alpha1.MachineTemplate{Provider: "inmemory", Spec: spec(w, c.workerCPUs[w])}})
		}
		f.Classes = append(f.Classes, cc)
	}
	for _, c := range g.clusters {
		cl := &v1alpha1.Cluster{
			Metadata: v1alpha1.ObjectMeta{Name: c.name, Labels: map[string]string{"tier": c.tier}},
			Source:   v1alpha1.Source{Path: "clusters/" + c.name + ".yaml", Line: 1},
			Spec: v1alpha1.ClusterSpec{Paused: c.paused, Topology: v1alpha1.Topology{
				ClassRef: v1alpha1.ClassRef{Name: c.class}, ControlPlane: v1alpha1.ControlPlaneTopology{Replicas: ptr(c.cp)}}},
		}
		for _, p := range c.pools {
			cl.Spec.Topology.Workers.MachineDeployments = append(cl.Spec.Topology.Workers.MachineDeployments,
				v1alpha1.MachineDeploymentTopology{Class: p.class, Name: p.name, Replicas: ptr(p.replicas), PoolLifecycle: v1alpha1.PoolLifecycle{Rollout: &v1alpha1.MachineRollout{Strategy: p.strategy}}})
		}
		if c.size != "" {
			cl.Spec.Topology.Variables = []v1alpha1.ClusterVariable{{Name: "size", Value: c.size}}
		}
		f.Clusters = append(f.Clusters, cl)
		if c.pinned > 0 {
			f.MachineDeployments = append(f.MachineDeployments, &v1alpha1.MachineDeployment{
				Metadata: v1alpha1.ObjectMeta{Name: c.name + "-pinned"},
				Source:   v1alpha1.Source{Path: "clusters/" + c.name + "-pinned.yaml", Line: 1},
				Spec: v1alpha1.MachineDeploymentSpec{ClusterName: c.name, Replicas: ptr(c.pinned), Version: genVersions[0],
					Template: v1alpha1.MachineTemplate{Provider: "inmemory", Spec: map[string]any{"cpus": 1}}},
			})
		}
		if c.mhc {
			f.HealthChecks = append(f.HealthChecks, &v1alpha1.MachineHealthCheck{
				Metadata: v1alpha1.ObjectMeta{Name: c.name + "-workers"},
				Source:   v1alpha1.Source{Path: "clusters/" + c.name + "-health.yaml", Line: 1},
				Spec: v1alpha1.MachineHealthCheckSpec{ClusterName: c.name,
					Selector: v1alpha1.LabelSelector{MatchExpressions: []v1alpha1.LabelSelectorRequirement{{Key: v1alpha1.LabelDeployment, Operator: "Exists"}}},
					HealthRules: v1alpha1.HealthRules{
						Checks: v1alpha1.HealthChecks{NodeStartupTimeoutSeconds: ptr(300),
							UnhealthyNodeConditions: []v1alpha1.UnhealthyNodeCondition{{Type: "Ready", Status: "Unknown", TimeoutSeconds: 30}}}}},
			})
		}
	}
	return f
}

func randomStrategy(rng *rand.Rand) *v1alpha1.MachineDeploymentStrategy {
	if rng.Intn(6) == 0 {
		return &v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.StrategyOnDelete}
	}
	val := func() *v1alpha1.IntOrPercent {
		switch rng.Intn(3) {
		case 0:
			return nil
		case 1:
			return v1alpha1.Int(rng.Intn(3))
		}
		return v1alpha1.Percent(rng.Intn(101))
	}
	ru := &v1alpha1.RollingUpdateStrategy{MaxSurge: val(), MaxUnavailable: val()}
	if ru.MaxSurge != nil && ru.MaxUnavailable != nil && ru.MaxSurge.Value == 0 && ru.MaxUnavailable.Value == 0 {
		ru.MaxSurge = v1alpha1.Int(1) // the schema rejects 0/0
	}
	return &v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.StrategyRollingUpdate, RollingUpdate: ru}
}

// rolloutScenario runs one generated fleet through a change (and maybe a
// second one mid-rollout) and checks the rules after every round and the
// outcome at the end. It returns what happened, for failure messages.
func rolloutScenario(t testing.TB, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	g := newGenFleet(rng)
	s := newSim(t, g.fleet())
	s.rng = rand.New(rand.NewSource(seed))
	s.quiet = true
	s.run(400)

	s.quiet = false
	s.round = 0
	story := []string{}
	defer func() {
		if t.Failed() {
			t.Logf("seed %d: %v\n%s", seed, story, s.log.String())
		}
	}()
	head := g.clone()
	for range 1 + rng.Intn(3) {
		story = append(story, head.change(rng, rng.Intn(3) == 0))
	}
	failRate := []float64{0, 0, 0.1, 0.3}[rng.Intn(4)]
	killRate := []float64{0, 0, 0.05}[rng.Intn(3)]
	s.failSpec = func(spec json.RawMessage) bool {
		return bytes.Contains(spec, []byte(`"bad":true`)) || s.rng.Float64() < failRate
	}
	s.backoff.Jitter = func(string, string, int) float64 { return s.rng.Float64() }
	s.check = checkInvariants(t)
	s.logf("change: %v\n", story)
	s.setFleet(head.fleet())
	second := -1
	if rng.Intn(2) == 0 {
		second = 1 + rng.Intn(15)
	}
	final := head
	for round := 0; round < 40; round++ {
		if round == second {
			final = head.clone()
			if rng.Intn(3) == 0 {
				final = g.clone() // a revert
				story = append(story, "revert")
			}
			for _, c := range final.classes {
				c.bad = map[string]bool{}
			}
			story = append(story, "then "+final.change(rng, false))
			s.logf("second change: %v\n", story)
			s.setFleet(final.fleet())
		}
		if killRate > 0 && s.rng.Float64() < killRate {
			s.killOne()
		}
		if !s.step() {
			break
		}
	}
	// Faults stop; unless a bad template is still wanted, the fleet must
	// settle: every rollout done or halted.
	s.failSpec = func(spec json.RawMessage) bool { return bytes.Contains(spec, []byte(`"bad":true`)) }
	if final.hasBad() {
		for range 60 {
			s.step()
		}
		return
	}
	machines := len(s.machines)
	s.run(80 + 30*machines)
	checkSettled(t, s, story)
}

// checkSettled: in every class whose rollout did not halt, each cluster
// that takes part is admitted to the class's revision and done, unless an
// OnDelete pool keeps outdated machines (which holds the waves after it).
func checkSettled(t testing.TB, s *sim, story []string) {
	t.Helper()
	by := groupByCluster(s.observed())
	for _, class := range s.desired.Classes {
		rr := s.records.Rollouts[class.Name]
		if len(rr.Failed) >= class.MaxFailures {
			continue
		}
		held := false
		for wi := range class.Waves {
			var wave []*DesiredCluster
			for _, dc := range s.desired.Clusters {
				if dc.Class == class.Name && dc.Wave == wi && !dc.Paused && versionRefused(dc, by[dc.Name]) == nil {
					wave = append(wave, dc)
				}
			}
			// An OnDelete pool with outdated machines keeps its cluster
			// moving: it holds a slot of its wave and every later wave.
			for _, dc := range wave {
				a := s.records.Clusters[dc.Name].Admission
				if a != nil && a.Revision == class.Revision && a.State == AdmissionProgressing && hasOnDelete(dc) {
					held = true
				}
			}
			for _, dc := range wave {
				a := s.records.Clusters[dc.Name].Admission
				switch {
				case a != nil && a.Revision == class.Revision && (a.State == AdmissionDone || a.State == AdmissionFailed && rr.failed(dc.Name)):
				case a != nil && a.Revision == class.Revision && hasOnDelete(dc):
				case held:
				default:
					t.Errorf("%v: %s has not finished %s of %s after the rollout settled: %+v", story, dc.Name, class.Revision, class.Name, a)
				}
			}
		}
	}
}

func hasOnDelete(dc *DesiredCluster) bool {
	for _, p := range dc.Deployments {
		if p.Strategy.Type == v1alpha1.StrategyOnDelete && p.Replicas > 0 {
			return true
		}
	}
	return false
}

// killOne stops the heartbeats of a random running machine.
func (s *sim) killOne() {
	var running []string
	for _, m := range s.observed() {
		if m.Phase == wire.PhaseRunning && !s.dead[m.Name] {
			running = append(running, m.Name)
		}
	}
	if len(running) > 0 {
		n := running[s.rng.Intn(len(running))]
		s.dead[n] = true
		s.logf("(%s stops sending heartbeats)\n", n)
	}
}

// TestRolloutProperties runs 500 generated scenarios; FuzzRollout runs more.
func TestRolloutProperties(t *testing.T) {
	for seed := int64(1); seed <= 500; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { rolloutScenario(t, seed) })
	}
}

func FuzzRollout(f *testing.F) {
	for seed := int64(1); seed <= 20; seed++ {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) { rolloutScenario(t, seed) })
}
