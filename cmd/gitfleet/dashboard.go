package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/dashboard"
	"github.com/gitfleet/gitfleet/internal/secret"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/sources"
)

func init() {
	register(&command{
		name:         "dashboard",
		usage:        "dashboard [--repo DIR|URL] [--interval D] [--listen ADDR] [--status-branch B] [--ui-users FILE] [--ui-token-file FILE] [--log-level L] [--log-format F]",
		summary:      "serve the fleet's web pages read-only from a clone's (or a URL's) status branch, with no daemon and no NATS",
		run:          runDashboard,
		untilStopped: always,
	})
}

func runDashboard(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("dashboard", env)
	repoLoc := fs.String("repo", ".", "a clone of the fleet repository, or its URL (https://, ssh://, git@host:path, file://), which is cloned and fetched every --interval")
	listen := fs.String("listen", "127.0.0.1:8090", "HTTP address of the pages")
	branch := fs.String("status-branch", v1alpha1.DefaultStatusBranch, "the status branch")
	specBranch := fs.String("branch", "", "the spec branch whose history the history page shows (default HEAD; main for a URL)")
	interval := fs.Duration("interval", 30*time.Second, "how often a --repo URL is fetched, so the pages follow the daemon")
	dataDir := fs.String("data-dir", "", "where a --repo URL is cloned (default: a temporary folder, removed at exit)")
	var auth sources.Auth
	gitAuthFlags(fs, &auth)
	var access uiAccess
	access.flags(fs)
	var lo logOptions
	lo.bindFlags(fs)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	log, err := lo.logger(env.stderr)
	if err != nil {
		return err
	}
	if *interval <= 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("--interval %s: give a positive duration", *interval)}
	}
	clones := *dataDir
	if clones == "" {
		tmp, err := os.MkdirTemp("", "gitfleet-dashboard-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		clones = tmp
	}
	opts := sources.Options{Location: *repoLoc, DataDir: clones, Auth: auth}
	src, err := sources.Open(ctx, opts)
	if errors.Is(err, sources.ErrNotRepo) {
		// A folder inside a clone: its root, as git itself finds it.
		if g, gerr := openGit(*repoLoc); gerr == nil {
			if wt, werr := g.Worktree(); werr == nil {
				opts.Location = wt.Filesystem.Root()
				*repoLoc = opts.Location
				src, err = sources.Open(ctx, opts)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("--repo %s: %w", secret.RedactURL(*repoLoc), err)
	}
	defer src.Close()
	dir := *repoLoc
	if src.Remote() {
		dir = src.GitDir()
		if *specBranch == "" {
			*specBranch = "main"
		}
	}
	g, err := openGit(dir)
	if err != nil {
		return err
	}
	if _, err := status.Read(g, *branch); err != nil {
		return fmt.Errorf("--repo %s: %w", src.Location(), err)
	}
	ui := uiOptions(dir, *specBranch, *branch)
	ui.Log = log
	if err := access.apply(&ui); err != nil {
		return err
	}
	if !ui.Protected() && !loopback(*listen) {
		return &exitError{code: exitUsage, err: errors.New("--listen is not a loopback address: give --ui-users or --ui-token-file (or $GITFLEET_UI_TOKEN)")}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", *listen, err)
	}
	srv := httpServer(dashboard.Handler(ui))
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if src.Remote() {
		go follow(ctx, src, *interval, env)
	}
	fmt.Fprintf(env.stderr, "gitfleet dashboard: http://%s/ (read-only, from %s of %s)\n", ln.Addr(), *branch, src.Location())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// follow fetches a remote fleet repository every interval, so the pages
// (and their live updates) move with the daemon's status commits; a
// failed fetch is said once until one succeeds again, and the pages keep
// showing the last status fetched.
func follow(ctx context.Context, src *sources.Repo, interval time.Duration, env *cmdEnv) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := src.Fetch(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			fmt.Fprintf(env.stderr, "gitfleet dashboard: %v (showing the last status fetched)\n", err)
			failing = true
		case err == nil && failing:
			fmt.Fprintf(env.stderr, "gitfleet dashboard: fetching %s again\n", src.Location())
			failing = false
		}
	}
}

// uiAccess is who may read the dashboard when it listens beyond this
// host: --ui-users (an htpasswd file of bcrypt entries) or a token
// (--ui-token-file, $GITFLEET_UI_TOKEN, or --ui-token, which others can
// read in the process list).
type uiAccess struct{ token, tokenFile, users string }

func (a *uiAccess) flags(fs *flag.FlagSet) {
	fs.StringVar(&a.users, "ui-users", "", "htpasswd file of the dashboard's users, bcrypt entries only (htpasswd -B); they sign in with basic auth")
	fs.StringVar(&a.tokenFile, "ui-token-file", "", "file holding the token the dashboard asks for")
	secretFlag(fs, &a.token, "ui-token", "GITFLEET_UI_TOKEN", "the dashboard's token (default $GITFLEET_UI_TOKEN); prefer --ui-token-file, which keeps it out of the process list")
}

// apply reads the files into o. One of users or a token is required when
// the dashboard listens beyond a loopback address (the callers check).
func (a *uiAccess) apply(o *dashboard.Options) error {
	o.Token = a.token
	if a.tokenFile != "" {
		st, err := os.Stat(a.tokenFile)
		if err != nil {
			return fmt.Errorf("--ui-token-file: %w", err)
		}
		if st.Mode().Perm()&0o007 != 0 {
			return fmt.Errorf("--ui-token-file %s: mode %o lets others read it; run chmod 600 %s", a.tokenFile, st.Mode().Perm(), a.tokenFile)
		}
		b, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return fmt.Errorf("--ui-token-file: %w", err)
		}
		o.Token = strings.TrimSpace(string(b))
	}
	if o.Token != "" && len(o.Token) < 16 {
		return errors.New("the dashboard's token (--ui-token-file, $GITFLEET_UI_TOKEN or --ui-token) is shorter than 16 characters: make one with head -c 24 /dev/urandom | base64")
	}
	if a.users != "" {
		users, err := dashboard.ReadUsers(a.users)
		if err != nil {
			return fmt.Errorf("--ui-users: %w", err)
		}
		o.Users = users
	}
	return nil
}
