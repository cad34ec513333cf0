package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	git "github.com/go-git/go-git/v5"
	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

func init() {
	register(&command{
		name:    "describe",
		usage:   "describe [CLUSTER] [--repo DIR] [-o text|yaml|json]",
		summary: "show cluster → control plane/deployments → machines, from the status branch",
		run:     runDescribe,
	})
}

// errNoStatus is what describe and history say when the daemon has written
// nothing yet.
func errNoStatus(branch string) error {
	return fmt.Errorf("no status yet: is the daemon running against this repo? (no branch %s; after a clone, run git fetch origin %s)", branch, branch)
}

func runDescribe(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("describe", env)
	repoDir := fs.String("repo", ".", "fleet repository (a local clone)")
	branch := fs.String("status-branch", "", "status branch (default: gitfleet.yaml's spec.statusBranch, else "+v1alpha1.DefaultStatusBranch+")")
	output := fs.String("o", "text", "output format: text, yaml or json")
	fs.StringVar(output, "format", "text", "same as -o")
	// The time ages are counted to, RFC 3339: for golden tests, so not a flag.
	now := os.Getenv("GITFLEET_DESCRIBE_NOW")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return &exitError{code: exitUsage, err: fmt.Errorf("one cluster at most, got %q", pos)}
	}
	if *output != "text" && *output != "yaml" && *output != "json" {
		return &exitError{code: exitUsage, err: fmt.Errorf("-o %q: use text, yaml or json", *output)}
	}
	clock := time.Now()
	if now != "" {
		if clock, err = time.Parse(time.RFC3339, now); err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("$GITFLEET_DESCRIBE_NOW: %w", err)}
		}
	}
	repo, err := openGit(*repoDir)
	if err != nil {
		return err
	}
	if *branch == "" {
		*branch = status.BranchOf(repo)
	}
	snap, err := status.Read(repo, *branch)
	if errors.Is(err, status.ErrNoStatus) {
		return errNoStatus(*branch)
	}
	if err != nil {
		return err
	}
	var out any = snap
	clusters := snap.Clusters
	if len(pos) == 1 {
		c := snap.Cluster(pos[0])
		if c == nil {
			return fmt.Errorf("cluster %q has no status on %s (clusters there: %s)", pos[0], *branch, clusterNames(snap))
		}
		out, clusters = c, []status.ClusterStatus{*c}
	}
	switch *output {
	case "json":
		e := json.NewEncoder(env.stdout)
		e.SetIndent("", "  ")
		return e.Encode(out)
	case "yaml":
		e := yaml.NewEncoder(env.stdout)
		e.SetIndent(2)
		if err := e.Encode(out); err != nil {
			return err
		}
		return e.Close()
	}
	if len(pos) == 0 {
		writeFleetHeader(env.stdout, snap, *branch)
	}
	return writeTree(env.stdout, clusters, clock)
}

func clusterNames(s *status.Snapshot) string {
	if len(s.Clusters) == 0 {
		return "none"
	}
	names := make([]string, len(s.Clusters))
	for i, c := range s.Clusters {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// openGit opens the repository at dir or one of its parents, work tree or
// bare.
func openGit(dir string) (*git.Repository, error) {
	r, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return nil, fmt.Errorf("--repo %s: %w", dir, err)
	}
	return r, nil
}

func writeFleetHeader(w io.Writer, s *status.Snapshot, branch string) {
	f := s.Fleet
	fmt.Fprintf(w, "Fleet: %d clusters%s, %d machines%s\n", f.Clusters, countList(f.ClustersByPhase), f.Machines, countList(f.MachinesByPhase))
	if a := f.LastApplied; a != nil {
		fmt.Fprintf(w, "Last applied: %.7s %s\n", a.Commit, a.Subject)
	}
	if r := f.LastRejected; r != nil {
		fmt.Fprintf(w, "Last rejected: %.7s %s\n", r.Commit, r.Subject)
		for _, e := range r.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	fmt.Fprintf(w, "Status: %.7s on %s\n\n", s.Commit, branch)
}

// countList formats {"Running": 4, "Failed": 1} as " (1 Failed, 4 Running)".
func countList(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(mapKeys(m)) {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// writeTree prints clusters as clusterctl describe does: the cluster, its
// control plane and worker pools, and their machines, with phase, ready and
// updated counts, version and age.
func writeTree(w io.Writer, clusters []status.ClusterStatus, now time.Time) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPHASE\tREADY\tUPDATED\tVERSION\tAGE\tMESSAGE")
	for _, c := range clusters {
		writeCluster(tw, c, now)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range strings.SplitAfter(b.String(), "\n") {
		if l != "" {
			fmt.Fprintln(w, strings.TrimRight(l, " \n"))
		}
	}
	return nil
}

func writeCluster(w io.Writer, c status.ClusterStatus, now time.Time) {
	var ready, desired, updated int
	var oldest time.Time
	for _, r := range append([]status.Replicas{c.ControlPlane}, deploymentReplicas(c)...) {
		ready, desired, updated = ready+r.Ready, desired+r.Desired, updated+r.Updated
	}
	for _, m := range c.Machines {
		if !m.Created.IsZero() && (oldest.IsZero() || m.Created.Before(oldest)) {
			oldest = m.Created
		}
	}
	phase := c.Phase
	if c.Paused {
		phase += " (paused)"
	}
	msg := conditionMessage(c.Conditions)
	if r := rolloutMessage(c.Rollout); r != "" {
		msg = strings.TrimPrefix(msg+"; "+r, "; ")
	}
	row(w, "Cluster/"+c.Name, phase, fmt.Sprintf("%d/%d", ready, desired), fmt.Sprintf("%d/%d", updated, desired), c.Version, age(oldest, now), msg)

	type group struct {
		title    string
		replicas *status.Replicas
		machines []status.MachineStatus
	}
	cp := c.ControlPlane
	groups := []*group{{title: "ControlPlane", replicas: &cp}}
	byName := map[string]*group{}
	for _, d := range c.Deployments {
		g := &group{title: "MachineDeployment/" + d.Name, replicas: &d.Replicas}
		groups = append(groups, g)
		byName[d.Name] = g
	}
	for _, m := range c.Machines {
		switch {
		case m.Role == "control-plane":
			groups[0].machines = append(groups[0].machines, m)
		case byName[m.Deployment] != nil:
			byName[m.Deployment].machines = append(byName[m.Deployment].machines, m)
		default: // a pool no longer in the spec, still draining
			g := &group{title: "MachineDeployment/" + m.Deployment}
			byName[m.Deployment] = g
			groups = append(groups, g)
			g.machines = append(g.machines, m)
		}
	}
	for gi, g := range groups {
		branch, indent := "├─", "│ "
		if gi == len(groups)-1 {
			branch, indent = "└─", "  "
		}
		var r [5]string
		if g.replicas != nil {
			x := g.replicas
			r = [5]string{"", fmt.Sprintf("%d/%d", x.Ready, x.Desired), fmt.Sprintf("%d/%d", x.Updated, x.Desired), x.Version, backoffMessage(x.Backoff, now)}
		}
		row(w, branch+g.title, r[0], r[1], r[2], r[3], "", r[4])
		for mi, m := range g.machines {
			mb := "├─"
			if mi == len(g.machines)-1 {
				mb = "└─"
			}
			msg := m.Message
			if m.Unhealthy {
				msg = strings.TrimSuffix("unhealthy: "+msg, ": ")
			}
			row(w, indent+mb+"Machine/"+m.Name, m.Phase, "", "", m.Version, age(m.Created, now), msg)
		}
	}
}

// rolloutMessage says where a cluster stands in its class's rollout, unless
// it is done.
func rolloutMessage(r *status.Rollout) string {
	switch {
	case r == nil || r.State == "Done":
		return ""
	case r.State == "Waiting":
		return fmt.Sprintf("rollout: class revision %s waits for wave %s (runs %s)", r.PendingRevision, r.Wave, r.ClassRevision)
	case r.Reason != "":
		return fmt.Sprintf("rollout: %s on class revision %s (%s)", r.State, r.ClassRevision, r.Reason)
	}
	return fmt.Sprintf("rollout: %s to class revision %s", r.State, r.ClassRevision)
}

// backoffMessage says that a pool's creates fail and when it tries again.
func backoffMessage(b *status.Backoff, now time.Time) string {
	if b == nil {
		return ""
	}
	next := "now"
	if b.NextRetry.After(now) {
		next = "in " + age(now, b.NextRetry)
	}
	return fmt.Sprintf("backoff: %d creates failed, next try %s; last: %s", b.Failures, next, b.LastFailure)
}

func deploymentReplicas(c status.ClusterStatus) []status.Replicas {
	out := make([]status.Replicas, len(c.Deployments))
	for i, d := range c.Deployments {
		out[i] = d.Replicas
	}
	return out
}

func row(w io.Writer, cols ...string) {
	fmt.Fprintln(w, strings.Join(cols, "\t"))
}

// conditionMessage lists the conditions that are not True: "Ready:
// WaitingForWorkers (2 of 3 machines)".
func conditionMessage(cs []status.Condition) string {
	var parts []string
	for _, c := range cs {
		if c.Status == status.ConditionTrue {
			continue
		}
		s := c.Type
		if c.Reason != "" {
			s += ": " + c.Reason
		}
		if c.Message != "" {
			s += " (" + c.Message + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// age is how long ago t was, as kubectl prints it: 45s, 12m, 5h, 3d.
func age(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
