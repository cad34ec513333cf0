package status

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/gitfleet/gitfleet/internal/loose"
	"github.com/gitfleet/gitfleet/planner"
)

// Commit is one commit of the status branch.
type Commit struct {
	Hash    string
	Time    time.Time // committer date
	Subject string
	// SourceCommits and Plans are the Gitfleet-Source-Commit and
	// Gitfleet-Plan trailers.
	SourceCommits []string
	Plans         []string

	tree, parentTree plumbing.Hash
}

// Log returns the commits of the status branch, newest first, following
// first parents.
func Log(repo *git.Repository, branch string) ([]Commit, error) {
	tip, err := ResolveBranch(repo, branch)
	if err != nil {
		return nil, err
	}
	return rereadingPacks(repo.Storer, func() ([]Commit, error) { return logFrom(repo, tip) })
}

func logFrom(repo *git.Repository, tip plumbing.Hash) ([]Commit, error) {
	var out []Commit
	for h := tip; !h.IsZero(); {
		c, err := object.GetCommit(repo.Storer, h)
		if err != nil {
			return nil, fmt.Errorf("read status commit %s: %w", h, err)
		}
		sc := Commit{
			Hash: c.Hash.String(), Time: c.Committer.When,
			Subject:       strings.SplitN(c.Message, "\n", 2)[0],
			SourceCommits: parseTrailers(c.Message, TrailerSourceCommit),
			Plans:         parseTrailers(c.Message, TrailerPlan),
			tree:          c.TreeHash,
		}
		h = plumbing.ZeroHash
		if len(c.ParentHashes) > 0 {
			h = c.ParentHashes[0]
			p, err := object.GetCommit(repo.Storer, h)
			if err != nil {
				return nil, fmt.Errorf("read status commit %s: %w", h, err)
			}
			sc.parentTree = p.TreeHash
		}
		out = append(out, sc)
	}
	return out, nil
}

// Differ describes what status commits changed, caching decoded files by
// blob hash so a long history stays cheap.
type Differ struct {
	s      storer.EncodedObjectStorer
	cache  map[plumbing.Hash]*ClusterStatus
	fleets map[plumbing.Hash]*FleetStatus // by fleet.yaml blob
}

// NewDiffer returns a Differ reading repo.
func NewDiffer(repo *git.Repository) *Differ {
	return &Differ{s: repo.Storer, cache: map[plumbing.Hash]*ClusterStatus{}, fleets: map[plumbing.Hash]*FleetStatus{}}
}

// ClusterChange is what one status commit changed of one cluster.
type ClusterChange struct {
	Cluster     string   `json:"cluster"`
	Transitions []string `json:"transitions"`
}

// Rejected is the commit the daemon had refused, with why, as c's
// fleet.yaml says (LastRejected); nil when it names none.
func (d *Differ) Rejected(c Commit) (*Rejection, error) {
	f, err := d.fleetAt(short(c.Hash), c.tree)
	if err != nil || f == nil {
		return nil, err
	}
	return f.LastRejected, nil
}

// Cleared says, when c's fleet.yaml cleared the refusal its parent's
// named by applying a newer commit, "applied <commit>, the refusal of
// <commit> cleared"; nil otherwise. The same revision applied again does
// not clear it: a new leader on a refused head applies the last good one
// first, and refuses the head again after.
func (d *Differ) Cleared(c Commit) ([]string, error) {
	if c.parentTree.IsZero() {
		return nil, nil
	}
	before, err := d.fleetAt(short(c.Hash)+"^", c.parentTree)
	if err != nil || before == nil || before.LastRejected == nil {
		return nil, err
	}
	after, err := d.fleetAt(short(c.Hash), c.tree)
	if err != nil || after == nil || after.LastRejected != nil || after.LastApplied == nil {
		return nil, err
	}
	if before.LastApplied != nil && before.LastApplied.Commit == after.LastApplied.Commit {
		return nil, nil
	}
	return []string{fmt.Sprintf("applied %s, the refusal of %s cleared", short(after.LastApplied.Commit), short(before.LastRejected.Commit))}, nil
}

// fleetAt is fleet.yaml in tree (of commit, which errors name); nil when
// there is none.
func (d *Differ) fleetAt(commit string, tree plumbing.Hash) (*FleetStatus, error) {
	t, err := object.GetTree(d.s, tree)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", tree, err)
	}
	e, err := t.FindEntry(FleetFile)
	if errors.Is(err, object.ErrEntryNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if f, ok := d.fleets[e.Hash]; ok {
		return f, nil
	}
	data, err := loose.ReadBlob(d.s, e.Hash)
	if err != nil {
		return nil, err
	}
	f, err := DecodeFleet(data)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", FleetFile, commit, err)
	}
	d.fleets[e.Hash] = &f
	return &f, nil
}

// Changes lists what c changed, per cluster, sorted by cluster; only
// cluster if it is not empty.
func (d *Differ) Changes(c Commit, cluster string) ([]ClusterChange, error) {
	var names []string
	if cluster != "" {
		names = []string{cluster}
	} else {
		before, err := fileHashes(d.s, c.parentTree)
		if err != nil {
			return nil, err
		}
		after, err := fileHashes(d.s, c.tree)
		if err != nil {
			return nil, err
		}
		set := map[string]bool{}
		for p, h := range after {
			if p != FleetFile && before[p] != h {
				set[clusterName(p)] = true
			}
		}
		for p := range before {
			if _, ok := after[p]; !ok && p != FleetFile {
				set[clusterName(p)] = true
			}
		}
		names = slices.Sorted(maps.Keys(set))
	}
	var out []ClusterChange
	for _, n := range names {
		var before *ClusterStatus
		var err error
		if !c.parentTree.IsZero() {
			if before, err = clusterAt(d.s, c.parentTree, n, d.cache); err != nil {
				return nil, err
			}
		}
		after, err := clusterAt(d.s, c.tree, n, d.cache)
		if err != nil {
			return nil, err
		}
		if t := Transitions(before, after); len(t) > 0 {
			out = append(out, ClusterChange{Cluster: n, Transitions: t})
		}
	}
	return out, nil
}

// Transitions says what changed from before to after (nil: no file), one
// line per change a user would notice: the cluster's phase and version,
// conditions, pool counts and each machine.
func Transitions(before, after *ClusterStatus) []string {
	switch {
	case before == nil && after == nil:
		return nil
	case after == nil:
		// The daemon removes a cluster's file once the cluster is gone
		// from the fleet and its last machine deleted: the machines the
		// file still listed went with it, often within the one status
		// commit, so this is where their going is written. One shown
		// Deleting for a cause went for that cause, which its Deleting
		// line said (a scale-down, a remediation): not the cluster's.
		out := []string{"status removed (cluster deleted)"}
		for _, m := range slices.SortedFunc(slices.Values(before.Machines), func(a, b MachineStatus) int { return strings.Compare(a.Name, b.Name) }) {
			switch {
			case m.Phase == "Deleted":
			case !wentWithItsCluster(&m):
				out = append(out, fmt.Sprintf("machine %s removed (was %s)", m.Name, m.Phase))
			default:
				out = append(out, fmt.Sprintf("machine %s removed (was %s), because: %s", m.Name, m.Phase, ClusterRemovedCause))
			}
		}
		return out
	}
	var out []string
	if before == nil {
		_, sum, _ := strings.Cut(after.summary(), ": ")
		out = append(out, "status created: "+sum)
		before = &ClusterStatus{Phase: after.Phase, Version: after.Version, Conditions: after.Conditions,
			ControlPlane: after.ControlPlane, Deployments: after.Deployments}
	}
	arrow := func(what, a, b string) {
		if a != b {
			out = append(out, fmt.Sprintf("%s %s → %s", what, orNone(a), orNone(b)))
		}
	}
	arrow("phase", before.Phase, after.Phase)
	arrow("version", before.Version, after.Version)
	conds := func(cs []Condition) map[string]Condition {
		m := map[string]Condition{}
		for _, c := range cs {
			m[c.Type] = c
		}
		return m
	}
	bc, ac := conds(before.Conditions), conds(after.Conditions)
	for _, t := range slices.Sorted(maps.Keys(ac)) {
		a, b := bc[t], ac[t]
		if a.Status != b.Status || a.Reason != b.Reason {
			line := fmt.Sprintf("condition %s %s → %s", t, orNone(a.Status), b.Status)
			if b.Reason != "" {
				line += " (" + b.Reason + ")"
			}
			out = append(out, line)
		}
	}
	counts := func(r Replicas) string { return fmt.Sprintf("%d/%d ready, %d updated", r.Ready, r.Desired, r.Updated) }
	if before.ControlPlane != after.ControlPlane {
		arrow("control plane", counts(before.ControlPlane), counts(after.ControlPlane))
	}
	bd := map[string]Replicas{}
	for _, d := range before.Deployments {
		bd[d.Name] = d.Replicas
	}
	for _, d := range after.Deployments {
		if r, ok := bd[d.Name]; !ok || r != d.Replicas {
			arrow("deployment "+d.Name, countsOr(r, ok, counts), counts(d.Replicas))
		}
		delete(bd, d.Name)
	}
	for _, n := range slices.Sorted(maps.Keys(bd)) {
		out = append(out, "deployment "+n+" removed")
	}
	bm := map[string]MachineStatus{}
	for _, m := range before.Machines {
		bm[m.Name] = m
	}
	for _, m := range after.Machines {
		old, ok := bm[m.Name]
		delete(bm, m.Name)
		if !ok {
			line := fmt.Sprintf("machine %s created: %s %s", m.Name, m.Phase, m.Version)
			switch {
			case strings.HasPrefix(m.Cause, planner.ReplacesPrefix):
				// The daemon's own doing: the status commit names the
				// spec commit in force, whose author did not cause it.
				line += " (daemon: " + m.Cause + ")"
			case m.Cause != "":
				line += ", because: " + m.Cause
			}
			out = append(out, line)
			continue
		}
		if old.Phase != m.Phase {
			line := fmt.Sprintf("machine %s %s → %s", m.Name, old.Phase, m.Phase)
			switch {
			case m.Phase == "Deleting" && m.Cause != "":
				line += ", because: " + m.Cause
			case m.Reason != "" && m.Message != "":
				line += ": " + m.Reason + ": " + m.Message
			case m.Message != "":
				line += ": " + m.Message
			}
			out = append(out, line)
		}
		if old.Version != m.Version {
			out = append(out, fmt.Sprintf("machine %s version %s → %s", m.Name, orNone(old.Version), orNone(m.Version)))
		}
		// Only a Running machine is marked unhealthy: one that leaves
		// Running is not healthy again, its phase line says what it is.
		switch {
		case m.Unhealthy && !old.Unhealthy:
			line := "machine " + m.Name + " unhealthy"
			if why := HealthText(m.HealthProblem()); why != "" {
				line += ": " + why
			}
			out = append(out, line)
		case old.Unhealthy && !m.Unhealthy && old.Phase == m.Phase:
			out = append(out, "machine "+m.Name+" healthy again")
		}
	}
	for _, n := range slices.Sorted(maps.Keys(bm)) {
		line := fmt.Sprintf("machine %s removed (was %s)", n, bm[n].Phase)
		if why := deletedCause(after, n); why != "" && (bm[n].Phase != "Deleting" || bm[n].Cause != why) {
			line += ", because: " + why
		}
		out = append(out, line)
	}
	return out
}

// ClusterRemovedCause is why a machine went, for a machine that was still
// listed when its cluster's file was removed: a cluster removed from the
// fleet usually loses its machines within the one status commit that
// removes the file, so no deleted list names them.
const ClusterRemovedCause = "its cluster was removed from the fleet"

// wentWithItsCluster says whether m, listed in its cluster's file when the
// file was removed, went for its cluster's removal: not one shown Deleting
// for a cause of its own (a scale-down, a remediation), which went for
// that cause, as its Deleting line said.
func wentWithItsCluster(m *MachineStatus) bool {
	return m.Phase != "Deleting" || m.Cause == ""
}

// deletedCause is why machine went, as c's list of deleted machines says
// (newest first); "" when the list does not name it. A delete often
// finishes before a status commit shows the machine Deleting, so this is
// the only place its cause is written.
func deletedCause(c *ClusterStatus, machine string) string {
	for _, d := range c.Deleted {
		if d.Name == machine {
			return d.Cause
		}
	}
	return ""
}

func countsOr(r Replicas, ok bool, f func(Replicas) string) string {
	if !ok {
		return ""
	}
	return f(r)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
