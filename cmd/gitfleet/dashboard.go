package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/gitfleet/gitfleet/dashboard"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

func init() {
	register(&command{
		name:    "dashboard",
		usage:   "dashboard [--repo DIR] [--listen ADDR] [--status-branch B] [--ui-token T]",
		summary: "serve the fleet's web pages read-only from a clone's status branch, with no daemon and no NATS",
		run:     runDashboard,
	})
}

func runDashboard(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("dashboard", env)
	repoDir := fs.String("repo", ".", "a clone of the fleet repository holding the status branch")
	listen := fs.String("listen", "127.0.0.1:8090", "HTTP address of the pages")
	branch := fs.String("status-branch", v1alpha1.DefaultStatusBranch, "the status branch")
	specBranch := fs.String("branch", "", "the spec branch whose history the history page shows (default HEAD)")
	token := fs.String("ui-token", os.Getenv("GITFLEET_UI_TOKEN"), "token the pages ask for (default $GITFLEET_UI_TOKEN); required when --listen is not a loopback address")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	g, err := git.PlainOpenWithOptions(*repoDir, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return fmt.Errorf("--repo %s: %w", *repoDir, err)
	}
	if _, err := status.Read(g, *branch); err != nil {
		return fmt.Errorf("--repo %s: %w", *repoDir, err)
	}
	if *token == "" && !loopback(*listen) {
		return &exitError{code: exitUsage, err: errors.New("--listen is not a loopback address: give --ui-token (or $GITFLEET_UI_TOKEN)")}
	}
	ui := uiOptions(*repoDir, *specBranch, *branch)
	ui.Token = *token
	h := dashboard.Handler(ui)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", *listen, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	fmt.Fprintf(env.stderr, "gitfleet dashboard: http://%s/ (read-only, from %s of %s)\n", ln.Addr(), *branch, *repoDir)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
