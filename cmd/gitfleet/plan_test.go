package main

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/sources"
)

var updatePlan = flag.Bool("update", false, "rewrite golden files of plan")

// fleetRepo makes a fleet repository with gitfleet init and returns its
// folder; branch edits files on a new branch from main and commits them.
func fleetRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fleet")
	if code, _, stderr := runCmd(t, "init", dir); code != 0 {
		t.Fatalf("init: %s", stderr)
	}
	return dir
}

func gitCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@localhost", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@localhost")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// branch commits, on a new branch from main, files edited by replacing old
// with new in each.
func branch(t *testing.T, dir, name string, edits map[string][2]string) {
	t.Helper()
	gitCLI(t, dir, "checkout", "-q", "-b", name, "main")
	for path, e := range edits {
		p := filepath.Join(dir, path)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), e[0]) {
			t.Fatalf("%s does not contain %q", path, e[0])
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(data), e[0], e[1], 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitCLI(t, dir, "commit", "-q", "-am", name)
	gitCLI(t, dir, "checkout", "-q", "main")
}

var bumpEdits = map[string][2]string{
	"classes/standard.yaml": {"  version: v1.31.2", "  version: v1.32.0"},
	"clusters/prod-1.yaml":  {"    version: v1.31.2\n", ""},
}

func TestPlanVersionBump(t *testing.T) {
	dir := fleetRepo(t)
	branch(t, dir, "bump", bumpEdits)

	code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "bump", "--detailed-exitcode")
	if code != 2 {
		t.Fatalf("exit %d, want 2 (changes)\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"Plan: 0 clusters added, 2 changed, 0 removed; 9 machines replaced",
		"~ dev-1 (changed)", "~ prod-1 (changed)",
		"version: v1.31.2 → v1.32.0",
		"wave: 1/2 dev", "wave: 2/2 prod",
		"control-plane: 3 machines, 3 replaced", "md-0: 3 machines, 3 replaced",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("plan output lacks %q:\n%s", want, stdout)
		}
	}
	planGolden(t, "bump.txt", stdout)

	if code, _, _ := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "bump"); code != 0 {
		t.Errorf("without --detailed-exitcode exit %d, want 0", code)
	}
	if code, stdout, _ := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "main", "--detailed-exitcode"); code != 0 || !strings.Contains(stdout, "No changes") {
		t.Errorf("main..main: exit %d, want 0 and no changes\n%s", code, stdout)
	}

	_, md, _ := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "bump", "--format", "markdown")
	if !strings.Contains(md, "| ~ | `dev-1` | standard | v1.31.2 → v1.32.0 | 1/2 dev | 3 | 0 | 0 |") || !strings.Contains(md, "<details>") {
		t.Errorf("markdown:\n%s", md)
	}
	_, js, _ := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "bump", "--format", "json")
	var rep struct {
		Clusters []struct {
			Name     string `json:"name"`
			Replaced int    `json:"machinesReplaced"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil || len(rep.Clusters) != 2 || rep.Clusters[1].Replaced != 6 {
		t.Errorf("json (%v):\n%s", err, js)
	}
}

func TestPlanSkippedMinorFails(t *testing.T) {
	dir := fleetRepo(t)
	// A list that skips a minor is refused by validation...
	branch(t, dir, "skip", map[string][2]string{
		"classes/standard.yaml": {"  version: v1.31.2\n  # Upgrades step through these, one minor version at a time.\n  kubernetesVersions: [v1.30.6, v1.31.2, v1.32.0]",
			"  version: v1.33.1\n  kubernetesVersions: [v1.30.6, v1.31.2, v1.33.1]"},
	})
	code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "skip", "--detailed-exitcode")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, stdout, stderr)
	}
	want := "error: classes/standard.yaml:10:42: spec.kubernetesVersions[2]: v1.33.1 skips a minor version after v1.31.2: an upgrade passes every minor version, so list one of each in between (e.g. v1.32.0)"
	if !strings.Contains(stdout, want) {
		t.Errorf("plan output lacks\n%s\n---\n%s", want, stdout)
	}
	// ...and a jump past what the list holds, by the planner.
	branch(t, dir, "jump", map[string][2]string{
		"classes/standard.yaml": {"  version: v1.31.2\n  # Upgrades step through these, one minor version at a time.\n  kubernetesVersions: [v1.30.6, v1.31.2, v1.32.0]",
			"  version: v1.33.1\n  kubernetesVersions: [v1.33.1]"},
	})
	code, stdout, stderr = runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "jump", "--detailed-exitcode")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, stdout, stderr)
	}
	want = "error: classes/standard.yaml:9:3: spec.version: cluster dev-1: cannot upgrade from v1.31.2 to v1.33.1: minor versions go up one at a time and no v1.32.x is listed to pass through; add one (e.g. v1.32.0) to the class's spec.kubernetesVersions, or upgrade to v1.32.x first"
	if !strings.Contains(stdout, want) {
		t.Errorf("plan output lacks\n%s\n---\n%s", want, stdout)
	}
}

func TestPlanInvalidHead(t *testing.T) {
	dir := fleetRepo(t)
	branch(t, dir, "broken", map[string][2]string{"clusters/dev-1.yaml": {"replicas: 1", "replicas: many"}})
	code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "broken", "--detailed-exitcode")
	if code != 1 || !strings.Contains(stdout, "error: clusters/dev-1.yaml:") || !strings.Contains(stdout, "No changes") {
		t.Errorf("exit %d, want 1 with the file's error and no changes\n%s%s", code, stdout, stderr)
	}
}

// TestPlanReadsStatusBranch: with a gitfleet/status branch the preview
// counts and names the machines that really run.
func TestPlanReadsStatusBranch(t *testing.T) {
	dir := fleetRepo(t)
	branch(t, dir, "bump", bumpEdits)
	gitCLI(t, dir, "checkout", "-q", "--orphan", "gitfleet/status")
	gitCLI(t, dir, "rm", "-rqf", ".")
	cs := status.ClusterStatus{Name: "dev-1", Class: "standard", Phase: "Provisioned", Machines: []status.MachineStatus{
		{Name: "dev-1-control-plane-a1", Role: "control-plane", Phase: "Running", Version: "v1.31.2", Created: time.Unix(1, 0).UTC()},
		{Name: "dev-1-md-0-b2", Role: "worker", Deployment: "md-0", Phase: "Running", Version: "v1.31.2", Created: time.Unix(1, 0).UTC()},
	}}
	data, err := status.EncodeCluster(cs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "clusters"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, status.ClusterPath("dev-1")), data, 0o644); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, dir, "add", ".")
	gitCLI(t, dir, "commit", "-qm", "status")
	gitCLI(t, dir, "checkout", "-q", "-f", "main")

	code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "bump", "--detailed-exitcode")
	if code != 2 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"machines replaced: dev-1-control-plane-a1, dev-1-md-0-b2",
		"md-0: 1 → 2 machines, 1 replaced",
		"Machines as observed on the status branch.",
		// prod-1 has no machines on the status branch: it is created.
		"control-plane: 0 → 3 machines",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("plan output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestPlanUsage(t *testing.T) {
	if code, _, stderr := runCmd(t, "plan", "--repo", "."); code != 1 || !strings.Contains(stderr, "--base and --head are required") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCmd(t, "plan", "--repo", t.TempDir(), "--base", "a", "--head", "b", "--format", "yaml"); code != 1 || !strings.Contains(stderr, "use text, markdown or json") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCmd(t, "plan", "--repo", filepath.Join(t.TempDir(), "nope"), "--base", "a", "--head", "b"); code != 1 || !strings.Contains(stderr, "--repo") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

var commitRE = regexp.MustCompile(`\([0-9a-f]{7}\)`)

func planGolden(t *testing.T, name, got string) {
	t.Helper()
	golden(t, "plan/"+name, commitRE.ReplaceAllString(got, "(COMMIT)"))
}

// A class upgrade that a pinned cluster does not take: the plan names the
// pinned cluster unchanged, with the pin as the reason, in text, Markdown
// and JSON (golden files).
func TestPlanNamesPinnedCluster(t *testing.T) {
	dir := fleetRepo(t)
	branch(t, dir, "bump", map[string][2]string{"classes/standard.yaml": {"  version: v1.31.2", "  version: v1.32.0"}})
	for _, f := range []struct{ format, file string }{{"text", "pinned.txt"}, {"markdown", "pinned.md"}, {"json", "pinned.json"}} {
		code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "bump", "-o", f.format)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", f.format, code, stderr)
		}
		if !strings.Contains(stdout, "pins spec.topology.version v1.31.2") || !strings.Contains(stdout, "prod-1") {
			t.Errorf("%s does not name prod-1 with its pin:\n%s", f.format, stdout)
		}
		planGolden(t, f.file, regexp.MustCompile(`"(base|head)": "([a-z]+) \([0-9a-f]{7}\)"`).ReplaceAllString(stdout, `"$1": "$2 (COMMIT)"`))
	}
}

// brokenDev1 is the error of a dev-1 whose control plane has "many"
// replicas, at its field's line and column.
const brokenDev1 = `clusters/dev-1.yaml:18:7: spec.topology.controlPlane.replicas: "many" is not a control-plane machine count: use an odd number >= 1 (1, 3 or 5)`

// A pull request that fixes a base that does not validate: every output
// says first that base does not validate, why (its errors, file:line:col)
// and that head is compared against an empty fleet, so that the comment
// cannot be read as "adds 2 clusters" (golden files). The exit codes are
// a good base's: the fix must be able to pass.
func TestPlanBaseDoesNotValidate(t *testing.T) {
	dir := fleetRepo(t)
	branch(t, dir, "broken", map[string][2]string{"clusters/dev-1.yaml": {"replicas: 1", "replicas: many"}})
	gitCLI(t, dir, "checkout", "-q", "-b", "fix", "broken")
	gitCLI(t, dir, "revert", "--no-edit", "HEAD")
	gitCLI(t, dir, "checkout", "-q", "main")

	for _, f := range []struct {
		format, file string
		first        string // what the output starts with after the title
	}{
		{"text", "base-invalid.txt", "warning: base broken (COMMIT) does not validate, so head is compared against an empty fleet (the status branch gitfleet/status is not in this repository: fetch it (git fetch origin gitfleet/status:gitfleet/status), or no daemon has run on this fleet yet): every cluster of head is listed as added, whether or not this change adds it.\n"},
		{"markdown", "base-invalid.md", "> [!WARNING]\n> **Base `broken (COMMIT)` does not validate, so head is compared against an empty fleet (the status branch gitfleet/status is not in this repository: fetch it (git fetch origin gitfleet/status:gitfleet/status), or no daemon has run on this fleet yet): every cluster of head is listed as added, whether or not this change adds it.**\n"},
		{"json", "base-invalid.json", `  "base": "broken (COMMIT)",` + "\n" + `  "head": "fix (COMMIT)",` + "\n" + `  "comparedWith": "empty fleet",` + "\n" + `  "notApplied": "the status branch gitfleet/status is not in this repository: fetch it (git fetch origin gitfleet/status:gitfleet/status), or no daemon has run on this fleet yet",` + "\n" + `  "baseErrors": [` + "\n"},
	} {
		code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "broken", "--head", "fix", "-o", f.format, "--detailed-exitcode")
		if code != 2 {
			t.Fatalf("%s: exit %d, want 2 (changes)\n%s%s", f.format, code, stdout, stderr)
		}
		got := commitRE.ReplaceAllString(stdout, "(COMMIT)")
		_, rest, _ := strings.Cut(got, "\n")
		if f.format != "json" {
			rest = strings.TrimPrefix(rest, "\n")
		}
		if !strings.HasPrefix(rest, f.first) {
			t.Errorf("%s does not start with\n%s---\n%s", f.format, f.first, got)
		}
		if f.format == "json" {
			var rep struct {
				ComparedWith string   `json:"comparedWith"`
				BaseErrors   []string `json:"baseErrors"`
			}
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.ComparedWith != "empty fleet" || !slices.Equal(rep.BaseErrors, []string{brokenDev1}) {
				t.Errorf("json: comparedWith %q, baseErrors %q (%v); want %q and base's error", rep.ComparedWith, rep.BaseErrors, err, "empty fleet")
			}
		} else if !strings.Contains(stdout, brokenDev1) || strings.Contains(stdout, "\nPlan: ") {
			t.Errorf("%s lacks base's error, or reads as a plan against base:\n%s", f.format, stdout)
		}
		if warned := strings.Contains(stderr, "warning: base broken does not validate (1 error); head is compared against an empty fleet (the status branch gitfleet/status is not in this repository: fetch it (git fetch origin gitfleet/status:gitfleet/status), or no daemon has run on this fleet yet)\n"); warned != (f.format != "text") {
			t.Errorf("%s: stderr %q: want the warning on stderr when stdout is not text", f.format, stderr)
		}
		planGolden(t, f.file, stdout)
	}
	if code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "broken", "--head", "fix"); code != 0 {
		t.Errorf("without --detailed-exitcode: exit %d, want 0\n%s%s", code, stdout, stderr)
	}
	// Head broken too: head's errors fail the plan.
	if code, stdout, _ := runCmd(t, "plan", "--repo", dir, "--base", "broken", "--head", "broken", "--detailed-exitcode"); code != 1 ||
		!strings.Contains(stdout, "warning: base broken") || !strings.Contains(stdout, "error: "+brokenDev1) {
		t.Errorf("broken..broken: exit %d, want 1 with the warning and head's error\n%s", code, stdout)
	}
}

// A pull request that fixes a base that does not validate, in a fleet a
// daemon runs: head is compared with the revision the daemon runs, the
// status branch's last applied commit, so the plan shows what merging
// changes (golden files): the revert alone changes nothing, the revert
// with one more worker adds that worker. Every output says against what.
func TestPlanBaseDoesNotValidateComparesWithTheAppliedRevision(t *testing.T) {
	dir := fleetRepo(t)
	good := strings.TrimSpace(gitCLI(t, dir, "rev-parse", "main"))
	w := statusWriter(t, dir)
	w.SetFleet(status.FleetStatus{LastApplied: &status.SourceCommit{Commit: good, Subject: "init"}}, status.Origin{SourceCommit: good})
	for _, c := range runningAsWritten(t, dir, good) {
		if err := w.SetCluster(c, status.Origin{SourceCommit: good}); err != nil {
			t.Fatal(err)
		}
	}
	flushStatus(t, w)
	branch(t, dir, "broken", map[string][2]string{"clusters/dev-1.yaml": {"replicas: 1", "replicas: many"}})
	gitCLI(t, dir, "checkout", "-q", "-b", "fix", "broken")
	gitCLI(t, dir, "revert", "--no-edit", "HEAD")
	gitCLI(t, dir, "checkout", "-q", "-b", "fix-and-grow", "fix")
	gitCLI(t, dir, "checkout", "-q", "main")
	branch(t, dir, "grow", map[string][2]string{"clusters/dev-1.yaml": {"replicas: 2", "replicas: 3"}})
	gitCLI(t, dir, "checkout", "-q", "fix-and-grow")
	gitCLI(t, dir, "cherry-pick", "grow")
	gitCLI(t, dir, "checkout", "-q", "main")
	hide := func(s string) string {
		return commitRE.ReplaceAllString(strings.NewReplacer(good, "APPLIED", good[:7], "APPLIED").Replace(s), "(COMMIT)")
	}

	code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "broken", "--head", "fix", "--detailed-exitcode")
	if code != 0 || !strings.Contains(stdout, "No changes: 2 clusters unchanged.") {
		t.Errorf("the revert alone: exit %d, want 0 and no changes (the daemon runs what it restores)\n%s%s", code, stdout, stderr)
	}
	planGolden(t, "base-invalid-applied-revert.txt", hide(stdout))
	for _, f := range []struct{ format, file string }{
		{"text", "base-invalid-applied.txt"}, {"markdown", "base-invalid-applied.md"}, {"json", "base-invalid-applied.json"},
	} {
		code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "broken", "--head", "fix-and-grow", "-o", f.format, "--detailed-exitcode")
		if code != 2 {
			t.Fatalf("%s: exit %d, want 2 (changes)\n%s%s", f.format, code, stdout, stderr)
		}
		if f.format == "json" {
			var rep struct {
				ComparedWith, Applied string
				Totals                planner.PreviewTotals
			}
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.ComparedWith != planner.CompareApplied || rep.Applied != good ||
				rep.Totals != (planner.PreviewTotals{Changed: 1, Created: 1}) {
				t.Errorf("json: comparedWith %q, applied %q, totals %+v (%v); want the applied revision and one worker more", rep.ComparedWith, rep.Applied, rep.Totals, err)
			}
		} else if !strings.Contains(stdout, "does not validate, so head is compared with the revision the daemon runs") || !strings.Contains(stdout, brokenDev1) {
			t.Errorf("%s does not say what head is compared with, or lacks base's error:\n%s", f.format, stdout)
		}
		if want := "head is compared against the last applied revision " + good[:7]; (f.format != "text") != strings.Contains(stderr, want) {
			t.Errorf("%s: stderr %q: want %q when stdout is not text", f.format, stderr, want)
		}
		planGolden(t, f.file, hide(stdout))
	}
}

// When the status branch names a last applied revision the plan cannot
// compare with, it says why beside the empty fleet it compares with
// instead: a commit the clone lacks (a shallow CI checkout), or one that
// does not validate either.
func TestPlanSaysWhyNotTheAppliedRevision(t *testing.T) {
	dir := fleetRepo(t)
	branch(t, dir, "broken", map[string][2]string{"clusters/dev-1.yaml": {"replicas: 1", "replicas: many"}})
	gitCLI(t, dir, "checkout", "-q", "-b", "fix", "broken")
	gitCLI(t, dir, "revert", "--no-edit", "HEAD")
	gitCLI(t, dir, "checkout", "-q", "main")
	broken := strings.TrimSpace(gitCLI(t, dir, "rev-parse", "broken"))
	const missing = "0123456789abcdef0123456789abcdef01234567"
	w := statusWriter(t, dir)
	for _, c := range []struct{ applied, why string }{
		// The branch is there, and a daemon ran, but applied nothing.
		{"", "the status branch gitfleet/status records no applied revision"},
		{missing, "the last applied commit 0123456 could not be read: "},
		{broken, "the last applied commit " + broken[:7] + " does not validate either (1 error)"},
	} {
		// A daemon whose every commit so far was rejected.
		fs := status.FleetStatus{LastRejected: &status.Rejection{SourceCommit: status.SourceCommit{Commit: broken, Subject: "x"}, Errors: []string{brokenDev1}}}
		if c.applied != "" {
			fs.LastApplied = &status.SourceCommit{Commit: c.applied, Subject: "x"}
		}
		w.SetFleet(fs, status.Origin{SourceCommit: c.applied})
		flushStatus(t, w)
		code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "broken", "--head", "fix", "-o", "json")
		var rep struct{ ComparedWith, NotApplied string }
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 {
			t.Fatalf("applied %.7s: exit %d (%v)\n%s%s", c.applied, code, err, stdout, stderr)
		}
		if rep.ComparedWith != planner.CompareEmpty || !strings.HasPrefix(rep.NotApplied, c.why) {
			t.Errorf("applied %.7s: comparedWith %q, notApplied %q; want %q and %q", c.applied, rep.ComparedWith, rep.NotApplied, planner.CompareEmpty, c.why)
		}
		if want := "head is compared against an empty fleet (" + c.why; !strings.Contains(stderr, want) {
			t.Errorf("applied %.7s: stderr %q lacks %q", c.applied, stderr, want)
		}
		_, text, _ := runCmd(t, "plan", "--repo", dir, "--base", "broken", "--head", "fix")
		if want := "compared against an empty fleet (" + c.why; !strings.Contains(text, want) {
			t.Errorf("applied %.7s: the text lacks %q:\n%s", c.applied, want, text)
		}
	}
}

// runningAsWritten is the status of every cluster of commit's fleet with
// all its machines Running as the fleet describes them (their templates'
// hashes as the planner makes them).
func runningAsWritten(t *testing.T, dir, commit string) []status.ClusterStatus {
	t.Helper()
	d := expandedAt(t, dir, commit)
	var out []status.ClusterStatus
	for _, dc := range d.Clusters {
		c := status.ClusterStatus{Name: dc.Name, Class: dc.Class, Version: dc.Version, Phase: status.ClusterProvisioned}
		for _, p := range append([]planner.Pool{dc.ControlPlane}, dc.Deployments...) {
			for i := range p.Replicas {
				m := machine(dc.Name, p.Name, "m"+itoa(i), "Running", p.Version, statusEpoch)
				m.TemplateHash = p.TemplateHash
				c.Machines = append(c.Machines, m)
			}
		}
		out = append(out, c)
	}
	return out
}

// The planner's errors point at their field's line and column, as
// validation errors do, not at line 1 of the file: a downgrade, a skipped
// minor version, a pool newer than its control plane.
func TestPlanErrorsPointAtTheirField(t *testing.T) {
	dir := fleetRepo(t)
	branch(t, dir, "downgrade", map[string][2]string{"clusters/prod-1.yaml": {"version: v1.31.2", "version: v1.30.6"}})
	branch(t, dir, "skip", map[string][2]string{"clusters/prod-1.yaml": {"version: v1.31.2", "version: v1.35.0"}})
	branch(t, dir, "pool", map[string][2]string{"clusters/dev-1.yaml": {"          replicas: 2\n", "          replicas: 2\n" + newerPool}})
	for _, c := range []struct{ head, want string }{
		{"downgrade", "clusters/prod-1.yaml:17:5: spec.topology.version: cluster prod-1: cannot downgrade from v1.31.2 to v1.30.6: Kubernetes versions never go down; set the version back to v1.31.2 or later"},
		{"skip", "clusters/prod-1.yaml:17:5: spec.topology.version: cluster prod-1: cannot upgrade from v1.31.2 to v1.35.0: minor versions go up one at a time and no v1.33.x is listed to pass through; add one (e.g. v1.33.0) to the class's spec.kubernetesVersions, or upgrade to v1.33.x first"},
		{"pool", "clusters/dev-1.yaml:32:3: spec.version: v1.32.0 is newer than the cluster's control plane (v1.31.2); workers are never newer than the control plane: set v1.31.2 or older, or upgrade the cluster first"},
	} {
		code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", c.head)
		if code != 1 || !strings.Contains(stdout, "\nerror: "+c.want+"\n") {
			t.Errorf("%s: exit %d, want 1 and\nerror: %s\n---\n%s%s", c.head, code, c.want, stdout, stderr)
		}
		_, js, _ := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", c.head, "-o", "json")
		var rep struct{ Errors []string }
		if err := json.Unmarshal([]byte(js), &rep); err != nil || !slices.Contains(rep.Errors, c.want) {
			t.Errorf("%s: json errors %q (%v), want %q", c.head, rep.Errors, err, c.want)
		}
	}
}

// newerPool is a standalone pool whose version is newer than its
// cluster's control plane: the schemas accept it, the planner does not.
const newerPool = `---
apiVersion: gitfleet.io/v1alpha1
kind: MachineDeployment
metadata:
  name: dev-1-gpu
spec:
  clusterName: dev-1
  replicas: 1
  version: v1.32.0
  template:
    provider: local
`

// A plan during a halted rollout reads the halt from the status branch:
// a pull request that only grows prod-1's workers, while class standard's
// rollout is halted on dev-1 and prod-1 still runs its older revision,
// says the rollout is halted (at which revision, started by which commit)
// and that the halt stays, and plans prod-1's one new worker alone: no
// machine of the halted class is "replaced at once, in no wave".
func TestPlanReadsHaltedRollout(t *testing.T) {
	dir := fleetRepo(t)
	good, rev := rolloutStatus(t, dir, 1)
	branch(t, dir, "grow", map[string][2]string{"clusters/prod-1.yaml": {"replicas: 3\n    variables", "replicas: 4\n    variables"}})

	code, stdout, stderr := runCmd(t, "plan", "--repo", dir, "--base", "main", "--head", "grow")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"Class standard's rollout of revision " + rev + " (started by " + good[:7] + ": init) is halted: 1 of maxFailures 1 clusters failed (dev-1).",
		"so the halt stays", "Plan: 0 clusters added, 1 changed, 0 removed; 0 machines replaced, 1 created, 0 deleted; 1 cluster unchanged.",
		"~ prod-1 (changed)", "waits: the rollout of class standard is halted at revision " + rev, "md-0: 3 → 4 machines\n",
		"Class standard's rollout stays halted at revision " + rev,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "dev-1 (changed)") || strings.Contains(stdout, "At once, in no wave: dev-1") {
		t.Errorf("the halted dev-1 reads as changed:\n%s", stdout)
	}
}

// rolloutStatus writes, for the fleet at dir's main, a status branch that
// shows class standard's rollout of main's revision with dev-1 failed on
// it under maxFailures (halted when that is 1) and prod-1 still on an
// older revision, waiting for it; it returns main's commit and the
// revision.
func rolloutStatus(t *testing.T, dir string, maxFailures int) (good, rev string) {
	t.Helper()
	good = strings.TrimSpace(gitCLI(t, dir, "rev-parse", "main"))
	rev = classRevisionAt(t, dir, good, "standard")
	w := statusWriter(t, dir)
	w.SetFleet(status.FleetStatus{LastApplied: &status.SourceCommit{Commit: good, Subject: "init"},
		Rollouts: []status.ClassRollout{{Class: "standard", Revision: rev, MaxFailures: maxFailures, Halted: maxFailures <= 1, Failed: []string{"dev-1"},
			CurrentWave: "prod", Change: &status.SourceCommit{Commit: good, Subject: "init"}}}}, status.Origin{SourceCommit: good})
	for _, c := range runningAsWritten(t, dir, good) {
		switch c.Name {
		case "dev-1":
			c.Phase = "Blocked"
			c.Rollout = &status.Rollout{ClassRevision: rev, Wave: "dev", State: planner.AdmissionFailed, Reason: "machine dev-1-md-0-m0: Failed"}
		case "prod-1":
			// Admitted to an older revision; the rollout's waits.
			c.Rollout = &status.Rollout{ClassRevision: "0123456789", Wave: "prod", State: planner.RolloutWaiting, PendingRevision: rev}
			for i := range c.Machines {
				c.Machines[i].TemplateHash = "older"
			}
		}
		if err := w.SetCluster(c, status.Origin{SourceCommit: good}); err != nil {
			t.Fatal(err)
		}
	}
	flushStatus(t, w)
	return good, rev
}

// classRevisionAt is class's revision at commit, as the planner computes it.
func classRevisionAt(t *testing.T, dir, commit, class string) string {
	t.Helper()
	return expandedAt(t, dir, commit).Class(class).Revision
}

// expandedAt is the fleet at commit as the planner expands it.
func expandedAt(t *testing.T, dir, commit string) *planner.Desired {
	t.Helper()
	repo, err := sources.Open(t.Context(), sources.Options{Location: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	rev, err := repo.Revision(t.Context(), commit)
	if err != nil || rev.Rejected() {
		t.Fatalf("%s: %v %v", commit, err, rev.Err)
	}
	d, _ := planner.Expand(rev.Fleet)
	return d
}
