package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitfleet/gitfleet/reconciler/status"
)

// demoLines are the shell lines of the README's demo, in order, without
// comment-only lines.
func demoLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "## A minute with the demo fleet")
	if !ok {
		t.Fatal("README has no demo section")
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatal("the demo section has no sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if s := strings.TrimSpace(l); s != "" && !strings.HasPrefix(s, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestREADMEDemo runs the README's demo as written (make demo-check): the
// layout of make run (bin/gitfleet, .gitfleet/demo, .gitfleet/data), gitfleet
// up on the demo fleet, then each line in bash, checking after each what
// its comment promises; at the end dev-1 was upgraded before prod-1 began.
func TestREADMEDemo(t *testing.T) {
	if os.Getenv("DEMO_CHECK") == "" {
		t.Skip("the README demo takes a few minutes with real machines: make demo-check runs it")
	}
	root := t.TempDir()
	bin := filepath.Join(root, "bin", "gitfleet")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	demo, data := filepath.Join(root, ".gitfleet", "demo"), filepath.Join(root, ".gitfleet", "data")
	if out, err := exec.Command(bin, "init", demo).CombinedOutput(); err != nil {
		t.Fatalf("gitfleet init: %v\n%s", err, out)
	}
	logFile := filepath.Join(root, "up.log")
	lf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	up := exec.Command(bin, "up", "--repo", demo, "--data-dir", data, "--listen", "")
	up.Stdout, up.Stderr = lf, lf
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	t.Cleanup(func() {
		_ = up.Process.Kill()
		_ = up.Wait()
		if out, err := exec.Command(bin, "node", "stop", "--data-dir", data).CombinedOutput(); err != nil {
			t.Errorf("gitfleet node stop: %v\n%s", err, out)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			lines := strings.Split(string(b), "\n")
			t.Logf("last lines of gitfleet up:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})

	snap := func() *status.Snapshot {
		g, err := git.PlainOpen(demo)
		if err != nil {
			return nil
		}
		s, err := status.Read(g, "gitfleet/status")
		if err != nil {
			return nil
		}
		return s
	}
	waitFor := func(what string, within time.Duration, ok func(*status.Snapshot) bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			if s := snap(); s != nil && ok(s) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %v: %s", within, what)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	provisioned := func(s *status.Snapshot, name string, workers int, version string) bool {
		c := s.Cluster(name)
		if c == nil || c.Phase != status.ClusterProvisioned || len(c.Deployments) == 0 || c.Version != version {
			return false
		}
		d := c.Deployments[0]
		running := 0
		for _, m := range c.Machines {
			if m.Phase == "Running" && !m.Unhealthy && m.Version == version {
				running++
			}
		}
		return d.Ready == workers && d.Updated == workers && d.Replicas.Replicas == workers &&
			running == len(c.Machines) && running == c.ControlPlane.Desired+workers
	}
	waitFor("both clusters Provisioned", 2*time.Minute, func(s *status.Snapshot) bool {
		return provisioned(s, "dev-1", 2, "v1.31.2") && provisioned(s, "prod-1", 3, "v1.31.2")
	})

	env := append(os.Environ(), "GIT_AUTHOR_NAME=Demo", "GIT_AUTHOR_EMAIL=demo@example.com",
		"GIT_COMMITTER_NAME=Demo", "GIT_COMMITTER_EMAIL=demo@example.com", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	cwd := root
	killed := regexp.MustCompile(`sent SIGKILL to (\S+) of prod-1`)
	plans := 0
	for _, line := range demoLines(t) {
		if strings.HasPrefix(line, "cd ") {
			dir := filepath.Join(cwd, strings.TrimSpace(strings.TrimPrefix(line, "cd ")))
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			cwd = dir
			continue
		}
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
		cmd.Dir, cmd.Env = cwd, env
		b, err := cmd.CombinedOutput()
		out := string(b)
		if err != nil {
			t.Fatalf("%s\n%v\n%s", line, err, out)
		}
		switch {
		case strings.Contains(line, `"dev-1: four workers"`):
			waitFor("dev-1 has four Running workers", 2*time.Minute, func(s *status.Snapshot) bool {
				return provisioned(s, "dev-1", 4, "v1.31.2")
			})
		case strings.Contains(line, "node kill"):
			m := killed.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("%s: did not kill a prod-1 worker:\n%s", line, out)
			}
			waitFor("the killed worker "+m[1]+" is replaced and prod-1 has three Running workers again", time.Minute, func(s *status.Snapshot) bool {
				c := s.Cluster("prod-1")
				return c != nil && provisioned(s, "prod-1", 3, "v1.31.2") &&
					!slices.ContainsFunc(c.Machines, func(x status.MachineStatus) bool { return x.Name == m[1] })
			})
		case strings.Contains(line, "gitfleet plan"):
			plans++
			want := []string{"~ dev-1 (changed)", "= prod-1 (unchanged)", "it pins spec.topology.version v1.31.2"}
			if plans == 2 {
				want = []string{"~ dev-1 (changed)", "~ prod-1 (changed)", "wave dev (dev-1; maxConcurrent 100%: all at once), then wave prod (prod-1; maxConcurrent 1: all at once)"}
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("plan %d lacks %q:\n%s", plans, w, out)
				}
			}
		case strings.Contains(line, "history prod-1"):
			if !strings.Contains(out, "prod-1: follow the class version") || !strings.Contains(out, "standard: v1.32.0") {
				t.Errorf("history prod-1 lacks the two commits that upgrade it:\n%s", out)
			}
		case strings.Contains(line, "history --machine"):
			if !strings.HasPrefix(out, "machine prod-1-md-0-") {
				t.Errorf("history --machine:\n%s", out)
			}
		}
		t.Logf("$ %s\n%s", line, out)
	}
	if plans != 2 {
		t.Fatalf("the demo ran gitfleet plan %d times, want 2", plans)
	}

	waitFor("both clusters run v1.32.0", 6*time.Minute, func(s *status.Snapshot) bool {
		return provisioned(s, "dev-1", 4, "v1.32.0") && provisioned(s, "prod-1", 3, "v1.32.0")
	})
	// dev-1 rolled first: no status commit shows a prod-1 machine at
	// v1.32.0 while dev-1 is not all at v1.32.0 and Provisioned, and the
	// daemon's log has every dev-1 machine Running before prod-1's first
	// v1.32.0 create (local machines start in milliseconds: one status
	// commit often holds the whole rollout).
	g, err := git.PlainOpen(demo)
	if err != nil {
		t.Fatal(err)
	}
	log, err := status.Log(g, "gitfleet/status")
	if err != nil {
		t.Fatal(err)
	}
	started := func(s *status.Snapshot, name string) bool {
		c := s.Cluster(name)
		return c != nil && slices.ContainsFunc(c.Machines, func(m status.MachineStatus) bool { return m.Version == "v1.32.0" })
	}
	for _, sc := range log {
		s, err := status.ReadAt(g.Storer, plumbing.NewHash(sc.Hash))
		if err != nil {
			t.Fatal(err)
		}
		if started(s, "prod-1") && !provisioned(s, "dev-1", 4, "v1.32.0") {
			t.Errorf("status %.7s: prod-1 has v1.32.0 machines while dev-1 is not done: the waves did not hold", sc.Hash)
		}
	}
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	lastDevRunning, firstProdCreate, devCreates := -1, -1, 0
	for i, l := range strings.Split(string(b), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(l), &e) != nil {
			continue
		}
		reason, _ := e["reason"].(string)
		switch {
		case e["cluster"] == "dev-1" && e["op"] == "create" && strings.Contains(reason, "v1.32.0"):
			devCreates++
		case e["cluster"] == "dev-1" && e["message"] == "machine phase" && e["to"] == "Running" && devCreates > 0:
			lastDevRunning = i
		case e["cluster"] == "prod-1" && e["op"] == "create" && strings.Contains(reason, "v1.32.0") && firstProdCreate < 0:
			firstProdCreate = i
		}
	}
	if devCreates == 0 || lastDevRunning < 0 || firstProdCreate < lastDevRunning {
		t.Errorf("daemon log: %d dev-1 v1.32.0 creates, last dev-1 machine Running at line %d, first prod-1 v1.32.0 create at line %d: want dev-1 done first",
			devCreates, lastDevRunning, firstProdCreate)
	}
	s := snap()
	dev, prod := s.Cluster("dev-1").Rollout, s.Cluster("prod-1").Rollout
	if dev == nil || prod == nil || prod.AdmittedAt.Before(dev.AdmittedAt) || dev.Wave != "dev" || prod.Wave != "prod" {
		t.Errorf("rollouts: dev-1 %+v, prod-1 %+v; want dev-1 admitted in wave dev, then prod-1 in wave prod", dev, prod)
	}
}
