package planner

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// haltedCanary runs the waves fleet through a worker template change whose
// machines always fail: the rollout halts in the canary wave.
func haltedCanary(t *testing.T) (*sim, map[string]bool) {
	t.Helper()
	s := newSim(t, wavesFleet("v1.30.2"))
	s.quiet = true
	s.run(100)
	old := poolHashes(s.desired)
	s.quiet = false
	s.round = 0
	s.check = checkInvariants(t)
	s.setFleet(templateChange(wavesFleet("v1.30.2")))
	bad := map[string]bool{}
	for h := range poolHashes(s.desired) {
		if !old[h] {
			bad[h] = true
		}
	}
	s.fail = func(m *ObservedMachine) bool { return bad[m.TemplateHash] }
	s.minRound = 4
	s.run(60)
	if cr := s.last.Classes[0]; !cr.Halted {
		t.Fatalf("rollout did not halt: %+v", cr)
	}
	return s, bad
}

// TestReleaseByRevert: after a halt, reverting the change is a new rollout
// (of the old revision): the canary's failed machines are replaced with
// the old template, the other waves had nothing to do, and maxFailures was
// never touched.
func TestReleaseByRevert(t *testing.T) {
	s, bad := haltedCanary(t)
	halted := s.records.Rollouts["standard"]
	s.logf("(git revert)\n")
	s.setFleet(wavesFleet("v1.30.2"))
	s.minRound = s.round + 2
	s.run(60)
	golden(t, "rollout/release-revert", s.log.String())

	rr := s.records.Rollouts["standard"]
	if rr.Revision == halted.Revision || len(rr.Failed) != 0 || !rr.Started.After(halted.Started) {
		t.Errorf("revert did not start a new rollout: before %+v, after %+v", halted, rr)
	}
	checkHealthyOn(t, s, s.desired, bad)
}

// TestReleaseByFix: a fix forward (another template) releases the halted
// rollout too: it goes through every wave, and the canary's failed
// machines are replaced with the fixed template.
func TestReleaseByFix(t *testing.T) {
	s, bad := haltedCanary(t)
	s.logf("(a fix: cpus 8 → 6)\n")
	f := wavesFleet("v1.30.2")
	f.Classes[0].Spec.Workers.MachineDeployments[0].Template.Spec["cpus"] = 6
	s.setFleet(f)
	s.quiet = true
	s.run(200)
	checkHealthyOn(t, s, s.desired, bad)
	for _, c := range s.last.Clusters {
		if c.Rollout == nil || c.Rollout.Revision != s.desired.Classes[0].Revision || c.Rollout.State != AdmissionDone {
			t.Errorf("%s: rollout %+v, want done on the fix", c.Name, c.Rollout)
		}
	}
}

// checkHealthyOn: every machine runs its pool's template of d, Running; no
// machine of a bad template is left.
func checkHealthyOn(t *testing.T, s *sim, d *Desired, bad map[string]bool) {
	t.Helper()
	for _, m := range s.machines {
		dc := d.Cluster(m.Cluster)
		_, pool := dc.pool(m.Deployment)
		if bad[m.TemplateHash] || m.Phase != wire.PhaseRunning || pool == nil || m.TemplateHash != pool.TemplateHash {
			t.Errorf("%s is %s with template %s, want Running with %v", m.Name, m.Phase, m.TemplateHash, pool)
		}
	}
	for _, c := range s.last.Clusters {
		if !c.Has(CondReady) {
			t.Errorf("%s is %s, not ready: %+v", c.Name, c.Phase, c.Conditions)
		}
	}
}

// TestWorkersWaitForControlPlane: a version bump and a worker template
// change in one commit replace each worker once, after the control plane
// reached the new version, like Cluster API (which defers MachineDeployment
// upgrades while the control plane upgrades).
func TestWorkersWaitForControlPlane(t *testing.T) {
	base := testFleet(testClass("v1.29.4"), testCluster("c1", 3, 3))
	head := testFleet(testClass("v1.30.2"), testCluster("c1", 3, 3))
	head.Classes[0].Spec.Workers.MachineDeployments[0].Template.Spec["cpus"] = 8
	s := converged(t, base, head)
	s.check = checkInvariants(t)
	s.run(100)
	golden(t, "rollout/workers-wait-for-control-plane", s.log.String())
	creates := strings.Count(s.log.String(), "  create c1-md-")
	if creates != 3 {
		t.Errorf("%d workers created, want 3 (one per worker)", creates)
	}
	cpLast, mdFirst := strings.LastIndex(s.log.String(), "delete c1-control-plane-"), strings.Index(s.log.String(), "create c1-md-")
	if mdFirst < cpLast {
		t.Error("a worker was replaced before the control plane finished")
	}
}

// TestCreateBackoff: a pool whose machines always fail is created again
// after 10s, 20s, 40s… (the retry interval doubling, up to 5 minutes), not
// every round; status says why and until when. A machine that comes up
// ends the backoff.
func TestCreateBackoff(t *testing.T) {
	// A new cluster whose worker template always fails (a rollout would
	// halt at the first failure instead, see TestReleaseByRevert).
	f := testFleet(testClass("v1.30.2"), testCluster("c1", 1, 2))
	broken := testFleet(testClass("v1.30.2"), testCluster("c1", 1, 2))
	broken.Classes[0].Spec.Workers.MachineDeployments[0].Template.Spec["cpus"] = 8
	s := newSim(t, broken)
	s.tick = time.Second
	s.quiet = true
	badHash := s.desired.Clusters[0].Deployments[0].TemplateHash
	s.fail = func(m *ObservedMachine) bool { return m.TemplateHash == badHash }
	start := s.now
	creates := 0
	var sawStatus bool
	for s.now.Sub(start) < 60*time.Second {
		res := s.plan()
		for _, st := range res.Steps {
			if st.Op == wire.OpCreate {
				creates++
			}
			s.apply(st)
		}
		c := res.Clusters[0]
		if md := c.Deployments[0]; md.Failures > 0 {
			if !strings.Contains(md.LastFailure, "failed: provider says no") || !md.NextRetry.After(s.now) && c.Has(CondBackingOff) {
				t.Errorf("status %+v does not say why nor until when", md)
			}
			sawStatus = sawStatus || c.Has(CondBackingOff)
		}
		s.advance()
	}
	// 60 rounds of one second: without backoff, one create per round or two.
	if creates == 0 || creates >= 10 {
		t.Errorf("%d creates of a failing pool in 60s, want a few (backoff 10s, 20s, 40s)", creates)
	}
	if !sawStatus {
		t.Error("no BackingOff condition while creates were held back")
	}
	rec := s.records.Clusters["c1"]
	if len(rec.Backoff) != 1 || rec.Backoff[0].Pool != "md" || rec.Backoff[0].Failures < 2 {
		t.Fatalf("backoff record %+v, want md with its failures", rec.Backoff)
	}

	// A fixed template comes up: the backoff ends.
	s.fail = nil
	s.setFleet(f)
	s.tick = 10 * time.Second
	s.run(100)
	if rec := s.records.Clusters["c1"]; len(rec.Backoff) != 0 {
		t.Errorf("backoff %+v left after machines came up", rec.Backoff)
	}
}

// TestBackoffDelay: the delay doubles from the base, stops at the cap, and
// jitter adds at most half, never past the cap.
func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: 10 * time.Second, Max: 5 * time.Minute}
	var got []string
	for n := 1; n <= 7; n++ {
		got = append(got, b.delay("c", "md", n).String())
	}
	if want := "10s 20s 40s 1m20s 2m40s 5m0s 5m0s"; strings.Join(got, " ") != want {
		t.Errorf("delays %v, want %s", got, want)
	}
	b.Jitter = func(string, string, int) float64 { return 0.999 }
	if d := b.delay("c", "md", 1); d < 10*time.Second || d >= 15*time.Second {
		t.Errorf("jittered first delay %s, want in [10s, 15s)", d)
	}
	if d := b.delay("c", "md", 6); d != 5*time.Minute {
		t.Errorf("jittered delay %s passes the cap", d)
	}
}

// TestOwnChangeIsNotHeld: a change in a cluster's own file (here its
// replicas and a variable) is applied at once, even to a cluster of the
// last wave: waves order class changes.
func TestOwnChangeIsNotHeld(t *testing.T) {
	withVar := func() *v1alpha1.Fleet {
		f := wavesFleet("v1.30.2")
		f.Classes[0].Spec.Variables = []v1alpha1.ClassVariable{{Name: "cpus", Default: 4}}
		f.Classes[0].Spec.Patches = []v1alpha1.ClassPatch{workerPatch("cpus", "default", fromVar("/spec/cpus", "cpus"))}
		return f
	}
	head := withVar()
	clusterOf(head, "prod-b").Spec.Topology.Variables = []v1alpha1.ClusterVariable{{Name: "cpus", Value: 16}}
	s := converged(t, withVar(), head)
	s.check = checkInvariants(t)
	s.run(50)
	for _, m := range s.machines {
		if m.Cluster == "prod-b" && m.Deployment == "md" && m.TemplateHash != s.desired.Cluster("prod-b").Deployments[0].TemplateHash {
			t.Errorf("prod-b's own change not applied: %s runs %s", m.Name, m.TemplateHash)
		}
	}
	if strings.Contains(s.log.String(), "WaitingForWave") {
		t.Errorf("a cluster waited for a wave for its own change:\n%s", s.log.String())
	}
}

// TestNewClusterDuringRollout: a cluster added while its class rolls out is
// created at once with the new revision, and its wave waits for it.
func TestNewClusterDuringRollout(t *testing.T) {
	head := templateChange(wavesFleet("v1.30.2"))
	head.Clusters = append(head.Clusters, testCluster("canary-new", 1, 1, labels("tier", "canary")))
	s := converged(t, wavesFleet("v1.30.2"), head)
	s.check = checkInvariants(t)
	s.run(100)
	log := s.log.String()
	if !strings.Contains(log, "create canary-new-control-plane-") {
		t.Fatalf("new cluster not created:\n%s", log)
	}
	firstStage := strings.Index(log, "create stage-")
	newReady := strings.Index(log, "canary-new: Provisioned")
	if firstStage < 0 || newReady < 0 || firstStage < newReady {
		t.Errorf("staging started before the new canary cluster was ready:\n%s", log)
	}
}

// TestNoRecordWaitsForItsWave: machines observed without any record (a
// store lost, an older daemon) that do not run the desired templates wait
// for their wave like any others; those that do are admitted at once.
func TestNoRecordWaitsForItsWave(t *testing.T) {
	s := newSim(t, wavesFleet("v1.30.2"))
	s.quiet = true
	s.run(100)
	s.records = Records{}
	s.setFleet(templateChange(wavesFleet("v1.30.2")))
	s.check = checkInvariants(t)
	res := s.plan()
	for _, st := range res.Steps {
		if st.Machine.Cluster != "canary-a" {
			t.Errorf("step for %s before its wave: %+v", st.Machine.Cluster, st)
		}
	}
	if len(res.Steps) == 0 {
		t.Error("the first wave did not start")
	}
	for _, c := range res.Clusters {
		if c.Name != "canary-a" && (c.Rollout == nil || c.Rollout.State != RolloutWaiting) {
			t.Errorf("%s: rollout %+v, want Waiting", c.Name, c.Rollout)
		}
	}
	s.quiet = false
	s.run(100)
	checkHealthyOn(t, s, s.desired, nil)
}

// TestNewClusterWaitsOnHalt: a cluster added to a class whose rollout
// halted is not made from the revision that failed. It waits, with no
// machine, phase Waiting, its RolloutHalted condition naming the revision
// and what releases it; a revert releases it, and it is made from the
// revert's templates.
func TestNewClusterWaitsOnHalt(t *testing.T) {
	s, bad := haltedCanary(t)
	halted := s.records.Rollouts["standard"]
	added := templateChange(wavesFleet("v1.30.2"))
	added.Clusters = append(added.Clusters, testCluster("prod-new", 1, 1, labels("tier", "prod")))
	s.logf("(prod-new added)\n")
	s.setFleet(added)
	s.minRound = s.round + 3
	s.run(30)
	for _, m := range s.machines {
		if m.Cluster == "prod-new" {
			t.Errorf("machine %s of the new cluster made while the rollout halted (template %s)", m.Name, m.TemplateHash)
		}
	}
	var st ClusterStatus
	for _, c := range s.last.Clusters {
		if c.Name == "prod-new" {
			st = c
		}
	}
	var msg string
	for _, c := range st.Conditions {
		if c.Type == CondRolloutHalted {
			msg = c.Message
		}
	}
	if st.Phase != PhaseWaiting || !strings.Contains(msg, "halted at revision "+halted.Revision) || !strings.Contains(msg, "a fix or a revert") {
		t.Errorf("prod-new is %s, RolloutHalted %q: want Waiting, naming revision %s and what releases it", st.Phase, msg, halted.Revision)
	}
	if r := st.Rollout; r == nil || r.State != RolloutWaiting || r.PendingRevision != halted.Revision {
		t.Errorf("prod-new's rollout %+v, want Waiting for %s", r, halted.Revision)
	}
	if cr := s.last.Classes[0]; len(cr.Failed) != 1 || !slices.Contains(cr.Waves[2].Waiting, "prod-new") {
		t.Errorf("rollout %+v: want canary-a alone failed and prod-new waiting in wave production", cr)
	}

	s.logf("(git revert)\n")
	released := wavesFleet("v1.30.2")
	released.Clusters = append(released.Clusters, testCluster("prod-new", 1, 1, labels("tier", "prod")))
	s.setFleet(released)
	s.minRound = s.round + 2
	s.run(60)
	checkHealthyOn(t, s, s.desired, bad)
	if n := len(poolMachines(s, "prod-new")); n != 2 {
		t.Errorf("prod-new has %d machines after the revert, want 2", n)
	}
}

func poolMachines(s *sim, cluster string) []*ObservedMachine {
	var out []*ObservedMachine
	for _, m := range s.machines {
		if m.Cluster == cluster {
			out = append(out, m)
		}
	}
	return out
}

// TestPausedCanaryIsPassedOver: a class change while the canary wave's
// only cluster is paused. Paused clusters take no part in a rollout, so
// the wave is passed over and the change goes on to the next (the
// decision, docs/planner.md); status says so rather than "Done": the
// canary's rollout state is Paused with the revision that passes it over,
// its wave lists it as paused, and the class's reason names the wave
// passed over.
func TestPausedCanaryIsPassedOver(t *testing.T) {
	pause := func(f *v1alpha1.Fleet) *v1alpha1.Fleet {
		clusterOf(f, "canary-a").Spec.Paused = true
		return f
	}
	s := newSim(t, wavesFleet("v1.30.2"))
	s.quiet = true
	s.run(100)
	s.setFleet(pause(wavesFleet("v1.30.2")))
	s.run(10)
	s.setFleet(pause(templateChange(wavesFleet("v1.30.2"))))
	rev := s.desired.Classes[0].Revision
	s.step()
	cr := s.last.Classes[0]
	if cr.CurrentWave != "staging" || !strings.Contains(cr.Reason, "wave canary passed over: every cluster of it paused") {
		t.Errorf("rollout at wave %q, reason %q: want staging, canary said to be passed over", cr.CurrentWave, cr.Reason)
	}
	if w := cr.Waves[0]; !slices.Equal(w.Paused, []string{"canary-a"}) {
		t.Errorf("wave canary: %+v, want canary-a paused", w)
	}
	for _, c := range s.last.Clusters {
		if c.Name != "canary-a" {
			continue
		}
		if r := c.Rollout; r == nil || r.State != RolloutPaused || r.PendingRevision != rev || !strings.Contains(r.Reason, "passes it over") {
			t.Errorf("canary-a's rollout %+v: want Paused, passed over by %s", r, rev)
		}
		if c.Phase != PhasePaused {
			t.Errorf("canary-a is %s, want Paused", c.Phase)
		}
	}
}

// TestNoRecordWaitsOnHalt: a cluster with machines but no record (its
// records lost) while its class's rollout is halted is never admitted to
// the revision that failed, and has no record of the templates it runs.
// A machine it misses is not made from the failing revision, as a new
// cluster makes none then: the pool waits, phase Waiting, its
// RolloutHalted condition saying which pool lacks machines, why and what
// releases it; a revert releases it, and the machine is made from the
// revert's templates. Before, the missing worker was made from the
// failing template, failed, and was made again, its failures not counted.
func TestNoRecordWaitsOnHalt(t *testing.T) {
	s, bad := haltedCanary(t)
	halted := s.records.Rollouts["standard"]
	s.logf("(prod-a's record lost, and one of its workers vanishes)\n")
	delete(s.records.Clusters, "prod-a")
	for _, m := range poolMachines(s, "prod-a") {
		if m.Deployment == "md" {
			delete(s.machines, m.Name)
		}
	}
	from := len(s.applied)
	for range 20 {
		s.step()
	}
	for _, st := range s.applied[from:] {
		if st.Machine.Cluster == "prod-a" && st.Op == wire.OpCreate {
			t.Errorf("prod-a: %s made while the rollout halted (template %s, bad %v): %s", st.Machine.Name, st.Machine.TemplateHash, bad[st.Machine.TemplateHash], st.Reason)
		}
	}
	var st ClusterStatus
	for _, c := range s.last.Clusters {
		if c.Name == "prod-a" {
			st = c
		}
	}
	var msg string
	for _, c := range st.Conditions {
		if c.Type == CondRolloutHalted {
			msg = c.Message
		}
	}
	want := "no record of the templates it runs, so no machine is made from the halted revision for md (0 of 1 machines): rollout of class standard halted at revision " + halted.Revision
	if st.Phase != PhaseWaiting || !strings.HasPrefix(msg, want) || !strings.Contains(msg, "a fix or a revert") {
		t.Errorf("prod-a is %s, RolloutHalted %q: want Waiting, %q and what releases it", st.Phase, msg, want)
	}

	s.logf("(git revert)\n")
	s.setFleet(wavesFleet("v1.30.2"))
	s.minRound = s.round + 2
	s.run(60)
	checkHealthyOn(t, s, s.desired, bad)
	if n := len(poolMachines(s, "prod-a")); n != 2 {
		t.Errorf("prod-a has %d machines after the revert, want 2", n)
	}
}

// TestANewClusterOnHaltHasItsWave: a cluster added while its class's
// rollout is halted has no admission, but its status names the wave the
// class's waves put it in, as its class's rollout lists it: the dashboard
// lists it under that wave. Before, its status had no wave, and the
// dashboard listed it "In no wave yet".
func TestANewClusterOnHaltHasItsWave(t *testing.T) {
	s, _ := haltedCanary(t)
	added := templateChange(wavesFleet("v1.30.2"))
	added.Clusters = append(added.Clusters, testCluster("prod-new", 1, 1, labels("tier", "prod")))
	s.setFleet(added)
	s.minRound = s.round + 2
	s.run(30)
	for _, c := range s.last.Clusters {
		if c.Name == "prod-new" {
			if r := c.Rollout; r == nil || r.Wave != "production" || r.Revision != "" || r.State != RolloutWaiting {
				t.Errorf("prod-new's rollout %+v: want Waiting in wave production, admitted to no revision", r)
			}
			return
		}
	}
	t.Fatal("no status of prod-new")
}

// TestNoRecordMakesNothingBeforeItsWave: a cluster with machines but no record (its
// records lost) while its class's rollout moves through an earlier wave
// makes no machine from the new revision before its wave admits it: a
// bad change reaches the first wave only, whatever else happens to a
// later wave's clusters. The pool whose machine went waits, its
// WaitingForWave condition saying so; once its wave admits it, the
// machine is made from the new revision. Before, the missing worker was
// made at once from the new revision's template, ahead of the canary.
func TestNoRecordMakesNothingBeforeItsWave(t *testing.T) {
	s := newSim(t, wavesFleet("v1.30.2"))
	s.quiet = true
	s.run(100)
	old := poolHashes(s.desired)
	s.quiet = false
	s.round = 0
	s.check = checkInvariants(t)
	s.setFleet(templateChange(wavesFleet("v1.30.2")))
	changed := map[string]bool{}
	for h := range poolHashes(s.desired) {
		if !old[h] {
			changed[h] = true
		}
	}
	s.step()
	if a := s.records.Cluster("prod-a").Admission; a == nil || a.Revision == s.records.Rollouts["standard"].Revision {
		t.Fatalf("prod-a's admission %+v after the first round: want it still on the old revision, its wave waiting", a)
	}
	s.logf("(prod-a's record lost, and one of its workers vanishes)\n")
	delete(s.records.Clusters, "prod-a")
	for _, m := range poolMachines(s, "prod-a") {
		if m.Deployment == "md" {
			delete(s.machines, m.Name)
		}
	}
	waited, wasAdmitted := false, false
	for range 200 {
		from := len(s.applied)
		more := s.step()
		rec := s.records.Cluster("prod-a")
		admitted := rec != nil && rec.Admission != nil
		if admitted && !wasAdmitted {
			// Its wave comes after canary's and staging's.
			for _, c := range []string{"canary-a", "stage-a", "stage-b"} {
				if a := s.records.Cluster(c).Admission; a.Revision != rec.Admission.Revision || a.State != AdmissionDone {
					t.Errorf("round %d: prod-a admitted to %s while %s is %s on %s, before its wave", s.round, rec.Admission.Revision, c, a.State, a.Revision)
				}
			}
		}
		wasAdmitted = admitted
		for _, st := range s.applied[from:] {
			if st.Machine.Cluster == "prod-a" && st.Op == wire.OpCreate && changed[st.Machine.TemplateHash] && !admitted {
				t.Errorf("round %d: prod-a's %s made from the new revision before its wave admitted it: %s", s.round, st.Machine.Name, st.Reason)
			}
		}
		if !admitted {
			for _, c := range s.last.Clusters {
				for _, cond := range c.Conditions {
					if c.Name == "prod-a" && cond.Type == CondWaitingForWave && strings.HasPrefix(cond.Message, "no record of the templates it runs, so no machine is made from revision ") &&
						strings.Contains(cond.Message, "before its wave admits it for md (0 of 1 machines): waiting for wave") {
						waited = true
					}
				}
			}
		}
		if !more {
			break
		}
	}
	if !waited {
		t.Errorf("prod-a never said, while it waited for its wave, that its pool md makes no machine until then:\n%s", s.log.String())
	}
	checkHealthyOn(t, s, s.desired, nil)
	if n := len(poolMachines(s, "prod-a")); n != 2 {
		t.Errorf("prod-a has %d machines once its wave is done, want 2", n)
	}
}
