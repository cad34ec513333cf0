package reconciler

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestUnansweredTasksAreInFleetYAML: a provider whose tasks nobody answers
// (no worker runs for it) is named in fleet.yaml's TasksAnswered
// condition, with what to do, once a task went unanswered past the task
// timeout; the first event of its workers clears it.
func TestUnansweredTasksAreInFleetYAML(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	l.opts.TaskTimeout = 300 * time.Millisecond
	l.start()
	first := l.nextTasks(1)[0]
	condition := func() *status.FleetCondition {
		for _, c := range l.statusSnapshot().Fleet.Conditions {
			if c.Type == status.ConditionTasksAnswered {
				return &c
			}
		}
		return nil
	}
	l.waitFor("TasksAnswered False in fleet.yaml", func() (bool, string) {
		c := condition()
		if c == nil {
			return false, "no TasksAnswered condition"
		}
		return c.Status == status.ConditionFalse && c.Reason == "NoWorkerAnswers" &&
			strings.Contains(c.Message, "provider inmemory: no worker answered 1 task") &&
			strings.Contains(c.Message, "create "+first.task.Machine.Name) &&
			strings.Contains(c.Message, "gitfleet worker --provider inmemory") && !c.LastTransitionTime.IsZero(), c.Message
	})
	// The condition records the provider it is about, for describe.
	if y := l.fleetYAML(); !strings.Contains(y, "  - type: TasksAnswered\n") || !strings.Contains(y, "\n    providers:\n      - inmemory\n") {
		t.Errorf("fleet.yaml's TasksAnswered condition does not record that it concerns provider inmemory:\n%s", y)
	}
	// A worker comes and answers the task's newest attempt.
	var last received
	for {
		task := l.nextTasks(1)[0]
		last = task
		if task.task.Attempt > first.task.Attempt {
			break
		}
	}
	l.answer(last, wire.PhaseRunning)
	l.waitFor("TasksAnswered gone from fleet.yaml", func() (bool, string) {
		if c := condition(); c != nil {
			return false, c.Message
		}
		return true, ""
	})
}

// A host-bound provider's tasks go to the worker on the machines' host:
// the condition names that worker, and an event another worker of the
// provider reports does not clear it; one from that worker does. Any
// event of a provider whose tasks any worker takes clears its line.
func TestUnansweredNamesTheHostBoundWorker(t *testing.T) {
	r := &Reconciler{o: Options{TaskTimeout: 2 * time.Minute}, log: zerolog.Nop(), unanswered: map[string]*unanswered{}}
	r.inv = newInventory()
	r.inv.providers["local"] = &heard{hostBound: true}
	published := StampOf(time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC))
	onHost := &machine{rec: &Record{Name: "c1-md-0-a", Shape: &Shape{Cluster: "c1", Provider: "local"}, Worker: "vm-1", TaskID: "create.c1.c1-md-0-a", Published: published}}
	anywhere := &machine{rec: &Record{Name: "c1-md-1-b", Shape: &Shape{Cluster: "c1", Provider: "docker"}, Worker: "w-2", TaskID: "create.c1.c1-md-1-b", Published: published}}
	if !r.noAnswer(onHost) || !r.noAnswer(anywhere) || r.noAnswer(onHost) {
		t.Fatal("noAnswer reports a change only for a new line")
	}
	c := r.unansweredCondition()
	if c == nil || !strings.Contains(c.Message, "provider docker: no worker answered 1 task") ||
		!strings.Contains(c.Message, "provider local: worker vm-1 answered none of its 1 task") || !c.LastTransitionTime.Equal(published.Time()) ||
		!slices.Equal(c.Providers, []string{"docker", "local"}) {
		t.Fatalf("condition %+v", c)
	}
	if r.answered("local", "vm-2") {
		t.Error("an event of another local worker cleared vm-1's line")
	}
	if !r.answered("docker", "") || !r.answered("local", "vm-1") || r.unansweredCondition() != nil {
		t.Errorf("lines left after their workers answered: %+v", r.unansweredCondition())
	}
}

// TestFleetConditionsRecordWhatTheyConcern: each of fleet.yaml's
// conditions records what it is about as the loop knew it: Reconciling
// the cluster whose bootstrap data failed (not a publish failure NATS
// names no task of, which is the task stream's), RecordsRebuilt the
// providers whose inventories it waits for.
func TestFleetConditionsRecordWhatTheyConcern(t *testing.T) {
	now := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	r := &Reconciler{o: Options{TaskTimeout: 2 * time.Minute, Now: func() time.Time { return now }, InventoryWait: time.Minute, RebuildTimeout: time.Hour},
		log: zerolog.Nop(), health: NewLoopHealth(), unanswered: map[string]*unanswered{}}
	r.inv = newInventory()
	r.inv.last = now // no inventory request: no NATS here
	r.inv.providers["local"] = &heard{hostBound: true}
	r.health.ReportFor(ProblemBootstrap, "c1", errors.New("bootstrap: the cluster's trust material, endpoint and the machine's token are required"))
	r.health.Report(ProblemPublish, errors.New("nats: no responders available for request"))
	r.inv.rebuild = &rebuild{seq: 1, start: now, listed: map[string]status.MachineStatus{
		"c2.c2-md-0-a": {Name: "c2-md-0-a", Provider: "local", Worker: "vm-1"},
		"c3.c3-md-0-b": {Name: "c3-md-0-b", Provider: "docker"},
	}}
	if !r.rebuilding() {
		t.Fatal("the rebuild does not wait for the inventories")
	}
	got := map[string]status.FleetCondition{}
	for _, c := range r.fleetConditions() {
		got[c.Type] = c
	}
	if c := got[status.ConditionReconciling]; !slices.Equal(c.Clusters, []string{"c1"}) || c.Providers != nil {
		t.Errorf("Reconciling records %v and %v, want cluster c1 alone: %+v", c.Clusters, c.Providers, c)
	}
	if c := got[status.ConditionRecordsRebuilt]; !slices.Equal(c.Providers, []string{"docker", "local"}) || c.Clusters != nil {
		t.Errorf("RecordsRebuilt records %v and %v, want providers docker and local: %+v", c.Clusters, c.Providers, c)
	}
}

// TestReconcilingConcernsEveryClusterItsProblemsName: the loop's problems
// are one Reconciling condition, which records the cluster of each: a
// bootstrap error about c1, a machine record of c2 the store refuses, a
// task of c3 NATS does not take, a scale request of c4 the rollouts
// bucket refuses. describe and the dashboard page of each of them show
// the condition, and of c5, which none names, do not. Before, it
// recorded c1 alone, and describe c2, c3 or c4, which showed the error
// that names them while no bootstrap error was raised, showed nothing.
func TestReconcilingConcernsEveryClusterItsProblemsName(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv.ClientURL())
	nc.Close() // NATS gone: a task is not taken
	r := &Reconciler{o: Options{Now: time.Now}, log: zerolog.Nop(), health: NewLoopHealth(), unanswered: map[string]*unanswered{},
		dirty: map[string]bool{}, unsent: map[string]*machine{}, pub: natsbus.NewPublisher(js)}
	r.inv = newInventory()
	r.health.ReportFor(ProblemBootstrap, "c1", errors.New("bootstrap: no CA: cluster c1 has no CA in bucket gitfleet-pki"))
	r.saveFailed(t.Context(), &Record{Name: "c2-md-0-a", Shape: &Shape{Cluster: "c2", Provider: "inmemory"}},
		errors.New("save c2.c2-md-0-a: nats: maximum message size exceeded"))
	r.publish(t.Context(), &machine{rec: &Record{Name: "c3-md-0-b", Shape: &Shape{Cluster: "c3", Provider: "inmemory"}, TaskID: "create.c3.c3-md-0-b", Attempt: 1}})
	r.decisionFailed(t.Context(), keyScale+"c4.md-0", errors.New("save scale.c4.md-0: nats: timeout"))

	var reconciling status.FleetCondition
	for _, c := range r.fleetConditions() {
		if c.Type == status.ConditionReconciling {
			reconciling = c
		}
	}
	for _, w := range []string{"bootstrap: no CA: cluster c1", "store: save c2.c2-md-0-a", "publish: publish task create.c3.c3-md-0-b", "rollouts: save scale.c4.md-0"} {
		if !strings.Contains(reconciling.Message, w) {
			t.Fatalf("Reconciling lacks %q: %+v", w, reconciling)
		}
	}
	if !slices.Equal(reconciling.Clusters, []string{"c1", "c2", "c3", "c4"}) {
		t.Errorf("Reconciling records clusters %v, want c1, c2, c3, c4", reconciling.Clusters)
	}
	s := &status.Snapshot{Fleet: status.FleetStatus{Conditions: []status.FleetCondition{reconciling}}}
	for _, n := range []string{"c1", "c2", "c3", "c4", "c5"} {
		s.Clusters = append(s.Clusters, status.ClusterStatus{Name: n, Machines: []status.MachineStatus{{Name: n + "-md-0-a", Provider: "inmemory"}}})
	}
	for _, n := range []string{"c1", "c2", "c3", "c4", "c5"} {
		got := s.DescribeCluster(n).FleetConditions
		if want := n != "c5"; (len(got) == 1) != want {
			t.Errorf("describe %s shows fleet conditions %+v; want Reconciling: %v", n, got, want)
		}
	}
}
