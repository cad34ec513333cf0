package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/reconciler/status"
)

// prodCluster is a cluster of class standard in wave prod, as prod-1 is
// but with no health check of its own.
func prodCluster(name string) string {
	return `apiVersion: gitfleet.io/v1alpha1
kind: Cluster
metadata:
  name: ` + name + `
  labels:
    env: prod
spec:
  topology:
    classRef:
      name: standard
    controlPlane:
      replicas: 3
    workers:
      machineDeployments:
        - class: default-worker
          name: md-0
          replicas: 2
`
}

// addFiles commits files on main.
func addFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for path, content := range files {
		if err := os.WriteFile(filepath.Join(dir, path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitCLI(t, dir, "add", "-A")
	gitCLI(t, dir, "commit", "-qm", "more clusters")
}

// rolloutUnderWay writes, for the fleet at dir's main, a status branch
// that shows class standard's rollout of main's revision under way, not
// halted, at wave current: the clusters of moving are admitted to it
// (Progressing), those of waiting wait for it on an older revision, whose
// templates their machines run, and every other cluster is done on it.
func rolloutUnderWay(t *testing.T, dir, current string, moving, waiting []string) (good, rev string) {
	t.Helper()
	good = strings.TrimSpace(gitCLI(t, dir, "rev-parse", "main"))
	d := expandedAt(t, dir, good)
	rev = d.Class("standard").Revision
	w := statusWriter(t, dir)
	w.SetFleet(status.FleetStatus{LastApplied: &status.SourceCommit{Commit: good, Subject: "init"},
		Rollouts: []status.ClassRollout{{Class: "standard", Revision: rev, MaxFailures: 1, CurrentWave: current,
			Change: &status.SourceCommit{Commit: good, Subject: "init"}}}}, status.Origin{SourceCommit: good})
	for _, c := range runningAsWritten(t, dir, good) {
		wave := d.Cluster(c.Name).WaveName
		switch {
		case slices.Contains(moving, c.Name):
			c.Phase = "RollingOut"
			c.Rollout = &status.Rollout{ClassRevision: rev, Wave: wave, State: planner.AdmissionProgressing}
		case slices.Contains(waiting, c.Name):
			c.Phase = "RollingOut"
			c.Rollout = &status.Rollout{ClassRevision: "0123456789", Wave: wave, State: planner.RolloutWaiting, PendingRevision: rev}
			for i := range c.Machines {
				c.Machines[i].TemplateHash = "older"
			}
		default:
			c.Rollout = &status.Rollout{ClassRevision: rev, Wave: wave, State: planner.AdmissionDone}
		}
		if err := w.SetCluster(c, status.Origin{SourceCommit: good}); err != nil {
			t.Fatal(err)
		}
	}
	flushStatus(t, w)
	return good, rev
}

// A change of the gate of a class's rollout under way — a wave's
// maxConcurrent, a relabel that moves a cluster to another wave — leaves
// the class's revision as it is, so the rollout goes on, by the new gate:
// the daemon admits at the merge the clusters it now lets in, and their
// machines are replaced then; the clusters it still holds wait in
// another wave, or move more or fewer at a time. The plan lists both,
// and --detailed-exitcode exits 2. Before, every such change read "No
// changes" and exited 0.
func TestPlanGateChangeUnderWay(t *testing.T) {
	prodMax := func(from, to string) map[string][2]string {
		return map[string][2]string{"classes/standard.yaml": {"matchLabels: {env: prod}\n        maxConcurrent: " + from, "matchLabels: {env: prod}\n        maxConcurrent: " + to}}
	}
	relabel := func(cluster, to string) map[string][2]string {
		return map[string][2]string{"clusters/" + cluster + ".yaml": {"    env: prod\n", "    env: " + to + "\n"}}
	}
	for _, c := range []struct {
		name            string
		current         string
		moving, waiting []string
		head            map[string][2]string
		want, not       []string
		golden          string
	}{
		// prod-2 gets the second slot of wave prod; prod-3 waits for one
		// of two slots, no longer for the only one.
		{name: "maxConcurrent admits", current: "prod", moving: []string{"prod-1"}, waiting: []string{"prod-2", "prod-3"},
			head: prodMax("1", "2"), golden: "gate-maxconcurrent", want: []string{
				"Plan: 0 clusters added, 1 changed, 0 removed; 5 machines replaced, 0 created, 0 deleted; 3 clusters unchanged.",
				"~ prod-2 (changed)",
				"    admitted: at the merge, to class standard's rollout of revision REV under way, in wave prod (3 clusters, 2 at a time); before this change it was in wave prod (3 clusters, 1 at a time), waiting for a slot in wave prod of class standard (maxConcurrent 1); its machines move to that revision now\n",
				"    machines replaced: prod-2-control-plane-m0, prod-2-control-plane-m1, prod-2-control-plane-m2, prod-2-md-0-m0, prod-2-md-0-m1\n",
				"= prod-3 (unchanged)\n    why: no machine of it changes at the merge, but this change moves it in class standard's rollout of revision REV under way: it waits in wave prod (3 clusters, 2 at a time), not in wave prod (3 clusters, 1 at a time) as before, now waiting for a slot in wave prod of class standard (maxConcurrent 2)\n",
				"Class standard's rollout of revision REV under way goes on by the new gate: it admits prod-2 at the merge; prod-3 waits where that gate puts it.",
			}},
		// Wave dev is done: prod-3, relabelled into it, is admitted there
		// at once. prod-2 still waits for wave prod's only slot.
		{name: "relabel into a wave done", current: "prod", moving: []string{"prod-1"}, waiting: []string{"prod-2", "prod-3"},
			head: relabel("prod-3", "dev"), want: []string{
				"~ prod-3 (changed)\n    class: standard\n    version: v1.31.2\n    wave: 1/2 dev\n",
				"before this change it was in wave prod (3 clusters, 1 at a time), waiting for a slot in wave prod of class standard (maxConcurrent 1)",
				"      - metadata.labels.env: prod\n      + metadata.labels.env: dev\n",
				"Class standard's rollout of revision REV under way goes on by the new gate: it admits prod-3 at the merge.",
			}},
		// Out of wave prod, to the clusters no wave selects: prod-3 now
		// waits for all of wave prod to be done.
		{name: "relabel out of a wave", current: "prod", moving: []string{"prod-1"}, waiting: []string{"prod-2", "prod-3"},
			head: relabel("prod-3", "staging"), want: []string{
				"No machine changes: 4 clusters unchanged, 1 of them waiting elsewhere in their class's rollout under way.",
				"it waits in the clusters no wave selects (1 cluster, all at once), not in wave prod (3 clusters, 1 at a time) as before, now waiting for wave prod of class standard: 0 of 2 clusters done",
			}},
		// The rollout is in wave dev: no cluster of wave prod is admitted
		// at the merge, but all three move at once when dev is done.
		{name: "maxConcurrent of a wave not open yet", current: "dev", moving: []string{"dev-1"}, waiting: []string{"prod-1", "prod-2", "prod-3"},
			head: prodMax("1", "100%"), want: []string{
				"No machine changes: 4 clusters unchanged, 3 of them waiting elsewhere in their class's rollout under way.",
				"it waits in wave prod (3 clusters, all at once), not in wave prod (3 clusters, 1 at a time) as before, now waiting for wave dev of class standard: 0 of 1 clusters done",
				"prod-1, prod-2, prod-3 wait where that gate puts them.",
			}},
		// prod-1, admitted and moving, gets a version of its own: its
		// class's gate, alike before and after, admits no one. The change
		// is in its own files, so its machines move at once, in no wave,
		// as they would in no rollout; before, the plan said the new gate
		// admitted it, as if it had taken no part in the rollout.
		{name: "own files of a cluster moving", current: "prod", moving: []string{"prod-1"}, waiting: []string{"prod-2", "prod-3"},
			head: map[string][2]string{"clusters/prod-1.yaml": {"    version: v1.31.2\n", "    version: v1.32.0\n"}}, golden: "gate-own-files", want: []string{
				"Plan: 0 clusters added, 1 changed, 0 removed; 6 machines replaced, 0 created, 0 deleted; 3 clusters unchanged.",
				"    wave: none, at once: the change is in the cluster's own files, and waves order class changes (which reach it in 2/2 prod)\n",
				"At once, in no wave: prod-1.",
			}, not: []string{"admitted:", "took no part", "goes on by the new gate", "it admits prod-1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := fleetRepo(t)
			addFiles(t, dir, map[string]string{"clusters/prod-2.yaml": prodCluster("prod-2"), "clusters/prod-3.yaml": prodCluster("prod-3")})
			good, rev := rolloutUnderWay(t, dir, c.current, c.moving, c.waiting)
			branch(t, dir, "head", c.head)
			code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "head", "--detailed-exitcode")
			if code != 2 || strings.Contains(stdout, "No changes") {
				t.Errorf("exit %d, want 2 and no \"No changes\"\n%s%s", code, stdout, stderr)
			}
			for _, w := range c.want {
				if w = strings.ReplaceAll(w, "REV", rev); !strings.Contains(stdout, w) {
					t.Errorf("plan lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range c.not {
				if strings.Contains(stdout, w) {
					t.Errorf("plan says %q:\n%s", w, stdout)
				}
			}
			for _, format := range []string{"markdown", "json"} {
				if fc, out, _ := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "head", "--detailed-exitcode", "-o", format); fc != code {
					t.Errorf("-o %s: exit %d, text's %d\n%s", format, fc, code, out)
				}
			}
			if c.golden == "" {
				return
			}
			for _, f := range []struct{ format, ext string }{{"text", "txt"}, {"markdown", "md"}, {"json", "json"}} {
				_, out, _ := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "head", "-o", f.format)
				planGolden(t, c.golden+"."+f.ext, hideRevision(out, rev, good))
			}
		})
	}
}

// hideRevision replaces a class revision and the commit that started
// its rollout in a plan by words that stay the same from run to run.
func hideRevision(out, rev, commit string) string {
	return strings.NewReplacer(rev, "REVISION", commit, "COMMIT", commit[:7], "COMMIT").Replace(out)
}
