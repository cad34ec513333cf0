package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/gitfleet/gitfleet/fixtures"
)

func init() {
	register(&command{
		name:    "init",
		usage:   "init DIR",
		summary: "write an example fleet repository (a class, two clusters, a health check, a policy) and commit it",
		run:     runInit,
	})
}

// errNotEmpty: init never writes over someone's files.
var errNotEmpty = errors.New("directory is not empty")

func runInit(ctx context.Context, env *cmdEnv, args []string) error {
	fset := newFlagSet("init", env)
	pos, err := parseFlags(fset, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &exitError{code: exitUsage, err: errors.New("usage: gitfleet init DIR")}
	}
	dir := pos[0]
	if err := ensureEmptyDir(dir); err != nil {
		return err
	}
	if err := writeFleet(dir, fixtures.Init()); err != nil {
		return err
	}
	hash, err := commitAll(ctx, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "initialized fleet repository in %s (commit %s)\nnext: gitfleet validate %s\n", dir, hash.String()[:7], dir)
	return nil
}

// ensureEmptyDir creates dir or checks that it holds nothing.
func ensureEmptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s: %w (%d entries): choose a new or empty directory", dir, errNotEmpty, len(entries))
	}
	return nil
}

// writeFleet copies the example fleet into dir.
func writeFleet(dir string, src fs.FS) error {
	return fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := fs.ReadFile(src, p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
}

// commitAll makes dir a Git repository (branch main) with one commit of
// every file.
func commitAll(ctx context.Context, dir string) (plumbing.Hash, error) {
	if err := ctx.Err(); err != nil {
		return plumbing.ZeroHash, err
	}
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.Main},
	})
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git: %w", err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git: %w", err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git add: %w", err)
	}
	sig := &object.Signature{Name: "gitfleet init", Email: "gitfleet@localhost", When: time.Now()}
	hash, err := wt.Commit("Initial fleet: class standard, clusters dev-1 and prod-1", &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git commit: %w", err)
	}
	return hash, nil
}
