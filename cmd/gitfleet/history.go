package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/sources"
)

func init() {
	register(&command{
		name:    "history",
		usage:   "history [CLUSTER] [--machine NAME] [--repo DIR] [--branch B]",
		summary: "the audit trail from Git: spec commits (author, date, what changed) and the status they led to",
		run:     runHistory,
	})
}

func runHistory(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("history", env)
	repoDir := fs.String("repo", ".", "fleet repository (a local clone)")
	branch := fs.String("branch", "", "spec branch (default: the branch HEAD is on)")
	statusBranch := fs.String("status-branch", "", "status branch (default: gitfleet.yaml's spec.statusBranch, else "+v1alpha1.DefaultStatusBranch+")")
	machine := fs.String("machine", "", "the life of one machine: when it came and went, and why")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *machine != "" {
		g, err := openGit(*repoDir)
		if err != nil {
			return err
		}
		if *statusBranch == "" {
			*statusBranch = statusBranchOf(g)
		}
		return machineHistory(env.stdout, g, *statusBranch, *machine)
	}
	if len(pos) > 1 {
		return &exitError{code: exitUsage, err: fmt.Errorf("one cluster at most, got %q", pos)}
	}
	cluster := ""
	if len(pos) == 1 {
		cluster = pos[0]
	}
	g, err := openGit(*repoDir)
	if err != nil {
		return err
	}
	tip, err := specTip(g, *branch)
	if err != nil {
		return err
	}
	if *statusBranch == "" {
		*statusBranch = statusBranchOf(g)
	}
	slog, err := statusLog(g, *statusBranch)
	if err != nil {
		return err
	}
	src, err := sources.Open(ctx, sources.Options{Location: *repoDir})
	if err != nil {
		return fmt.Errorf("open %s: %w", *repoDir, err)
	}
	defer src.Close()
	entries, chainPos, known, err := specHistory(ctx, g, src, tip, cluster)
	if err != nil {
		return err
	}
	if len(entries) > 0 && !slices.ContainsFunc(entries, func(e entry) bool { return e.rejected == nil }) {
		// Nothing ever validated: a folder that is no fleet repository,
		// or one whose every commit was refused. Thousands of "rejected"
		// lines would not say so.
		newest, on := entries[len(entries)-1], *branch
		if on == "" {
			on = "HEAD"
		}
		return fmt.Errorf("no commit of %s holds a fleet gitfleet accepts (%d refused; the newest, %.7s: %s); is %s a fleet repository? gitfleet init DIR makes one",
			on, len(entries), newest.commit.Hash.String(), strings.Join(newest.rejected, "; "), *repoDir)
	}
	attach(entries, chainPos, slog)
	if cluster != "" && !known {
		return fmt.Errorf("cluster %q is in no commit of the branch", cluster)
	}
	differ := status.NewDiffer(g)
	for i := len(entries) - 1; i >= 0; i-- { // newest first, as git log
		if err := writeEntry(env.stdout, entries[i], differ, cluster); err != nil {
			return err
		}
	}
	if len(entries) == 0 {
		fmt.Fprintln(env.stdout, "no commit changed", orFleet(cluster))
	}
	return nil
}

func orFleet(cluster string) string {
	if cluster == "" {
		return "the fleet"
	}
	return "cluster " + cluster + " or its class"
}

// specTip is the commit history starts from: --branch, else HEAD.
func specTip(g *git.Repository, branch string) (plumbing.Hash, error) {
	if branch == "" {
		h, err := g.Head()
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read HEAD: %w (name the branch with --branch)", err)
		}
		return h.Hash(), nil
	}
	for _, n := range []plumbing.ReferenceName{plumbing.NewBranchReferenceName(branch), plumbing.NewRemoteReferenceName("origin", branch)} {
		if r, err := g.Reference(n, true); err == nil {
			return r.Hash(), nil
		}
	}
	h, err := g.ResolveRevision(plumbing.Revision(branch))
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("--branch %s: no such branch or revision", branch)
	}
	return *h, nil
}

// statusLog returns the status commits oldest first; none when the
// daemon has written no status yet.
func statusLog(g *git.Repository, branch string) ([]status.Commit, error) {
	log, err := status.Log(g, branch)
	if errors.Is(err, status.ErrNoStatus) {
		return nil, nil
	}
	slices.Reverse(log)
	return log, err
}

// outcome is a status commit shown under a spec commit; via names the
// later spec commit it was applied with, when that one is not shown
// (it changed nothing history shows, like an edit of another cluster).
type outcome struct {
	status.Commit
	via string
}

// attach gives each entry the status commits whose Gitfleet-Source-Commit
// is the entry's commit or a later commit of the chain before the next
// entry: a cluster keeps converging while unrelated commits land.
func attach(entries []entry, chainPos map[string]int, log []status.Commit) {
	for _, sc := range log {
		for _, src := range sc.SourceCommits {
			p, ok := chainPos[src]
			if !ok {
				continue // a commit of another branch
			}
			i := sort.Search(len(entries), func(i int) bool { return entries[i].pos > p }) - 1
			for i >= 0 && entries[i].rejected != nil {
				i-- // never applied
			}
			if i < 0 {
				continue
			}
			e := &entries[i]
			if n := len(e.outcomes); n > 0 && e.outcomes[n-1].Hash == sc.Hash {
				continue
			}
			o := outcome{Commit: sc}
			if src != e.commit.Hash.String() {
				o.via = src
			}
			e.outcomes = append(e.outcomes, o)
		}
	}
}

// entry is one spec commit that changed what history shows.
type entry struct {
	commit   *object.Commit
	pos      int // in the first-parent chain, oldest 0
	changes  []string
	rejected []string // validation errors of a rejected commit
	outcomes []outcome
}

// specHistory walks the first-parent chain from tip, oldest first, and keeps
// the commits that changed the cluster (its Cluster, class, standalone
// deployments and health checks), or any fleet object when cluster is "".
// It reports whether the cluster was seen in any commit.
func specHistory(ctx context.Context, g *git.Repository, src *sources.Repo, tip plumbing.Hash, cluster string) ([]entry, map[string]int, bool, error) {
	var chain []*object.Commit
	for h := tip; !h.IsZero(); {
		c, err := g.CommitObject(h)
		if err != nil {
			return nil, nil, false, fmt.Errorf("read commit %s: %w", h, err)
		}
		chain = append(chain, c)
		h = plumbing.ZeroHash
		if len(c.ParentHashes) > 0 {
			h = c.ParentHashes[0]
		}
	}
	slices.Reverse(chain)
	chainPos := make(map[string]int, len(chain))
	for i, c := range chain {
		chainPos[c.Hash.String()] = i
	}
	var out []entry
	var prev *v1alpha1.Fleet // the last fleet that validated
	var prevTree plumbing.Hash
	known := cluster == ""
	for i, c := range chain {
		if c.TreeHash == prevTree {
			continue
		}
		prevTree = c.TreeHash
		rev, err := src.Revision(ctx, c.Hash.String())
		if err != nil {
			return nil, nil, false, err
		}
		if rev.Fleet == nil {
			if errs := rejectedFor(rev, prev, cluster); len(errs) > 0 {
				out = append(out, entry{commit: c, pos: i, rejected: errs})
			}
			continue
		}
		if cluster != "" && rev.Fleet.Cluster(cluster) != nil {
			known = true
		}
		if ch := fleetChanges(prev, rev.Fleet, cluster); len(ch) > 0 {
			out = append(out, entry{commit: c, pos: i, changes: ch})
		}
		prev = rev.Fleet
	}
	return out, chainPos, known, nil
}

// rejectedFor lists a rejected revision's errors, only those in the
// cluster's or its class's files when cluster is set.
func rejectedFor(rev *sources.Revision, last *v1alpha1.Fleet, cluster string) []string {
	var files []string
	if cluster != "" && last != nil {
		if c := last.Cluster(cluster); c != nil {
			files = append(files, c.Source.Path)
			if cc := last.Class(c.Spec.Topology.Class); cc != nil {
				files = append(files, cc.Source.Path)
			}
		}
	}
	var out []string
	for _, e := range rev.Errors {
		if cluster == "" || slices.Contains(files, e.Path) {
			out = append(out, e.Error())
		}
	}
	if len(rev.Errors) == 0 && rev.Err != nil && cluster == "" {
		out = append(out, rev.Err.Error())
	}
	return out
}

// fleetChanges lists what changed from a to b (nil: an empty fleet): of
// one cluster and its class, or of every object.
func fleetChanges(a, b *v1alpha1.Fleet, cluster string) []string {
	ao, bo := fleetObjects(a), fleetObjects(b)
	keys := map[string]bool{}
	for k := range ao {
		keys[k] = true
	}
	for k := range bo {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(mapKeys(keys)) {
		x, y := ao[k], bo[k]
		if cluster != "" && !x.concerns(cluster) && !y.concerns(cluster) {
			continue
		}
		prefix := k + ": "
		if cluster != "" && k == "cluster "+cluster {
			prefix = "" // the cluster's own fields need no name
		}
		switch {
		case x.value == nil:
			out = append(out, k+" created")
		case y.value == nil:
			out = append(out, k+" deleted")
		default:
			var lines []string
			diffValues("", x.value, y.value, &lines)
			for _, l := range lines {
				out = append(out, prefix+l)
			}
		}
	}
	return out
}

// fleetObject is one object as generic JSON, with the clusters it concerns.
type fleetObject struct {
	value    any
	clusters []string // for a class, the clusters using it
}

func (o fleetObject) concerns(cluster string) bool { return slices.Contains(o.clusters, cluster) }

// fleetObjects keys every object of f by "kind name" (cluster dev-1,
// class standard, machinedeployment x, healthcheck y).
func fleetObjects(f *v1alpha1.Fleet) map[string]fleetObject {
	out := map[string]fleetObject{}
	if f == nil {
		return out
	}
	for _, c := range f.Clusters {
		out["cluster "+c.Metadata.Name] = fleetObject{value: asJSON(c), clusters: []string{c.Metadata.Name}}
	}
	for _, cc := range f.Classes {
		o := fleetObject{value: asJSON(cc)}
		for _, c := range f.Clusters {
			if c.Spec.Topology.Class == cc.Metadata.Name {
				o.clusters = append(o.clusters, c.Metadata.Name)
			}
		}
		out["class "+cc.Metadata.Name] = o
	}
	for _, md := range f.MachineDeployments {
		out["machinedeployment "+md.Metadata.Name] = fleetObject{value: asJSON(md), clusters: []string{md.Spec.ClusterName}}
	}
	for _, hc := range f.HealthChecks {
		out["healthcheck "+hc.Metadata.Name] = fleetObject{value: asJSON(hc), clusters: []string{hc.Spec.ClusterName}}
	}
	return out
}

// asJSON turns a typed object into maps, slices and scalars, without its
// apiVersion, kind and name, which never differ for one key.
func asJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out map[string]any
	if json.Unmarshal(b, &out) != nil {
		return string(b)
	}
	delete(out, "apiVersion")
	delete(out, "kind")
	if m, ok := out["metadata"].(map[string]any); ok {
		delete(m, "name")
		if len(m) == 0 {
			delete(out, "metadata")
		}
	}
	return out
}

// diffValues appends "path: old → new" for every leaf that differs. Lists
// of objects with a name (or class) are matched by it, so a change reads
// machineDeployments[md-0].replicas rather than an index.
func diffValues(path string, a, b any, out *[]string) {
	if reflect.DeepEqual(a, b) {
		return
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(mapKeys(keys)) {
			diffValues(join(path, k), am[k], bm[k], out)
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if key := sharedListKey(al, bl); aok && bok && key != "" {
		index := func(l []any) (map[string]any, []string) {
			m, order := map[string]any{}, []string{}
			for _, x := range l {
				n := fmt.Sprint(x.(map[string]any)[key])
				m[n] = x
				order = append(order, n)
			}
			return m, order
		}
		ai, aorder := index(al)
		bi, border := index(bl)
		seen := map[string]bool{}
		for _, n := range append(aorder, border...) {
			if !seen[n] {
				seen[n] = true
				diffValues(path+"["+n+"]", ai[n], bi[n], out)
			}
		}
		return
	}
	*out = append(*out, fmt.Sprintf("%s: %s → %s", path, show(a), show(b)))
}

// sharedListKey is the key naming the elements of both lists (either may
// be empty), or "".
func sharedListKey(a, b []any) string {
	ka, kb := listKey(a), listKey(b)
	switch {
	case len(a) == 0:
		return kb
	case len(b) == 0 || ka == kb:
		return ka
	}
	return ""
}

// listKey is the field that names each element of l ("name" or "class"),
// or "" when the elements are not all objects with one.
func listKey(l []any) string {
	for _, key := range []string{"name", "class"} {
		ok := len(l) > 0
		for _, x := range l {
			m, isMap := x.(map[string]any)
			if _, has := m[key]; !isMap || !has {
				ok = false
				break
			}
		}
		if ok {
			return key
		}
	}
	return ""
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// show prints a value compactly: strings bare, the rest as JSON.
func show(v any) string {
	switch x := v.(type) {
	case nil:
		return "(none)"
	case string:
		return x
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

const historyTime = "2006-01-02 15:04:05 -0700"

// writeEntry prints one spec commit and the status commits it led to.
func writeEntry(w io.Writer, e entry, differ *status.Differ, cluster string) error {
	c := e.commit
	subject, _, _ := strings.Cut(c.Message, "\n")
	fmt.Fprintf(w, "commit %.7s  %s  %s <%s>\n", c.Hash.String(), c.Author.When.Format(historyTime), c.Author.Name, c.Author.Email)
	fmt.Fprintf(w, "    %s\n", subject)
	if len(e.rejected) > 0 {
		fmt.Fprintln(w, "  rejected:")
		for _, r := range e.rejected {
			fmt.Fprintf(w, "    %s\n", r)
		}
	}
	for _, ch := range e.changes {
		fmt.Fprintf(w, "  %s\n", ch)
	}
	for _, s := range e.outcomes {
		changes, err := differ.Changes(s.Commit, cluster)
		if err != nil {
			return err
		}
		if len(changes) == 0 {
			continue
		}
		via := ""
		if s.via != "" {
			via = fmt.Sprintf("  (applied with %.7s)", s.via)
		}
		fmt.Fprintf(w, "  status %.7s  %s%s\n", s.Hash, s.Time.Format(historyTime), via)
		for _, cc := range changes {
			for _, t := range cc.Transitions {
				if cluster == "" {
					t = cc.Cluster + ": " + t
				}
				fmt.Fprintf(w, "    %s\n", t)
			}
		}
	}
	fmt.Fprintln(w)
	return nil
}

// machineHistory prints the life of one machine from the status branch:
// each change with its time, and why (the planner's cause, the provider's
// reason), and the spec commit (author, subject) that led to it.
func machineHistory(w io.Writer, g *git.Repository, branch, machine string) error {
	events, err := status.MachineHistory(g, branch, machine)
	if err != nil {
		return err
	}
	if len(events) == 0 {
		return fmt.Errorf("machine %q is in no commit of %s", machine, branch)
	}
	fmt.Fprintf(w, "machine %s of cluster %s\n", machine, events[0].Cluster)
	cause := ""
	for _, e := range events {
		line := fmt.Sprintf("%s  %-12s", e.Time.UTC().Format("2006-01-02 15:04:05"), "gone")
		if d := e.Deleted; d != nil && d.Cause != "" && d.Cause != cause {
			line += " because: " + d.Cause
		}
		if m := e.Machine; m != nil {
			line = fmt.Sprintf("%s  %-12s", e.Time.UTC().Format("2006-01-02 15:04:05"), m.Phase)
			if m.Unhealthy {
				line += " unhealthy"
			}
			if m.Reason != "" {
				line += " " + m.Reason
				if m.Message != "" {
					line += ": " + m.Message
				}
			}
			if m.Cause != "" && m.Cause != cause {
				line += " because: " + m.Cause
				cause = m.Cause
			}
		}
		for _, t := range e.Triggers {
			line += " [" + specCommitLine(g, t) + "]"
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	return nil
}

// specCommitLine names a spec commit: short hash, author and subject when
// the repository has it.
func specCommitLine(g *git.Repository, hash string) string {
	short := hash
	if len(short) > 7 {
		short = short[:7]
	}
	c, err := g.CommitObject(plumbing.NewHash(hash))
	if err != nil {
		return "spec " + short
	}
	subject, _, _ := strings.Cut(c.Message, "\n")
	return fmt.Sprintf("spec %s by %s: %s", short, c.Author.Name, subject)
}
