package main

import (
	"bytes"
	"cmp"
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
	"github.com/go-git/go-git/v5/plumbing"
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
	showConds := fs.String("show-conditions", "", "list every condition (type, status, reason, since, message) of all clusters (all) or of one (CLUSTER)")
	grouping := fs.Bool("grouping", true, "show healthy Running machines of a pool with the same version as one row")
	staleAfter := fs.Duration("stale-after", status.StaleAfter, "warn when the status commit is older than this: the daemon rewrites it at least every --status-refresh while it runs")
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
	var fleetConds []status.FleetCondition
	if len(pos) == 1 {
		d := snap.DescribeCluster(pos[0])
		if d == nil {
			// A cluster removed from the fleet has no status file any
			// more, but its life is in the branch's history.
			return fmt.Errorf("cluster %q has no status on %s (clusters there: %s); if it was removed from the fleet, its history says when, why and by whom: gitfleet history --cluster %s",
				pos[0], *branch, clusterNames(snap), pos[0])
		}
		out, clusters, fleetConds = d, []status.ClusterStatus{d.ClusterStatus}, d.FleetConditions
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
	if err := writeStatusAge(env.stdout, repo, snap, *branch, clock, *staleAfter); err != nil {
		return err
	}
	v := treeView{now: clock, grouping: *grouping, conditions: *showConds}
	if err := v.write(env.stdout, clusters); err != nil {
		return err
	}
	if len(pos) == 1 {
		return v.fleetConditions(env.stdout, "Fleet conditions concerning "+pos[0]+" (fleet.yaml):", fleetConds)
	}
	return v.fleetConditions(env.stdout, "Fleet conditions (fleet.yaml):", snap.Fleet.Conditions)
}

// fleetConditions lists the daemon's conditions in fleet.yaml under heading:
// all of them for the fleet, or those that concern one cluster
// (status.Snapshot.FleetConditionsOf), a problem of the daemon's that
// holds it up, such as a bootstrap error about it or a provider its
// machines use that no worker answers for. Nothing when there are none.
func (v treeView) fleetConditions(w io.Writer, heading string, conds []status.FleetCondition) error {
	if len(conds) == 0 {
		return nil
	}
	plain := make([]status.Condition, len(conds))
	for i, c := range conds {
		plain[i] = c.Condition
	}
	var b bytes.Buffer
	if err := v.conditionTable(&b, heading, plain); err != nil {
		return err
	}
	writeTrimmed(w, &b)
	return nil
}

// conditionTable writes heading, then conds as a table: type, status,
// reason, since, message.
func (v treeView) conditionTable(b *bytes.Buffer, heading string, conds []status.Condition) error {
	b.WriteString("\n" + heading + "\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tSTATUS\tREASON\tSINCE\tMESSAGE")
	for _, c := range conds {
		row(tw, c.Type, c.Status, c.Reason, age(c.LastTransitionTime, v.now), c.Message)
	}
	return tw.Flush()
}

// writeTrimmed writes b's lines to w without the padding tabwriter leaves
// at their ends.
func writeTrimmed(w io.Writer, b *bytes.Buffer) {
	for _, l := range strings.SplitAfter(b.String(), "\n") {
		if l != "" {
			fmt.Fprintln(w, strings.TrimRight(l, " \n"))
		}
	}
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
	// A bare repository (the daemon's clone of a remote) first: looking
	// for a .git folder upwards would miss it.
	r, err := git.PlainOpen(dir)
	if err != nil {
		r, err = git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	}
	if err != nil {
		return nil, fmt.Errorf("--repo %s: %w", dir, err)
	}
	return r, nil
}

func writeFleetHeader(w io.Writer, s *status.Snapshot, branch string) {
	f := s.Fleet
	fmt.Fprintf(w, "Fleet: %d %s%s, %d %s%s\n", f.Clusters, pluralNoun(f.Clusters, "cluster", "clusters"), countList(f.ClustersByPhase),
		f.Machines, pluralNoun(f.Machines, "machine", "machines"), countList(f.MachinesByPhase))
	if a := f.LastApplied; a != nil {
		fmt.Fprintf(w, "Last applied: %.7s %s\n", a.Commit, a.Subject)
	}
	if r := f.LastRejected; r != nil {
		fmt.Fprintf(w, "Last rejected: %.7s %s\n", r.Commit, r.Subject)
		for _, e := range r.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

// writeStatusAge names the status commit read, when it was written, and
// warns when that is older than staleAfter: the daemon rewrites a quiet
// fleet's status (refreshedAt) while it runs.
func writeStatusAge(w io.Writer, repo *git.Repository, s *status.Snapshot, branch string, now time.Time, staleAfter time.Duration) error {
	c, err := repo.CommitObject(plumbing.NewHash(s.Commit))
	if err != nil {
		return fmt.Errorf("read status commit %.7s: %w", s.Commit, err)
	}
	at := c.Committer.When
	fmt.Fprintf(w, "Status: %.7s on %s, written %s (%s ago)\n", s.Commit, branch, at.UTC().Format("2006-01-02 15:04:05 MST"), age(at, now))
	if staleAfter > 0 && now.Sub(at) > staleAfter {
		fmt.Fprintf(w, "Warning: the status is older than %s. A running daemon rewrites it at least every %s (--status-refresh), so it may be stopped or unable to commit; "+
			"in a clone, git fetch origin %s gets the newest.\n", staleAfter, status.DefaultRefresh, branch)
	}
	fmt.Fprintln(w)
	return nil
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

// treeView prints clusters as clusterctl describe does: the cluster, its
// control plane and workers, and their machines, with phase, ready and
// updated counts, version, age and why.
type treeView struct {
	now        time.Time
	grouping   bool   // one row for a pool's alike healthy machines
	conditions string // "all", a cluster name, or "" for none
}

func (v treeView) write(w io.Writer, clusters []status.ClusterStatus) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPHASE\tREADY\tUPDATED\tVERSION\tAGE\tMESSAGE")
	for _, c := range clusters {
		v.cluster(tw, c)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range clusters {
		if v.conditions == "all" || v.conditions == c.Name {
			if err := v.conditionTable(&b, "Conditions of "+c.Name+":", c.Conditions); err != nil {
				return err
			}
		}
	}
	writeTrimmed(w, &b)
	return nil
}

// count is "ready/total": total is the desired count, or the machines
// that exist when a surge has more.
func count(n, desired, existing int) string {
	return fmt.Sprintf("%d/%d", n, max(desired, existing))
}

func (v treeView) cluster(w io.Writer, c status.ClusterStatus) {
	var ready, desired, existing, updated int
	for _, r := range append([]status.Replicas{c.ControlPlane}, deploymentReplicas(c)...) {
		ready, desired, existing, updated = ready+r.Ready, desired+r.Desired, existing+r.Replicas, updated+r.Updated
	}
	created := c.Created
	if created.IsZero() { // a status written before clusters had a creation time
		for _, m := range c.Machines {
			if !m.Created.IsZero() && (created.IsZero() || m.Created.Before(created)) {
				created = m.Created
			}
		}
	}
	phase := c.Phase
	if c.Paused {
		phase += " (paused)"
	}
	// A cluster a halted rollout holds says so once, in its rollout.
	msg := conditionMessage(c.Conditions, v.now, c.HaltHold() != nil)
	if r := rolloutMessage(c, v.now); r != "" {
		msg = strings.TrimPrefix(msg+"; "+r, "; ")
	}
	row(w, "Cluster/"+c.Name, phase, count(ready, desired, existing), fmt.Sprintf("%d/%d", updated, desired), c.Version, age(created, v.now), msg)

	type group struct {
		title    string
		replicas *status.Replicas
		machines []status.MachineStatus
	}
	cp := c.ControlPlane
	control := &group{title: "ControlPlane", replicas: &cp}
	var pools []*group
	byName := map[string]*group{}
	for _, d := range c.Deployments {
		g := &group{title: "MachineDeployment/" + d.Name, replicas: &d.Replicas}
		pools = append(pools, g)
		byName[d.Name] = g
	}
	for _, m := range c.Machines {
		switch {
		case m.Role == "control-plane":
			control.machines = append(control.machines, m)
		case byName[m.Deployment] != nil:
			byName[m.Deployment].machines = append(byName[m.Deployment].machines, m)
		default: // a pool no longer in the spec, still draining
			g := &group{title: "MachineDeployment/" + m.Deployment}
			byName[m.Deployment] = g
			pools = append(pools, g)
			g.machines = append(g.machines, m)
		}
	}
	writeGroup := func(prefix string, last bool, g *group) {
		branch, indent := "├─", "│ "
		if last {
			branch, indent = "└─", "  "
		}
		var r [5]string
		if x := g.replicas; x != nil {
			r = [5]string{"", count(x.Ready, x.Desired, x.Replicas), fmt.Sprintf("%d/%d", x.Updated, x.Desired), x.Version,
				joinMessages(autoscaleMessage(x.Autoscale, v.now), backoffMessage(x.Backoff, v.now))}
		}
		row(w, prefix+branch+g.title, r[0], r[1], r[2], r[3], "", r[4])
		rows := v.machineRows(g.machines)
		for i, mr := range rows {
			mb := "├─"
			if i == len(rows)-1 {
				mb = "└─"
			}
			row(w, prefix+indent+mb+mr[0], mr[1], "", "", mr[2], mr[3], mr[4])
		}
	}
	writeGroup("", len(pools) == 0, control)
	if len(pools) > 0 {
		row(w, "└─Workers", "", "", "", "", "", "")
		for i, g := range pools {
			writeGroup("  ", i == len(pools)-1, g)
		}
	}
}

// machineRows are a pool's machines, one row each, except that with
// grouping the healthy Running ones of one version share a row ("3
// Machines..."); an unhealthy or failed machine always has its own row,
// flagged in PHASE, so colour is never the only sign.
func (v treeView) machineRows(ms []status.MachineStatus) [][5]string {
	var rows [][5]string
	alike := map[string][]status.MachineStatus{}
	var order []string
	for _, m := range ms {
		if v.grouping && m.Phase == "Running" && !m.Unhealthy && m.Reason == "" {
			if _, ok := alike[m.Version]; !ok {
				order = append(order, m.Version)
			}
			alike[m.Version] = append(alike[m.Version], m)
			continue
		}
		phase, msg := m.Phase, m.Message
		if m.Reason != "" {
			msg = strings.TrimSuffix(m.Reason+": "+msg, ": ")
		}
		if m.Unhealthy {
			phase += " (unhealthy)"
			for _, cd := range m.Conditions {
				if cd.Type == status.ConditionHealthy && cd.Status != status.ConditionTrue && !cd.LastTransitionTime.IsZero() {
					msg = strings.TrimSuffix(msg+"; since "+age(cd.LastTransitionTime, v.now), "; ")
				}
			}
		}
		if m.Phase == "Failed" {
			phase = "Failed (!)"
		}
		rows = append(rows, [5]string{"Machine/" + m.Name, phase, m.Version, age(m.Created, v.now), strings.TrimPrefix(msg, "; ")})
	}
	var grouped [][5]string
	for _, ver := range order {
		g := alike[ver]
		if len(g) == 1 {
			m := g[0]
			grouped = append(grouped, [5]string{"Machine/" + m.Name, m.Phase, m.Version, age(m.Created, v.now), ""})
			continue
		}
		oldest := g[0].Created
		names := make([]string, len(g))
		for i, m := range g {
			names[i] = m.Name
			if m.Created.Before(oldest) {
				oldest = m.Created
			}
		}
		grouped = append(grouped, [5]string{fmt.Sprintf("%d Machines...", len(g)), "Running", ver, age(oldest, v.now), "See " + strings.Join(names, ", ")})
	}
	return append(grouped, rows...)
}

// rolloutMessage says where a cluster stands in its class's rollout, unless
// it is done. A cluster its class's halted rollout holds is not waiting for
// a wave: it says that the halt holds it, on which revision, and, in the
// RolloutHalted condition's words (the halt, what releases it), why.
func rolloutMessage(c status.ClusterStatus, now time.Time) string {
	r := c.Rollout
	switch {
	case r == nil || r.State == "Done":
		return ""
	case c.HaltHold() != nil:
		cd := c.HaltHold()
		since := ""
		if !cd.LastTransitionTime.IsZero() {
			since = " (" + age(cd.LastTransitionTime, now) + ")"
		}
		return fmt.Sprintf("rollout: %s: %s%s", r.HeldByHalt(), cd.Message, since)
	case r.State == "Waiting":
		return fmt.Sprintf("rollout: class revision %s waits for wave %s (runs %s)", r.PendingRevision, r.Wave, cmp.Or(r.ClassRevision, "none"))
	case r.State == "Paused":
		return fmt.Sprintf("rollout: paused, passed over by class revision %s (runs %s)", r.PendingRevision, cmp.Or(r.ClassRevision, "none"))
	case r.Reason != "":
		return fmt.Sprintf("rollout: %s on class revision %s (%s)", r.State, r.ClassRevision, r.Reason)
	}
	return fmt.Sprintf("rollout: %s to class revision %s", r.State, r.ClassRevision)
}

// autoscaleMessage says that the daemon sizes a pool, within what, and who
// asked for its size last.
func autoscaleMessage(a *status.Autoscale, now time.Time) string {
	if a == nil {
		return ""
	}
	msg := fmt.Sprintf("autoscaled %d..%d", a.Min, a.Max)
	if a.By != "" {
		msg += fmt.Sprintf(", size asked by %s (%s)", a.By, age(a.At, now))
	} else {
		msg += ", at its minimum until asked"
	}
	return msg
}

func joinMessages(ms ...string) string {
	var out []string
	for _, m := range ms {
		if m != "" {
			out = append(out, m)
		}
	}
	return strings.Join(out, "; ")
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

// notable are the conditions that say something holds a cluster back or
// is at work on it; describe shows them even while Ready is True.
var notable = []string{"Deleting", "Paused", "Blocked", "RolloutHalted", "RemediationBlocked", "BackingOff", "WaitingForWave", "RollingOut", "Remediating"}

// conditionMessage says why a cluster is not Ready and what holds or
// works on it: "WaitingForWave: wave prod waits for wave dev (3m)". The
// Ready condition's reason is not repeated. halted: the cluster's rollout
// message says the RolloutHalted condition's words, which are left out
// here (and Ready's, when that is its reason).
func conditionMessage(cs []status.Condition, now time.Time, halted bool) string {
	var parts []string
	shown := map[string]bool{}
	since := func(c status.Condition) string {
		if c.LastTransitionTime.IsZero() {
			return ""
		}
		return " (" + age(c.LastTransitionTime, now) + ")"
	}
	if halted {
		shown[status.ConditionRolloutHalted] = true
	}
	for _, c := range cs {
		if c.Type == status.ConditionReady && c.Status != status.ConditionTrue && !(halted && c.Reason == status.ConditionRolloutHalted) {
			s := "Not Ready"
			if c.Reason != "" {
				s = c.Reason
				shown[c.Reason] = true
			}
			if c.Message != "" {
				s += ": " + c.Message
			}
			parts = append(parts, s+since(c))
		}
	}
	for _, c := range cs {
		switch {
		case c.Type == status.ConditionReady || shown[c.Type]:
		case c.Status == status.ConditionTrue && slices.Contains(notable, c.Type),
			c.Status == status.ConditionFalse && !slices.Contains(notable, c.Type):
			s := c.Type
			if c.Status == status.ConditionFalse {
				s += " False"
				if c.Reason != "" {
					s += ", " + c.Reason
				}
			}
			if c.Message != "" {
				s += ": " + c.Message
			}
			parts = append(parts, s+since(c))
		}
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
