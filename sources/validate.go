package sources

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// ValidateRev validates the fleet at rev (branch, tag or commit) of the
// repository at dir (a path or URL), straight from the object store, with
// kustomizations rendered. Like schemas.Load, it returns the fleet of the
// valid objects along with every error; err is for Git and I/O failures.
// Signatures are not checked.
func ValidateRev(ctx context.Context, dir, rev string, vo ValidateOptions) (*v1alpha1.Fleet, schemas.Errors, error) {
	repo, err := Open(ctx, Options{Location: dir, CacheFile: vo.CacheFile, KeepObjects: true})
	if err != nil {
		return nil, nil, err
	}
	defer repo.Close()
	fleet, errs, _, places, err := repo.validate(ctx, rev)
	if err == nil && vo.Places != nil {
		vo.Places(places)
	}
	return fleet, errs, err
}

// ValidateDir validates the working tree in dir as it is on disk (not
// committed), with kustomizations rendered, following the same rules as a
// revision.
func ValidateDir(ctx context.Context, dir string, vo ValidateOptions) (*v1alpha1.Fleet, schemas.Errors, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	snap, err := dirSnapshot(dir)
	if err != nil {
		return nil, nil, err
	}
	ins, pre, err := collect(snap, newRenderCache(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("validate %s: %w", dir, err)
	}
	if err := rekeyByContent(ins); err != nil {
		return nil, nil, err
	}
	if vo.Files != nil {
		vo.Files(len(ins))
	}
	known := newVerdicts()
	if vo.CacheFile != "" {
		known = loadVerdicts(vo.CacheFile)
	}
	fleet, errs, _, places, err := newParseCache(known).validate(ins, pre, loadAll)
	if err == nil {
		_ = known.save()
		if vo.Places != nil {
			vo.Places(places)
		}
	}
	return fleet, errs, err
}

// rekeyByContent reads the inputs and keys them by content: a working
// file's snapshot key is its size and time, the verdicts need its
// content's hash — Git's blob hash, so that validate, validate --rev and
// plan share them.
func rekeyByContent(ins []input) error {
	for i := range ins {
		if err := ins[i].load(); err != nil {
			return err
		}
		ins[i].key = plumbing.ComputeHash(plumbing.BlobObject, ins[i].Data).String() + " " + ins[i].Path
	}
	return nil
}

// ValidateOptions are ValidateDir's and ValidateRev's.
type ValidateOptions struct {
	// CacheFile keeps validation verdicts across runs (Options.CacheFile).
	CacheFile string
	// Files, if set, is told how many files ValidateDir is about to
	// parse (validate sizes its garbage-collection floor by it).
	Files func(n int)
	// Places, if set, is told where the fields of the validated objects
	// are written (validate places the planner's errors with it).
	Places func(*Places)
}

func loadAll(ins []*input) error {
	for _, in := range ins {
		if err := in.load(); err != nil {
			return err
		}
	}
	return nil
}
