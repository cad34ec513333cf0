package sources

import (
	"context"
	"fmt"

	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// ValidateRev validates the fleet at rev (branch, tag or commit) of the
// repository at dir (a path or URL), straight from the object store, with
// kustomizations rendered. Like schemas.Load, it returns the fleet of the
// valid objects along with every error; err is for Git and I/O failures.
// Signatures are not checked.
func ValidateRev(ctx context.Context, dir, rev string) (*v1alpha1.Fleet, schemas.Errors, error) {
	repo, err := Open(ctx, Options{Location: dir})
	if err != nil {
		return nil, nil, err
	}
	defer repo.Close()
	return repo.validate(ctx, rev)
}

// ValidateDir validates the working tree in dir as it is on disk (not
// committed), with kustomizations rendered, following the same rules as a
// revision.
func ValidateDir(ctx context.Context, dir string) (*v1alpha1.Fleet, schemas.Errors, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	snap, err := dirSnapshot(dir)
	if err != nil {
		return nil, nil, err
	}
	ins, pre, err := collect(snap, newRenderCache())
	if err != nil {
		return nil, nil, fmt.Errorf("validate %s: %w", dir, err)
	}
	return newParseCache().validate(ins, pre, loadAll)
}

func loadAll(ins []*input) error {
	for _, in := range ins {
		if err := in.load(); err != nil {
			return err
		}
	}
	return nil
}
