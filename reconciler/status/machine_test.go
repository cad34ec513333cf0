package status

import (
	"fmt"
	"strings"
	"testing"
)

// TestMachineHistory: a machine created by a scale-up, running, remediated
// and gone; a status commit about another cluster in between is not an
// event. Each event carries its cause and the spec commit that led to it.
func TestMachineHistory(t *testing.T) {
	dir := t.TempDir()
	repo := newRepo(t, dir)
	w := newWriter(t, Options{Repo: repo})
	step := func(c ClusterStatus, spec string) {
		t.Helper()
		if err := w.SetCluster(c, Origin{SourceCommit: spec}); err != nil {
			t.Fatal(err)
		}
		flush(t, w)
	}
	const m = "c1-md-0-wa"
	with := func(phase, cause, reason string) ClusterStatus {
		c := cluster("c1", 1, phase)
		c.Machines[1].Cause, c.Machines[1].Reason = cause, reason
		return c
	}
	spec := func(i int) string { return strings.Repeat(fmt.Sprint(i), 40) }
	step(with("Pending", "scale up md-0 from 0 to 1", ""), spec(1))
	step(with("Running", "scale up md-0 from 0 to 1", ""), spec(1))
	step(cluster("c2", 2, "Running"), spec(2)) // another cluster
	step(with("Failed", "scale up md-0 from 0 to 1", "MachineMissing"), spec(2))
	step(with("Deleting", "remediate: the provider reported it Failed", "MachineMissing"), spec(2))
	gone := cluster("c1", 0, "Running")
	step(gone, spec(3))

	events, err := MachineHistory(repo, "gitfleet/status", m)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		line := "gone"
		if e.Machine != nil {
			line = e.Machine.Phase + " " + e.Machine.Reason + " | " + e.Machine.Cause
		}
		got = append(got, fmt.Sprintf("%s [%s] %s", e.Cluster, strings.Join(e.Triggers, ",")[:1], line))
	}
	want := []string{
		"c1 [1] Pending  | scale up md-0 from 0 to 1",
		"c1 [1] Running  | scale up md-0 from 0 to 1",
		"c1 [2] Failed MachineMissing | scale up md-0 from 0 to 1",
		"c1 [2] Deleting MachineMissing | remediate: the provider reported it Failed",
		"c1 [3] gone",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("history of %s:\n%s\nwant:\n%s", m, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestMachineHistoryDeleteBetweenCommits: the delete finished before a
// status commit showed the machine Deleting; the cluster's list of deleted
// machines still says why it went.
func TestMachineHistoryDeleteBetweenCommits(t *testing.T) {
	repo := newRepo(t, t.TempDir())
	w := newWriter(t, Options{Repo: repo})
	c := cluster("c1", 1, "Running")
	if err := w.SetCluster(c, Origin{}); err != nil {
		t.Fatal(err)
	}
	flush(t, w)
	gone := cluster("c1", 0, "Running")
	gone.Deleted = []DeletedMachine{{Name: "c1-md-0-wa", Cause: "scale down md-0 to 0 machines", Deleted: created}}
	if err := w.SetCluster(gone, Origin{}); err != nil {
		t.Fatal(err)
	}
	flush(t, w)
	events, err := MachineHistory(repo, "gitfleet/status", "c1-md-0-wa")
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[1].Machine != nil || events[1].Deleted == nil ||
		events[1].Deleted.Cause != "scale down md-0 to 0 machines" {
		t.Errorf("events %+v: want Running, then gone because of the scale down", events)
	}
}
