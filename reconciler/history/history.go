// Package history is the audit trail read from Git alone: the spec commits
// of a fleet repository (who changed what, field by field, and which were
// refused and why) joined with the status commits the daemon wrote for
// them, and the life of one machine (when it came and went, and why).
//
// It reads; it never writes. The daemon's side of the contract — what a
// status commit holds and its Gitfleet-Source-Commit trailers — is in
// package status.
package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/sources"
)

// Options select what Read shows.
type Options struct {
	// Cluster limits the trail to one cluster and its class, standalone
	// MachineDeployments and health checks; "" is the whole fleet.
	Cluster string
	// Branch is the spec branch (or any revision) the trail ends at; ""
	// is HEAD.
	Branch string
	// StatusBranch is the daemon's status branch; "" reads it from
	// gitfleet.yaml at HEAD (status.BranchOf).
	StatusBranch string
}

// Log is the audit trail, newest commit first, as git log.
type Log struct {
	Cluster string   `json:"cluster,omitempty"`
	Commits []Commit `json:"commits"`
}

// Commit is one spec commit that changed what the trail shows.
type Commit struct {
	Commit  string    `json:"commit"`
	Author  string    `json:"author"`
	Email   string    `json:"email"`
	Time    time.Time `json:"time"`
	Subject string    `json:"subject"`
	// Changes are the fields it changed, against the last commit that was
	// applied (refused commits never count as a base).
	Changes []planner.FieldChange `json:"changes,omitempty"`
	// Refused is set when the commit was never applied.
	Refused *Refusal `json:"refused,omitempty"`
	// Clears are the refused commits of the trail since the last applied
	// one, whose refusal this applied commit ends: the daemon runs it and
	// clears lastRejected. Such a commit is shown even when it changes
	// nothing (a revert of the refused commit).
	Clears []SpecRef `json:"clears,omitempty"`
	// Status are the status commits it led to.
	Status []StatusCommit `json:"status,omitempty"`
}

// Ways a commit is refused.
const (
	// RefusedValidation: the commit does not validate (read here, again).
	RefusedValidation = "validation"
	// RefusedDaemon: the daemon refused it (a signature it does not
	// trust, a rule it enforces), as its status branch recorded.
	RefusedDaemon = "daemon"
)

// Refusal says why a commit was not applied.
type Refusal struct {
	By      string   `json:"by"`
	Reasons []string `json:"reasons"`
}

// StatusCommit is one status commit and what it changed.
type StatusCommit struct {
	Commit string    `json:"commit"`
	Time   time.Time `json:"time"`
	// AppliedWith names the later spec commit the status was written for
	// when that one is not in the trail (it changed nothing shown, like an
	// edit of another cluster).
	AppliedWith string                 `json:"appliedWith,omitempty"`
	Clusters    []status.ClusterChange `json:"clusters"`
	// Fleet is what it changed of fleet.yaml that the trail follows: the
	// commit the daemon applied when that cleared a refusal.
	Fleet []string `json:"fleet,omitempty"`
}

// ErrNotFound is what Read and Machine answer (wrapped, with the name)
// for a cluster or a machine that no commit holds.
var ErrNotFound = errors.New("in no commit")

// Read builds the trail of repo (g and src open the same repository).
func Read(ctx context.Context, g *git.Repository, src *sources.Repo, o Options) (*Log, error) {
	tip, err := Tip(g, o.Branch)
	if err != nil {
		return nil, err
	}
	if o.StatusBranch == "" {
		o.StatusBranch = status.BranchOf(g)
	}
	slog, err := status.Log(g, o.StatusBranch)
	if errors.Is(err, status.ErrNoStatus) {
		slog, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	slices.Reverse(slog) // oldest first
	differ := status.NewDiffer(g)
	refused, err := daemonRefusals(differ, slog)
	if err != nil {
		return nil, err
	}
	entries, chainPos, known, err := specHistory(ctx, g, src, tip, o.Cluster, refused)
	if err != nil {
		return nil, err
	}
	if len(entries) > 0 && !slices.ContainsFunc(entries, func(e entry) bool { return e.Refused == nil }) {
		// Nothing ever validated: a folder that is no fleet repository,
		// or one whose every commit was refused. Thousands of "refused"
		// entries would not say so.
		newest, on := entries[len(entries)-1], o.Branch
		if on == "" {
			on = "HEAD"
		}
		return nil, fmt.Errorf("no commit of %s holds a fleet gitfleet accepts (%d refused; the newest, %.7s: %s); is this a fleet repository? gitfleet init DIR makes one",
			on, len(entries), newest.Commit.Commit, strings.Join(newest.Refused.Reasons, "; "))
	}
	if o.Cluster != "" && !known {
		return nil, fmt.Errorf("cluster %q is %w of the branch", o.Cluster, ErrNotFound)
	}
	attach(entries, chainPos, slog)
	out := &Log{Cluster: o.Cluster, Commits: []Commit{}}
	for i := len(entries) - 1; i >= 0; i-- { // newest first
		e := entries[i]
		for _, sc := range e.outcomes {
			changes, err := differ.Changes(sc.Commit, o.Cluster)
			if err != nil {
				return nil, err
			}
			fleet, err := differ.Cleared(sc.Commit)
			if err != nil {
				return nil, err
			}
			if len(changes) == 0 && len(fleet) == 0 {
				continue
			}
			e.Status = append(e.Status, StatusCommit{Commit: sc.Hash, Time: sc.Time, AppliedWith: sc.via, Clusters: changes, Fleet: fleet})
		}
		out.Commits = append(out.Commits, e.Commit)
	}
	return out, nil
}

// Tip is the commit the trail starts from: branch (a local branch, else
// origin's, else any revision), or HEAD when branch is "".
func Tip(g *git.Repository, branch string) (plumbing.Hash, error) {
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

// daemonRefusals are the commits the status branch says the daemon
// refused, with its reasons.
func daemonRefusals(d *status.Differ, log []status.Commit) (map[string][]string, error) {
	out := map[string][]string{}
	for _, sc := range log {
		r, err := d.Rejected(sc)
		if err != nil {
			return nil, err
		}
		if r != nil {
			out[r.Commit] = r.Errors
		}
	}
	return out, nil
}

// entry is a Commit being built, with its place in the chain.
type entry struct {
	Commit
	pos      int // in the first-parent chain, oldest 0
	outcomes []outcome
}

// outcome is a status commit shown under a spec commit; via names the
// later spec commit it was applied with, when that one is not shown.
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
			for i >= 0 && entries[i].Refused != nil {
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
			if src != e.Commit.Commit {
				o.via = src
			}
			e.outcomes = append(e.outcomes, o)
		}
	}
}

// specHistory walks the first-parent chain from tip, oldest first, and
// keeps the commits that changed the cluster (its Cluster, class,
// standalone deployments and health checks), or any fleet object when
// cluster is "", and those refused. It reports whether the cluster was seen
// in any commit.
func specHistory(ctx context.Context, g *git.Repository, src *sources.Repo, tip plumbing.Hash, cluster string, refused map[string][]string) ([]entry, map[string]int, bool, error) {
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
	var prev *v1alpha1.Fleet // the last fleet that was applied
	var prevTree, appliedTree plumbing.Hash
	var pending []SpecRef // refused commits shown since the last applied one
	known := cluster == ""
	for i, c := range chain {
		reasons, byDaemon := refused[c.Hash.String()]
		// A commit whose tree is the last applied one's after a refusal
		// (a revert) is applied anew, and ends the refusal.
		reapplies := len(pending) > 0 && prevTree == appliedTree
		if c.TreeHash == prevTree && !byDaemon && !reapplies {
			continue
		}
		rev, err := src.Revision(ctx, c.Hash.String())
		if err != nil {
			return nil, nil, false, err
		}
		e := entry{Commit: commitOf(c), pos: i}
		if rev.Fleet == nil {
			prevTree = c.TreeHash
			if errs := rejectedFor(rev, prev, cluster); len(errs) > 0 {
				e.Refused = &Refusal{By: RefusedValidation, Reasons: errs}
				out = append(out, e)
				pending = append(pending, e.ref())
			}
			continue
		}
		if cluster != "" && rev.Fleet.Cluster(cluster) != nil {
			known = true
		}
		e.Changes = planner.FieldChanges(prev, rev.Fleet, cluster)
		if byDaemon {
			// Never applied: shown with what it would have changed, and
			// the next commit is compared with the last applied one.
			if len(e.Changes) > 0 || cluster == "" {
				e.Refused = &Refusal{By: RefusedDaemon, Reasons: reasons}
				out = append(out, e)
				pending = append(pending, e.ref())
			}
			continue
		}
		prevTree, appliedTree = c.TreeHash, c.TreeHash
		e.Clears, pending = pending, nil
		if len(e.Changes) > 0 || len(e.Clears) > 0 {
			out = append(out, e)
		}
		prev = rev.Fleet
	}
	return out, chainPos, known, nil
}

func (c Commit) ref() SpecRef {
	return SpecRef{Commit: c.Commit, Author: c.Author, Subject: c.Subject}
}

func commitOf(c *object.Commit) Commit {
	subject, _, _ := strings.Cut(c.Message, "\n")
	return Commit{Commit: c.Hash.String(), Author: c.Author.Name, Email: c.Author.Email, Time: c.Author.When, Subject: subject}
}

// rejectedFor lists a rejected revision's errors, only those about the
// cluster's or its class's files when cluster is set: written there, or
// in a kustomize patch that sets a value of one of them (the error names
// the patch, its Source the object's file).
func rejectedFor(rev *sources.Revision, last *v1alpha1.Fleet, cluster string) []string {
	var files []string
	if cluster != "" && last != nil {
		if c := last.Cluster(cluster); c != nil {
			files = append(files, c.Source.Path)
			if cc := last.Class(c.Spec.Topology.ClassRef.Name); cc != nil {
				files = append(files, cc.Source.Path)
			}
		}
	}
	var out []string
	for _, e := range rev.Errors {
		if cluster == "" || slices.Contains(files, e.SourceFile()) {
			out = append(out, e.Error())
		}
	}
	if len(rev.Errors) == 0 && rev.Err != nil && cluster == "" {
		out = append(out, rev.Err.Error())
	}
	return out
}
