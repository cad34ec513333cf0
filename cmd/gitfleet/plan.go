package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/gitfleet/gitfleet/internal/gcfloor"
	"os"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/sources"
)

func init() {
	register(&command{
		name:    "plan",
		usage:   "plan --repo DIR --base REF --head REF [--format text|markdown|json] [--detailed-exitcode]",
		summary: "show what merging head into base would do: clusters, versions, machines, waves",
		run:     runPlan,
	})
}

// Exit codes of plan --detailed-exitcode, as Terraform's: 2 when the
// change reaches a cluster (planner.PreviewReport.Reaches), machines or
// not; 0 only for a plan that reads "No changes".
const planExitChanges = 2

// planFloor is plan's garbage-collection floor: below it the heap is not
// collected (Go's default returns once the live heap passes half of it).
// It grows with the revision's files (planFloorPerFile, up to
// planFloorMax): at 10,000 clusters a cold plan's live heap stays under
// half of that floor, which spares it ~20 of its 31 collections for ~30
// MiB more peak memory; a fleet of up to 2,730 files keeps 64 MiB
// (docs/fleet-api.md).
const (
	planFloor        = 64 << 20
	planFloorPerFile = 24 << 10
	planFloorMax     = 256 << 20
)

// planFloorFor is the floor for a revision of files files.
func planFloorFor(files int) int64 {
	return min(max(int64(files)*planFloorPerFile, planFloor), planFloorMax)
}

func runPlan(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("plan", env)
	repoLoc := fs.String("repo", ".", "fleet repository: a local path or a URL")
	baseRef := fs.String("base", "", "the revision merged into (branch, tag or commit)")
	headRef := fs.String("head", "", "the revision to preview (branch, tag or commit)")
	format := fs.String("format", "text", "output format: text, markdown or json")
	fs.StringVar(format, "o", "text", "same as --format")
	detailed := fs.Bool("detailed-exitcode", false, "exit 0 when the change reaches no cluster, 1 on error, 2 when it does (machines or not)")
	dataDir := fs.String("data-dir", "", "where a remote repository is cloned (default: a temporary folder)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return &exitError{code: exitUsage, err: fmt.Errorf("unexpected argument %q; use --repo, --base and --head", pos[0])}
	case *baseRef == "" || *headRef == "":
		return &exitError{code: exitUsage, err: errors.New("--base and --head are required, e.g. --base main --head my-branch")}
	case *format != "text" && *format != "markdown" && *format != "json":
		return &exitError{code: exitUsage, err: fmt.Errorf("--format %q: use text, markdown or json", *format)}
	}
	if *dataDir == "" {
		dir, err := os.MkdirTemp("", "gitfleet-plan-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		onInterrupt(func() { os.RemoveAll(dir) }) // the defer does not run then
		*dataDir = dir
	}
	// A one-shot run that reads two revisions of a fleet: let the heap
	// grow to planFloor before collecting (internal/gcfloor).
	floor := int64(planFloor)
	undoFloor := gcfloor.Set(floor)
	defer func() { undoFloor() }()
	opts := sources.Options{Location: *repoLoc, DataDir: *dataDir, CacheFile: validationCache(), KeepObjects: true}
	opts.Files = func(n int) {
		if f := planFloorFor(n); f > floor {
			undoFloor()
			floor, undoFloor = f, gcfloor.Set(f)
		}
	}
	report, err := previewRepo(ctx, opts, *baseRef, *headRef)
	if err != nil {
		return err
	}
	if report.BaseInvalid() && *format != "text" {
		// The output carries it; stdout is a file to post, and this is
		// for the log of the job that posts it.
		against := "an empty fleet"
		if report.NotApplied != "" {
			against += " (" + report.NotApplied + ")"
		}
		if report.ComparedWith == planner.CompareApplied {
			against = fmt.Sprintf("the last applied revision %.7s", report.Applied)
		}
		fmt.Fprintf(env.stderr, "gitfleet plan: warning: base %s does not validate (%d %s); head is compared against %s\n",
			*baseRef, len(report.BaseErrors), pluralNoun(len(report.BaseErrors), "error", "errors"), against)
	}
	switch *format {
	case "json":
		err = planner.RenderJSON(env.stdout, report)
	case "markdown":
		err = planner.RenderMarkdown(env.stdout, report, planner.MarkdownLimit)
	default:
		err = planner.RenderText(env.stdout, report)
	}
	// A base that does not validate changes no exit code: the pull
	// request that fixes a broken main must be able to pass
	// (docs/pull-requests.md).
	switch {
	case err != nil:
		return err
	case len(report.Errors) > 0:
		return errSilent
	case *detailed && report.Reaches():
		return &exitError{code: planExitChanges}
	}
	return nil
}

// previewRepo reads base and head from the repository and compares them
// against the machines observed on the status branch. In place of a base
// that does not validate head is compared with the revision the daemon
// runs (the status branch's last applied commit), or an empty fleet when
// there is none that validates; the report says so and why.
func previewRepo(ctx context.Context, opts sources.Options, baseRef, headRef string) (*planner.PreviewReport, error) {
	repo, err := sources.Open(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("--repo: %w", err)
	}
	defer repo.Close()
	if repo.Remote() {
		if _, err := repo.Fetch(ctx); err != nil {
			return nil, err
		}
	}
	base, err := repo.Revision(ctx, baseRef)
	if err != nil {
		return nil, fmt.Errorf("--base %s: %w", baseRef, err)
	}
	head, err := repo.Revision(ctx, headRef)
	if err != nil {
		return nil, fmt.Errorf("--head %s: %w", headRef, err)
	}
	if head.Fleet == nil && len(head.Errors) == 0 && head.Err != nil {
		return nil, fmt.Errorf("--head %s: %w", headRef, head.Err)
	}
	var baseErrs []error
	if base.Fleet == nil {
		for _, e := range base.Errors {
			baseErrs = append(baseErrs, e)
		}
		if len(baseErrs) == 0 {
			baseErrs = append(baseErrs, cmp.Or(base.Err, errors.New("does not validate")))
		}
	}
	branch := v1alpha1.DefaultStatusBranch
	for _, f := range []*v1alpha1.Fleet{base.Fleet, head.Fleet} {
		if f != nil {
			if f.Config.Spec.StatusBranch != "" {
				branch = f.Config.Spec.StatusBranch
			}
			break
		}
	}
	observed, rollouts, err := observedState(repo.GitDir(), branch)
	if err != nil {
		return nil, err
	}
	// What head is compared with: base, or in its place the revision the
	// daemon runs.
	from, applied, notApplied := base, "", ""
	if base.Fleet == nil {
		rev, why := appliedRevision(ctx, repo, branch)
		if rev != nil {
			from, applied = rev, rev.Commit
		}
		notApplied = why
	}
	var headErrs []error
	for _, e := range head.Errors {
		headErrs = append(headErrs, e)
	}
	headFleet, headKey, headPlaces := head.Fleet, head.ObjectKey, head.Places
	if headFleet == nil {
		// Head does not validate: report its errors, and no changes.
		headFleet, headKey, headPlaces = from.Fleet, from.ObjectKey, from.Places
	}
	// Both revisions are read: the repository writes its caches (the
	// object cache is ~8 MiB at 10,000 clusters) while the preview is
	// computed from what is in memory.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = repo.Close()
	}()
	report := planner.PreviewOf(planner.PreviewInput{
		Base: from.Fleet, Head: headFleet, BaseKey: from.ObjectKey, HeadKey: headKey,
		BaseErrs: baseErrs, Applied: applied, NotApplied: notApplied, HeadErrs: headErrs, Observed: observed, Rollouts: rollouts,
		// The planner's problems point at their fields, as validation
		// errors do, not at their documents' first lines.
		Locate: headPlaces.At,
	})
	<-closed
	report.Base = fmt.Sprintf("%s (%.7s)", baseRef, base.Commit)
	report.Head = fmt.Sprintf("%s (%.7s)", headRef, head.Commit)
	return report, nil
}

// appliedRevision is the revision the status branch says the daemon
// applied last, read from the repository; nil when there is none, or it
// cannot be read, or it does not validate, and then why, for the plan.
func appliedRevision(ctx context.Context, repo *sources.Repo, branch string) (*sources.Revision, string) {
	commit, err := lastApplied(repo, branch)
	switch {
	case err != nil:
		return nil, fmt.Sprintf("the status branch %s could not be read: %v", branch, err)
	case commit == "" && !hasRef(repo, repo.BranchRef(branch)):
		// A CI checkout fetches the branch it builds and no other: the
		// usual reason, and not the same as a daemon that applied nothing.
		return nil, fmt.Sprintf("the status branch %s is not in this repository: fetch it (git fetch origin %s:%s), or no daemon has run on this fleet yet", branch, branch, branch)
	case commit == "":
		return nil, fmt.Sprintf("the status branch %s records no applied revision", branch)
	}
	rev, err := repo.Revision(ctx, commit)
	switch {
	case err != nil:
		// A shallow clone lacks it, for one.
		return nil, fmt.Sprintf("the last applied commit %.7s could not be read: %v", commit, err)
	case rev.Rejected():
		n := len(rev.Errors)
		if n == 0 && rev.Err != nil {
			return nil, fmt.Sprintf("the last applied commit %.7s does not validate either: %v", commit, rev.Err)
		}
		return nil, fmt.Sprintf("the last applied commit %.7s does not validate either (%d %s)", commit, n, pluralNoun(n, "error", "errors"))
	}
	return rev, ""
}

// hasRef says whether the repository holds ref; a ref that cannot be
// read counts as held, so the message then blames what was read.
func hasRef(repo *sources.Repo, ref string) bool {
	_, err := readGit(repo.GitDir(), func(g *git.Repository) (*plumbing.Reference, error) {
		return g.Reference(plumbing.ReferenceName(ref), true)
	})
	return !errors.Is(err, plumbing.ErrReferenceNotFound)
}

// observedState reads the machines and the rollouts of the status branch,
// or nil when the repository has none, so the preview then assumes base
// runs as written. The status branch records no heartbeats: a machine is
// taken as healthy unless the daemon marked it unhealthy.
func observedState(gitDir, branch string) ([]planner.ObservedMachine, *planner.ObservedRollouts, error) {
	type state struct {
		machines []planner.ObservedMachine
		rollouts *planner.ObservedRollouts
	}
	st, err := readGit(gitDir, func(repo *git.Repository) (state, error) {
		snap, err := status.Read(repo, branch)
		if errors.Is(err, status.ErrNoStatus) {
			return state{}, nil
		}
		if err != nil {
			return state{}, fmt.Errorf("read status branch %s: %w", branch, err)
		}
		return state{snap.Observed(), snap.Rollouts()}, nil
	})
	return st.machines, st.rollouts, err
}

// readGit opens the repository at gitDir for one read, whose files it
// closes after: apart from the storage a Repo or a status Writer keeps.
func readGit[T any](gitDir string, read func(*git.Repository) (T, error)) (T, error) {
	st := filesystem.NewStorage(osfs.New(gitDir), cache.NewObjectLRUDefault())
	defer st.Close()
	repo, err := git.Open(st, nil)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("read status branch: %w", err)
	}
	return read(repo)
}
