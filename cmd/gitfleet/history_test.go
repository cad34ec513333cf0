package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/reconciler/history"
	"github.com/gitfleet/gitfleet/reconciler/status"
)

// scriptedFleet is a fleet repository whose commits have fixed authors and
// dates, so their hashes and the history output are the same on every run.
type scriptedFleet struct {
	t   *testing.T
	dir string
}

// newScriptedFleet copies what gitfleet init writes into a new repository
// and commits it as Ada at 09:00.
func newScriptedFleet(t *testing.T) *scriptedFleet {
	t.Helper()
	tmpl := fleetRepo(t)
	f := &scriptedFleet{t: t, dir: filepath.Join(t.TempDir(), "fleet")}
	if err := os.CopyFS(f.dir, os.DirFS(tmpl)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(f.dir, ".git")); err != nil {
		t.Fatal(err)
	}
	f.git("", time.Time{}, "init", "-q", "-b", "main")
	f.commit("Ada Tester <ada@example.com>", "09:00", "Initial fleet: class standard, clusters dev-1 and prod-1", nil)
	return f
}

func (f *scriptedFleet) git(who string, at time.Time, args ...string) string {
	f.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = f.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if who != "" {
		name, email, _ := strings.Cut(strings.TrimSuffix(who, ">"), " <")
		date := at.Format(time.RFC3339)
		cmd.Env = append(cmd.Env, "GIT_AUTHOR_NAME="+name, "GIT_AUTHOR_EMAIL="+email, "GIT_AUTHOR_DATE="+date,
			"GIT_COMMITTER_NAME="+name, "GIT_COMMITTER_EMAIL="+email, "GIT_COMMITTER_DATE="+date)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		f.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// at is hh:mm on the day of the script.
func at(hhmm string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", "2026-11-20 "+hhmm)
	if err != nil {
		panic(err)
	}
	return t
}

// commit edits files (path → {old, new}: the first old becomes new; an
// empty old writes a new file) and commits everything; it returns the
// commit hash.
func (f *scriptedFleet) commit(who, hhmm, msg string, edits map[string][2]string) string {
	f.t.Helper()
	for path, e := range edits {
		p := filepath.Join(f.dir, path)
		if e[0] == "" {
			if err := os.WriteFile(p, []byte(e[1]), 0o644); err != nil {
				f.t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			f.t.Fatal(err)
		}
		if !strings.Contains(string(data), e[0]) {
			f.t.Fatalf("%s does not contain %q", path, e[0])
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(data), e[0], e[1], 1)), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	f.git(who, at(hhmm), "add", "-A")
	f.git(who, at(hhmm), "commit", "-q", "--allow-empty", "-m", msg)
	return f.git(who, at(hhmm), "rev-parse", "HEAD")
}

// statusAt writes status commits dated by *clock.
func statusAt(t *testing.T, dir string, clock *time.Time) *status.Writer {
	t.Helper()
	repo, err := openGit(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := status.NewWriter(t.Context(), status.Options{Repo: repo, Interval: time.Hour, Logger: zerolog.Nop(),
		Now: func() time.Time { return *clock }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// remediated is c with worker r2d9z replaced by k9m2x (11:41), and the
// delete of r2d9z noted.
func remediated(c status.ClusterStatus) status.ClusterStatus {
	for i, m := range c.Machines {
		if m.Name == "dev-1-md-0-r2d9z" {
			c.Machines[i] = machine("dev-1", "md-0", "k9m2x", "Running", m.Version, at("11:41"))
			c.Machines[i].Cause = "md-0 has 3 of 4 machines"
		}
	}
	slices.SortFunc(c.Machines, func(a, b status.MachineStatus) int { return strings.Compare(a.Name, b.Name) })
	c.Deleted = append(c.Deleted, status.DeletedMachine{Name: "dev-1-md-0-r2d9z",
		Cause: "remediate: no heartbeat for 40s (Ready Unknown, timeoutSeconds 30, dev-1-workers)", Deleted: at("11:45")})
	return c
}

// upgraded is dev-1 during the class upgrade: the control plane replaced by
// a v1.32.0 machine (running when done).
func upgraded(done bool) status.ClusterStatus {
	c := dev1(4, 4, at("10:01"))
	c.Version, c.ControlPlane.Version, c.ControlPlane.Updated = "v1.32.0", "v1.32.0", 1
	m := machine("dev-1", "", "h8s2j", "Provisioning", "v1.32.0", at("13:01"))
	old := &c.Machines[0]
	if done {
		m.Phase = "Running"
		c.Deleted = append(c.Deleted, status.DeletedMachine{Name: old.Name,
			Cause: "rolling update of the control plane to v1.32.0: replaced by a new machine that is ready", Deleted: at("13:05")})
		c.Machines = append(c.Machines[1:], m)
		return c
	}
	old.Phase = "Running"
	c.ControlPlane.Updated, c.ControlPlane.Replicas = 0, 2
	c.Phase = status.ClusterProvisioning
	c.Conditions = []status.Condition{{Type: status.ConditionRollingOut, Status: status.ConditionTrue, Reason: "ControlPlaneFirst"}, {Type: status.ConditionReady, Status: status.ConditionTrue}}
	c.Machines = append(c.Machines, m)
	return c
}

func TestHistoryShowsSpecCommitsAndTheirOutcomes(t *testing.T) {
	f := newScriptedFleet(t)
	c1 := f.git("", time.Time{}, "rev-parse", "HEAD")
	clock := at("09:01")
	w := statusAt(t, f.dir, &clock)
	step := func(hhmm string, c1o status.Origin, clusters ...status.ClusterStatus) {
		t.Helper()
		clock = at(hhmm)
		for _, c := range clusters {
			w.SetCluster(c, c1o)
		}
		flushStatus(t, w)
	}
	o1 := status.Origin{SourceCommit: c1, PlanID: "plan-1"}
	w.SetFleet(status.FleetStatus{LastApplied: &status.SourceCommit{Commit: c1, Subject: "Initial fleet"}}, o1)
	step("09:01", o1, dev1(2, 0, at("09:01")), prod1())
	step("09:04", o1, dev1(2, 2, at("09:01")))

	c2 := f.commit("Bob Builder <bob@example.com>", "10:00", "Scale dev-1 workers to 4",
		map[string][2]string{"clusters/dev-1.yaml": {"replicas: 2", "replicas: 4"}})
	o2 := status.Origin{SourceCommit: c2, PlanID: "plan-2"}
	step("10:01", o2, dev1(4, 2, at("10:01")))
	step("10:03", o2, dev1(4, 4, at("10:01")))

	// An unsigned commit the daemon refused: never applied, so the next
	// commit's change is counted from 4, not from its 6.
	unsigned := f.commit("Mallory <mallory@example.com>", "10:10", "Scale dev-1 workers to 6",
		map[string][2]string{"clusters/dev-1.yaml": {"replicas: 4", "replicas: 6"}})
	clock = at("10:11")
	w.SetFleet(status.FleetStatus{LastApplied: &status.SourceCommit{Commit: c2, Subject: "Scale dev-1 workers to 4"},
		LastRejected: &status.Rejection{SourceCommit: status.SourceCommit{Commit: unsigned, Subject: "Scale dev-1 workers to 6"},
			Errors: []string{"commit " + unsigned[:7] + ": commit is not signed"}}}, status.Origin{SourceCommit: unsigned})
	flushStatus(t, w)
	c3 := f.commit("Bob Builder <bob@example.com>", "10:20", "Scale dev-1 workers to 5",
		map[string][2]string{"clusters/dev-1.yaml": {"replicas: 6", "replicas: 5"}})
	clock = at("10:21")
	w.SetFleet(status.FleetStatus{LastApplied: &status.SourceCommit{Commit: c3, Subject: "Scale dev-1 workers to 5"}}, status.Origin{SourceCommit: c3})
	flushStatus(t, w)

	f.commit("Ada Tester <ada@example.com>", "11:00", "Try a bigger prod",
		map[string][2]string{"clusters/prod-1.yaml": {"          replicas: 3", "          replicas: many"}})
	c4 := f.commit("Ada Tester <ada@example.com>", "11:30", "Revert the bigger prod",
		map[string][2]string{"clusters/prod-1.yaml": {"          replicas: many", "          replicas: 3"}})
	// dev-1 keeps living while commits that do not touch it land.
	sick := dev1(4, 4, at("10:01"))
	sick.Machines[2].Unhealthy, sick.Machines[2].Message = true, "no heartbeat for 40s"
	sick.Machines[2].Conditions = []status.Condition{{Type: status.ConditionHealthy, Status: status.ConditionFalse,
		Reason: "HeartbeatMissing", Message: "no heartbeat for 40s", LastTransitionTime: at("11:39")}}
	o4 := status.Origin{SourceCommit: c4, PlanID: "plan-4"}
	step("11:40", o4, sick)
	// Its health check remediates it: deleted, and replaced.
	const why = "remediate: no heartbeat for 40s (Ready Unknown, timeoutSeconds 30, dev-1-workers)"
	sick.Machines[2].Phase, sick.Machines[2].Cause = "Deleting", why
	repl := machine("dev-1", "md-0", "k9m2x", "Provisioning", "v1.31.2", at("11:41"))
	repl.Cause = "md-0 has 3 of 4 machines"
	sick.Machines = append(sick.Machines, repl)
	step("11:41", o4, sick)
	healed := remediated(dev1(4, 4, at("10:01")))
	step("11:45", o4, healed)
	c5 := f.commit("Carol Ops <carol@example.com>", "13:00", "Upgrade the standard class to v1.32.0",
		map[string][2]string{"classes/standard.yaml": {"  version: v1.31.2", "  version: v1.32.0"}})
	o5 := status.Origin{SourceCommit: c5, PlanID: "plan-5"}
	step("13:01", o5, remediated(upgraded(false)))
	step("13:06", o5, remediated(upgraded(true)))
	f.commit("Ada Tester <ada@example.com>", "14:00", "Explain the fleet", map[string][2]string{"README.md": {"", "# Our fleet\n"}})

	code, stdout, stderr := runCmd(t, "history", "dev-1", "--repo", f.dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	golden(t, "history/dev-1.txt", stdout)
	for _, want := range []string{
		"  Bob Builder <bob@example.com>\n    Scale dev-1 workers to 4\n  spec.topology.workers.machineDeployments[md-0].replicas: 2 → 4\n",
		"Scale dev-1 workers to 6\n  refused by the daemon, never applied:\n    commit " + unsigned[:7] + ": commit is not signed\n  it would have changed:\n    spec.topology.workers.machineDeployments[md-0].replicas: 4 → 6\n",
		"Scale dev-1 workers to 5\n  spec.topology.workers.machineDeployments[md-0].replicas: 4 → 5\n",
		"    machine dev-1-md-0-r2d9z Running → Deleting, because: " + why + "\n",
		"  class standard: spec.version: v1.31.2 → v1.32.0\n",
		"    machine dev-1-md-0-b7c3v created: Provisioning v1.31.2\n",
		"    machine dev-1-control-plane-x7k2p removed (was Running), because: rolling update of the control plane to v1.32.0: replaced by a new machine that is ready\n",
		"  2026-11-20 11:40:00 +0000  (applied with " + c4[:7] + ")\n    machine dev-1-md-0-r2d9z unhealthy: HeartbeatMissing: no heartbeat for 40s\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("history dev-1 lacks %q", want)
		}
	}
	for _, absent := range []string{"Try a bigger prod", "Explain the fleet", "prod-1:", "cluster prod-1"} {
		if strings.Contains(stdout, absent) {
			t.Errorf("history dev-1 shows %q, which did not change dev-1", absent)
		}
	}

	_, stdout, _ = runCmd(t, "history", "dev-1", "--repo", f.dir, "-o", "json")
	golden(t, "history/dev-1.json", stdout)
	var log history.Log
	if err := json.Unmarshal([]byte(stdout), &log); err != nil {
		t.Fatalf("history -o json: %v", err)
	}
	if len(log.Commits) == 0 || log.Commits[0].Subject != "Upgrade the standard class to v1.32.0" {
		t.Errorf("history -o json: newest commit is not the class upgrade: %+v", log.Commits)
	}

	_, stdout, _ = runCmd(t, "history", "--repo", f.dir, "--machine", "dev-1-md-0-r2d9z")
	golden(t, "history/machine.txt", stdout)
	if !strings.Contains(stdout, "Deleting     unhealthy because: "+why) || !strings.Contains(stdout, "gone") {
		t.Errorf("the machine's life does not say it was remediated and gone:\n%s", stdout)
	}

	_, stdout, _ = runCmd(t, "history", "--repo", f.dir)
	golden(t, "history/fleet.txt", stdout)
	if !strings.Contains(stdout, "Try a bigger prod\n  refused, it does not validate:\n    clusters/prod-1.yaml:") {
		t.Errorf("fleet history does not show the rejected commit with its error:\n%s", stdout)
	}
	if !strings.Contains(stdout, "Revert the bigger prod\n  applied, with no change to what runs\n  it clears the refusal of ") {
		t.Errorf("fleet history does not show who cleared the refusal:\n%s", stdout)
	}

	if code, _, stderr := runCmd(t, "history", "nope", "--repo", f.dir); code != 1 || !strings.Contains(stderr, `cluster "nope" is in no commit`) {
		t.Errorf("unknown cluster: exit %d, %q", code, stderr)
	}
}

// Without a status branch history still tells the spec story; --branch
// reads another branch than HEAD's.
func TestHistoryWithoutStatusAndOfAnotherBranch(t *testing.T) {
	f := newScriptedFleet(t)
	f.git("", time.Time{}, "checkout", "-q", "-b", "bigger")
	f.commit("Bob Builder <bob@example.com>", "10:00", "Three control plane machines for dev-1",
		map[string][2]string{"clusters/dev-1.yaml": {"      replicas: 1", "      replicas: 3"}})
	f.git("", time.Time{}, "checkout", "-q", "main")

	_, stdout, stderr := runCmd(t, "history", "dev-1", "--repo", f.dir)
	if !strings.Contains(stdout, "Initial fleet") || strings.Contains(stdout, "Three control plane") || strings.Contains(stdout, "status ") {
		t.Errorf("history of main without status:\n%s%s", stdout, stderr)
	}
	_, stdout, stderr = runCmd(t, "history", "dev-1", "--repo", f.dir, "--branch", "bigger")
	if !strings.Contains(stdout, "Three control plane machines for dev-1\n  spec.topology.controlPlane.replicas: 1 → 3\n") {
		t.Errorf("history --branch bigger:\n%s%s", stdout, stderr)
	}
	if code, _, stderr := runCmd(t, "history", "--repo", f.dir, "--branch", "nope"); code != 1 || !strings.Contains(stderr, "--branch nope: no such branch") {
		t.Errorf("unknown branch: exit %d, %q", code, stderr)
	}
}

// TestHistoryOfNoFleet: run in a repository that holds no fleet, history
// says so in one line and fails, instead of listing every commit as refused.
func TestHistoryOfNoFleet(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=A", "-c", "user.email=a@example.com", "commit", "-qm", "notes"}} {
		if args[0] == "add" {
			if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a fleet\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	code, stdout, stderr := runCmd(t, "history", "--repo", dir)
	if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, "no commit of HEAD holds a fleet gitfleet accepts (1 refused") || !strings.Contains(stderr, "gitfleet init DIR") {
		t.Errorf("history of a repository with no fleet: exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
}

// BenchmarkHistory100Commits: history of one cluster over 100 spec
// commits, each scaling dev-1; files are parsed once per blob hash.
func BenchmarkHistory100Commits(b *testing.B) {
	const commits = 100
	dir := filepath.Join(b.TempDir(), "fleet")
	var out, errb bytes.Buffer
	if code := run(b.Context(), []string{"init", dir}, &cmdEnv{stdout: &out, stderr: &errb}); code != 0 {
		b.Fatalf("init: %s", errb.String())
	}
	path := filepath.Join(dir, "clusters", "dev-1.yaml")
	for i := range commits {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		data = regexp.MustCompile(`(?m)^          replicas: \d+$`).ReplaceAll(data, fmt.Appendf(nil, "          replicas: %d", 3+i%7))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("git", "commit", "-qam", fmt.Sprintf("scale %d", i))
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@x", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@x")
		if o, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, o)
		}
	}
	b.ResetTimer()
	for range b.N {
		out.Reset()
		if code := run(b.Context(), []string{"history", "dev-1", "--repo", dir}, &cmdEnv{stdout: &out, stderr: &errb}); code != 0 {
			b.Fatalf("history: %s", errb.String())
		}
	}
	b.StopTimer()
	if n := strings.Count(out.String(), "commit "); n < commits {
		b.Fatalf("history shows %d commits, want at least %d", n, commits)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*(commits+1)), "ms/spec-commit")
}
