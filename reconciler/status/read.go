package status

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/internal/loose"
	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// ErrNoStatus: the repository has no status branch (yet).
var ErrNoStatus = errors.New("no status branch")

// ResolveBranch returns the commit of the status branch: the local branch,
// else a remote-tracking one (refs/remotes/<remote>/<branch>), so a plain
// clone of a fleet repository can be described after git fetch.
func ResolveBranch(repo *git.Repository, branch string) (plumbing.Hash, error) {
	r, err := repo.Reference(plumbing.NewBranchReferenceName(branch), true)
	if err == nil {
		return r.Hash(), nil
	}
	if !errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, fmt.Errorf("read branch %s: %w", branch, err)
	}
	remotes, err := repo.Remotes()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	names := make([]string, 0, len(remotes))
	for _, rm := range remotes {
		names = append(names, rm.Config().Name)
	}
	slices.Sort(names)
	if i := slices.Index(names, "origin"); i > 0 {
		names[0], names[i] = names[i], names[0]
	}
	for _, n := range names {
		if r, err := repo.Reference(plumbing.NewRemoteReferenceName(n, branch), true); err == nil {
			return r.Hash(), nil
		}
	}
	return plumbing.ZeroHash, fmt.Errorf("%w %q", ErrNoStatus, branch)
}

// Read returns everything on the status branch.
func Read(repo *git.Repository, branch string) (*Snapshot, error) {
	tip, err := ResolveBranch(repo, branch)
	if err != nil {
		return nil, err
	}
	return ReadAt(repo.Storer, tip)
}

// BranchOf is the status branch of the fleet at repo's HEAD: gitfleet.yaml's
// spec.statusBranch, else the default. A repository without a readable
// gitfleet.yaml at HEAD gets the default.
func BranchOf(repo *git.Repository) string {
	var cfg struct {
		Spec struct {
			StatusBranch string `yaml:"statusBranch"`
		} `yaml:"spec"`
	}
	if head, err := repo.Head(); err == nil {
		if c, err := repo.CommitObject(head.Hash()); err == nil {
			if f, err := c.File("gitfleet.yaml"); err == nil {
				if s, err := f.Contents(); err == nil && yaml.Unmarshal([]byte(s), &cfg) == nil && cfg.Spec.StatusBranch != "" {
					return cfg.Spec.StatusBranch
				}
			}
		}
	}
	return v1alpha1.DefaultStatusBranch
}

// ReadAt returns everything on the status branch at commit.
func ReadAt(s storer.EncodedObjectStorer, commit plumbing.Hash) (*Snapshot, error) {
	return rereadingPacks(s, func() (*Snapshot, error) { return readAt(s, commit) })
}

// rereadingPacks runs read, and once more when an object was missing and
// s can have go-git read the repository's pack indexes again first. A
// reader that read the repository before may not know of packs written
// since: by the Writer, whose large commits are packs, or by git gc.
func rereadingPacks[T any](s storer.EncodedObjectStorer, read func() (T, error)) (T, error) {
	v, err := read()
	if r, ok := s.(interface{ Reindex() }); ok && errors.Is(err, plumbing.ErrObjectNotFound) {
		r.Reindex()
		v, err = read()
	}
	return v, err
}

func readAt(s storer.EncodedObjectStorer, commit plumbing.Hash) (*Snapshot, error) {
	c, err := object.GetCommit(s, commit)
	if err != nil {
		return nil, fmt.Errorf("read status commit %s: %w", commit, err)
	}
	hashes, err := fileHashes(s, c.TreeHash)
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Commit: commit.String()}
	for _, p := range slices.Sorted(maps.Keys(hashes)) {
		data, err := loose.ReadBlob(s, hashes[p])
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		if p == FleetFile {
			if snap.Fleet, err = DecodeFleet(data); err != nil {
				return nil, fmt.Errorf("%s at %s: %w", p, short(commit.String()), err)
			}
			continue
		}
		cs, err := DecodeCluster(data)
		if err != nil {
			return nil, fmt.Errorf("%s at %s: %w", p, short(commit.String()), err)
		}
		if cs.Name == "" {
			cs.Name = clusterName(p)
		}
		snap.Clusters = append(snap.Clusters, cs)
	}
	return snap, nil
}

// ReadCluster returns one cluster's status, nil when the branch has none.
func ReadCluster(repo *git.Repository, branch, name string) (*ClusterStatus, error) {
	tip, err := ResolveBranch(repo, branch)
	if err != nil {
		return nil, err
	}
	return rereadingPacks(repo.Storer, func() (*ClusterStatus, error) {
		c, err := object.GetCommit(repo.Storer, tip)
		if err != nil {
			return nil, fmt.Errorf("read status commit %s: %w", tip, err)
		}
		return clusterAt(repo.Storer, c.TreeHash, name, nil)
	})
}

// clusterAt decodes clusters/<name>.yaml in tree; nil when absent. cache, if
// not nil, keeps decoded files by blob hash.
func clusterAt(s storer.EncodedObjectStorer, tree plumbing.Hash, name string, cache map[plumbing.Hash]*ClusterStatus) (*ClusterStatus, error) {
	t, err := object.GetTree(s, tree)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", tree, err)
	}
	e, err := t.FindEntry(ClusterPath(name))
	if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if c, ok := cache[e.Hash]; ok {
		return c, nil
	}
	data, err := loose.ReadBlob(s, e.Hash)
	if err != nil {
		return nil, err
	}
	c, err := DecodeCluster(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ClusterPath(name), err)
	}
	if cache != nil {
		cache[e.Hash] = &c
	}
	return &c, nil
}

// parseTrailers returns the values of key in the message's last paragraph.
func parseTrailers(msg, key string) []string {
	msg = strings.TrimRight(msg, "\n")
	if i := strings.LastIndex(msg, "\n\n"); i >= 0 {
		msg = msg[i+2:]
	} else {
		return nil
	}
	var out []string
	for _, l := range strings.Split(msg, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), key) {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

// Observed is the snapshot's machines as the planner's input, for a plan
// against what runs. The status branch records no heartbeats: a machine
// counts as healthy unless the daemon marked it unhealthy.
func (s *Snapshot) Observed() []planner.ObservedMachine {
	ms := []planner.ObservedMachine{}
	for _, c := range s.Clusters {
		for _, m := range c.Machines {
			ms = append(ms, planner.ObservedMachine{
				Name: m.Name, Cluster: c.Name, Deployment: m.Deployment, Role: wire.Role(m.Role),
				Provider: m.Provider, Version: m.Version, TemplateHash: m.TemplateHash,
				Phase: wire.Phase(m.Phase), Created: m.Created, Healthy: !m.Unhealthy,
			})
		}
	}
	return ms
}

// Rollouts is the snapshot's class rollouts and each cluster's place in
// its class's, as the planner's input, for a plan that knows which
// clusters the daemon holds (a halted rollout, a wave not reached yet).
func (s *Snapshot) Rollouts() *planner.ObservedRollouts {
	out := &planner.ObservedRollouts{Classes: make(map[string]planner.ClassRollout, len(s.Fleet.Rollouts)),
		Clusters: make(map[string]planner.ClusterRollout, len(s.Clusters))}
	for _, r := range s.Fleet.Rollouts {
		cr := planner.ClassRollout{Class: r.Class, Revision: r.Revision, Started: r.Started, MaxFailures: r.MaxFailures,
			CurrentWave: r.CurrentWave, Halted: r.Halted, Reason: r.Reason, Failed: r.Failed}
		if c := r.Change; c != nil {
			cr.Change = planner.Change{Commit: c.Commit, Author: c.Author, Subject: c.Subject}
		}
		out.Classes[r.Class] = cr
	}
	for _, c := range s.Clusters {
		if r := c.Rollout; r != nil {
			out.Clusters[c.Name] = planner.ClusterRollout{Revision: r.ClassRevision, Wave: r.Wave, AdmittedAt: r.AdmittedAt,
				State: r.State, Reason: r.Reason, PendingRevision: r.PendingRevision}
		}
	}
	return out
}

// LastApplied returns the fleet repository commit that fleet.yaml at ref
// (a status branch, local or remote-tracking) says the daemon applied
// last: the revision in force, whatever was pushed to the fleet's branch
// since. "" when there is no such ref or it names none.
func LastApplied(repo *git.Repository, ref plumbing.ReferenceName) (string, error) {
	r, err := repo.Reference(ref, true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", ref, err)
	}
	return rereadingPacks(repo.Storer, func() (string, error) {
		c, err := object.GetCommit(repo.Storer, r.Hash())
		if err != nil {
			return "", fmt.Errorf("read status commit %s: %w", r.Hash(), err)
		}
		tree, err := c.Tree()
		if err != nil {
			return "", err
		}
		entry, err := tree.FindEntry(FleetFile)
		if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		data, err := loose.ReadBlob(repo.Storer, entry.Hash)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", FleetFile, err)
		}
		f, err := DecodeFleet(data)
		if err != nil {
			return "", fmt.Errorf("%s at %s: %w", FleetFile, short(r.Hash().String()), err)
		}
		if f.LastApplied == nil {
			return "", nil
		}
		return f.LastApplied.Commit, nil
	})
}
