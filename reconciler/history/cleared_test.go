package history_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/reconciler/history"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/sources"
)

// The commit that ends a refusal is in the trail, with who made it, even
// when it changes nothing that runs (a revert of the refused commit): an
// auditor sees who resolved the refusal and when, and the status commit in
// which the daemon applied it and cleared lastRejected.
func TestTheCommitThatClearsARefusalIsShown(t *testing.T) {
	work := gittest.NewRepo(t)
	files := initFiles(t)
	first := work.Commit("initial fleet", files)
	dave := work.Commit("scale dev-1 to 6", replicas(t, files, "2", "6"))
	revert := work.Commit(`Revert "scale dev-1 to 6"`, replicas(t, files, "6", "2"))

	g, w := statusWriter(t, work)
	fleet := fleetCommitter(t, w)
	applied := &status.SourceCommit{Commit: first, Subject: "initial fleet"}
	fleet(status.FleetStatus{LastApplied: applied}, first)
	fleet(status.FleetStatus{LastApplied: applied, LastRejected: &status.Rejection{
		SourceCommit: status.SourceCommit{Commit: dave, Subject: "scale dev-1 to 6"}, Errors: []string{"commit is not signed"}}}, dave)
	fleet(status.FleetStatus{LastApplied: &status.SourceCommit{Commit: revert, Subject: `Revert "scale dev-1 to 6"`}}, revert)

	src, err := sources.Open(t.Context(), sources.Options{Location: work.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, cluster := range []string{"", "dev-1"} {
		log, err := history.Read(t.Context(), g, src, history.Options{Cluster: cluster})
		if err != nil {
			t.Fatal(err)
		}
		if len(log.Commits) < 2 || log.Commits[0].Commit != revert {
			t.Fatalf("history %q: the newest commit is not the revert: %+v", cluster, log.Commits)
		}
		c := log.Commits[0]
		if c.Refused != nil || len(c.Clears) != 1 || c.Clears[0].Commit != dave || c.Clears[0].Subject != "scale dev-1 to 6" {
			t.Errorf("history %q: the revert %+v does not clear the refusal of %s", cluster, c, dave)
		}
		var text bytes.Buffer
		if err := log.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		want := "    Revert \"scale dev-1 to 6\"\n" +
			"  applied, with no change to what runs\n" +
			"  it clears the refusal of " + dave[:7] + " (Ada Tester: scale dev-1 to 6)\n" +
			"  status "
		if !strings.Contains(text.String(), want) {
			t.Errorf("history %q:\n%s\nlacks:\n%s", cluster, text.String(), want)
		}
		if !strings.Contains(text.String(), "    fleet: applied "+revert[:7]+", the refusal of "+dave[:7]+" cleared\n") {
			t.Errorf("history %q does not show the status commit that applied the revert:\n%s", cluster, text.String())
		}
	}
}

// A new leader restarted on a refused head first applies the last good
// revision again (fleet.yaml without lastRejected for a moment), then
// refuses the head once more: nothing resolved the refusal, and history
// must not say a commit cleared it.
func TestARestartDoesNotClearARefusal(t *testing.T) {
	work := gittest.NewRepo(t)
	files := initFiles(t)
	first := work.Commit("initial fleet", files)
	dave := work.Commit("scale dev-1 to 6", replicas(t, files, "2", "6"))

	g, w := statusWriter(t, work)
	fleet := fleetCommitter(t, w)
	applied := &status.SourceCommit{Commit: first, Subject: "initial fleet"}
	refused := &status.Rejection{SourceCommit: status.SourceCommit{Commit: dave, Subject: "scale dev-1 to 6"}, Errors: []string{"commit is not signed"}}
	fleet(status.FleetStatus{LastApplied: applied}, first)
	fleet(status.FleetStatus{LastApplied: applied, LastRejected: refused}, dave)
	fleet(status.FleetStatus{LastApplied: applied}, first) // the restart's first pass
	fleet(status.FleetStatus{LastApplied: applied, LastRejected: refused}, dave)

	src, err := sources.Open(t.Context(), sources.Options{Location: work.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	log, err := history.Read(t.Context(), g, src, history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := log.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "cleared") || strings.Contains(text.String(), "it clears") {
		t.Errorf("a restart that applied the same revision again reads as clearing the refusal:\n%s", text.String())
	}
}

// fleetCommitter returns a function that commits fleet.yaml as f, made
// from spec commit src, on w's branch.
func fleetCommitter(t *testing.T, w *status.Writer) func(f status.FleetStatus, src string) {
	return func(f status.FleetStatus, src string) {
		t.Helper()
		w.SetFleet(f, status.Origin{SourceCommit: src})
		if err := w.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
