package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/dashboard"
	"github.com/gitfleet/gitfleet/internal/memreturn"
	"github.com/gitfleet/gitfleet/internal/privfile"
	"github.com/gitfleet/gitfleet/internal/secret"
	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/local"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/reconciler"
	"github.com/gitfleet/gitfleet/reconciler/history"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/sources"
)

// daemonOptions are the flags serve and up share.
type daemonOptions struct {
	repo           string
	branch         string
	dataDir        string
	listen         string
	statusBranch   string
	statusRefresh  time.Duration
	statusInterval time.Duration
	interval       time.Duration
	replica        string
	webhookSecret  string
	apiTokenFile   string
	// secretsKey seals the gitfleet-pki bucket and bootstrap data;
	// secretsPrevious opens what an older key sealed (rotation).
	ui              uiAccess
	secretsKey      string
	secretsPrevious string
	tokenTTL        time.Duration
	verifySSH       string
	verifyPGP       string
	verifyMode      string
	auth            sources.Auth
	nats            natsbus.Options
	// workers are the providers run in-process (up); none for serve.
	workers []string
	docker  dockerFlags
	// inventoryInterval is how often in-process workers report inventory.
	inventoryInterval time.Duration
	// orphans and orphanGrace: what happens to machines no record wants.
	orphans     string
	orphanGrace time.Duration
	// taskTimeout: a task with no answer for this long is published again.
	taskTimeout time.Duration
	log         logOptions
}

func (o *daemonOptions) bindFlags(fs *flag.FlagSet, defaultListen string) {
	o.log.bindFlags(fs)
	fs.StringVar(&o.repo, "repo", ".", "fleet repository: a local path or a URL (https://, ssh://, git@host:path, file://)")
	fs.StringVar(&o.branch, "branch", "main", "branch holding the fleet's spec")
	fs.StringVar(&o.dataDir, "data-dir", ".gitfleet/data", "where NATS (when embedded), clones of remote repos and local machines keep their state")
	fs.StringVar(&o.listen, "listen", defaultListen, "HTTP address for the dashboard (/), the scale API, /healthz, /readyz, /metrics and /hooks/git; empty: none")
	fs.StringVar(&o.statusBranch, "status-branch", v1alpha1.DefaultStatusBranch, "branch the status is committed to; keep gitfleet.yaml's spec.statusBranch, which describe, history and plan read, the same (the daemon warns when they differ)")
	fs.DurationVar(&o.statusInterval, "status-interval", status.DefaultInterval, "at most one status commit per interval")
	fs.DurationVar(&o.statusRefresh, "status-refresh", status.DefaultRefresh, "rewrite fleet.yaml's refreshedAt after this long without a change, so describe can tell a quiet fleet from a stopped daemon (0: never)")
	fs.DurationVar(&o.interval, "interval", sources.DefaultInterval, "how often the repository is polled (local repos are also watched)")
	fs.StringVar(&o.replica, "replica", "", "this replica's name in leader election (default host-pid)")
	fs.StringVar(&o.apiTokenFile, "api-token-file", "", "file holding the bearer token of the HTTP API (gitfleet scale); default <data-dir>/api-token, made on first start, readable by this user only")
	o.ui.flags(fs)
	fs.StringVar(&o.secretsKey, "secrets-key-file", "", "key (32 random bytes, base64) that seals cluster CAs, bootstrap tokens and machines' bootstrap data; every replica and worker needs the same one; default <data-dir>/secrets.key, made on first start, readable by this user only")
	fs.StringVar(&o.secretsPrevious, "secrets-previous-key-file", "", "the key being rotated away from: what it sealed is sealed again under --secrets-key-file at start (docs/bootstrap.md)")
	fs.DurationVar(&o.tokenTTL, "bootstrap-token-ttl", pki.DefaultTokenTTL, "how long a machine's bootstrap token is good for")
	secretFlag(fs, &o.webhookSecret, "webhook-secret", "GITFLEET_WEBHOOK_SECRET", "secret of /hooks/git (default $GITFLEET_WEBHOOK_SECRET); empty disables the webhook")
	fs.StringVar(&o.verifySSH, "verify-ssh-keys", "", "comma-separated files of allowed SSH signing keys: only commits they signed are applied")
	fs.StringVar(&o.verifyPGP, "verify-pgp-keys", "", "comma-separated files of allowed OpenPGP public keys")
	fs.StringVar(&o.verifyMode, "verify-mode", sources.VerifyHead, "with verify keys: head (the commit applied must be signed) or all (every commit since the last applied one)")
	gitAuthFlags(fs, &o.auth)
	fs.DurationVar(&o.inventoryInterval, "inventory-interval", time.Minute, "in-process workers (up): how often they report their provider's machines")
	o.orphans = reconciler.OrphansDelete
	fs.Func("orphans", "what to do with a machine a provider has and no record wants: delete (after --orphan-grace) or report (default delete)", func(v string) error {
		if v != reconciler.OrphansDelete && v != reconciler.OrphansReport {
			return fmt.Errorf("%q: use %s or %s", v, reconciler.OrphansDelete, reconciler.OrphansReport)
		}
		o.orphans = v
		return nil
	})
	fs.DurationVar(&o.orphanGrace, "orphan-grace", reconciler.DefaultOrphanGrace, "how long an orphan is reported before it is deleted")
	fs.DurationVar(&o.taskTimeout, "task-timeout", reconciler.DefaultTaskTimeout, "a task no worker answered for this long is published again, as its next attempt")
	o.nats.BindFlags(fs)
	limits := natsbus.DefaultLimits()
	limits.BindFlags(fs)
	o.nats.Limits = &limits
}

// runDaemon wires sources, NATS, in-process workers, the leader lease, the
// reconciler and the status writer, and runs them until ctx ends. A stop
// while it is still starting (ctx ended, and the step it was at failed
// for that) ends it as a stop after the start does: no error.
func runDaemon(ctx context.Context, env *cmdEnv, o daemonOptions) (err error) {
	log, err := o.log.logger(env.stderr)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			log.Info().Msg("gitfleet daemon stopped while starting")
			err = nil
		}
	}()
	ctx = log.WithContext(ctx)
	// A quiet daemon gives back the pages its last burst (inventories, a
	// large revision) used: internal/memreturn, docs/reconciler.md.
	go memreturn.Run(ctx, memreturn.Options{Log: log})
	// The data dir holds the NATS store, clones and machine state: the
	// daemon's user alone reads it, also when an older version made it.
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := os.Chmod(o.dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if o.replica == "" {
		host, _ := os.Hostname()
		o.replica = fmt.Sprintf("%s-%d", host, os.Getpid())
	}

	verifier, err := loadVerifier(o.verifySSH, o.verifyPGP)
	if err != nil {
		return err
	}
	repo, err := sources.Open(ctx, sources.Options{Location: o.repo, DataDir: o.dataDir, Auth: o.auth, Verify: verifier, VerifyMode: o.verifyMode, CacheFile: filepath.Join(o.dataDir, "validation"), ObjectsOnce: true})
	if err != nil {
		return err
	}
	defer repo.Close()

	o.nats.ResolveCredentials()
	if o.nats.URL == "" || o.nats.URL == natsbus.Embedded {
		o.nats.Port = stickyPort(o.dataDir, o.nats.Port, log)
	}
	o.nats.DataDir = o.dataDir
	if o.nats.Name == "" {
		o.nats.Name = "gitfleet-" + o.replica
	}
	src, err := sources.Watch(ctx, repo, sources.WatchOptions{Branch: o.branch, Interval: o.interval, Log: &log, Newest: true,
		// A head rejected at the start leaves the revision in force before
		// the restart in force, as it would have without the restart.
		LastGood: func(context.Context) (string, error) { return lastApplied(repo, o.statusBranch) }})
	if err != nil {
		return err
	}
	defer src.Close()
	go watchStatusBranch(ctx, src, o.statusBranch, log)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := reconciler.NewMetrics(reg)
	loop := reconciler.NewLoopHealth()

	// HTTP first: while the daemon waits for NATS, /readyz says so.
	var nats natsState
	var leader atomic.Pointer[reconciler.Reconciler]
	if o.listen != "" {
		token, err := apiToken(o)
		if err != nil {
			return err
		}
		scale := reconciler.ScaleHandler(token, leader.Load, metrics, log)
		ui := uiOptions(repo.GitDir(), o.branch, o.statusBranch)
		ui.Log = log
		if err := o.ui.apply(&ui); err != nil {
			return err
		}
		srv, err := serveHTTP(ctx, o, src, &nats, reg, metrics, loop, scale, ui, log)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	bus, err := natsbus.OpenWait(ctx, o.nats, log, nats.waiting)
	if err != nil {
		return err
	}
	defer bus.Close()
	nats.bus.Store(bus)
	reg.MustRegister(natsbus.QueueCollector(bus.JS))
	keys, issuer, err := openSecrets(ctx, o, bus, log)
	if err != nil {
		return err
	}
	if bus.Server != nil {
		if err := rememberPort(o.dataDir, bus.Server.Port()); err != nil {
			log.Warn().Err(err).Msg("the embedded NATS server's port is not kept: a restart may take another, which local machines still running will not find")
		}
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var inProcess []*providers.Worker
	var records *providers.Records // one copy of the records for the in-process workers
	if len(o.workers) > 0 {
		if records, err = providers.NewRecords(ctx, bus.JS); err != nil {
			return err
		}
	}
	for _, name := range o.workers {
		w, p, err := inProcessWorker(wctx, name, bus, o, keys, records, log)
		if err != nil {
			return err
		}
		inProcess = append(inProcess, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer closeProvider(p, log.With().Str("provider", name).Logger()) // once the worker drained
			if err := w.Run(wctx); err != nil {
				log.Error().Err(err).Str("provider", name).Msg("worker failed")
			}
		}()
	}
	if len(inProcess) > 0 {
		reg.MustRegister(providers.Collector(inProcess...))
	}

	kv, err := bus.JS.KeyValue(ctx, "gitfleet-leader")
	if err != nil {
		return fmt.Errorf("leader bucket: %w", err)
	}
	lease := reconciler.NewLease(kv, o.replica, natsbus.LeaderTTL, log)
	nats.lease.Store(lease)
	log.Info().Str("repo", repo.Location()).Str("branch", o.branch).Str("nats", secret.RedactURL(bus.URL)).Strs("workers", o.workers).Msg("gitfleet daemon started")
	err = lease.Run(ctx, func(lctx context.Context) {
		metrics.Leader.Set(1)
		metrics.LeaderChanges.Inc()
		defer metrics.Leader.Set(0)
		if err := lead(lctx, o, repo, src, bus, issuer, metrics, loop, lease.Fence, &leader, log); err != nil {
			log.Error().Err(err).Msg("reconciler stopped")
		}
	})
	log.Info().Msg("gitfleet daemon stopping")
	return err
}

// lastApplied is the fleet commit the status branch says was applied last,
// as this replica last read or fetched the branch.
func lastApplied(repo *sources.Repo, branch string) (string, error) {
	return readGit(repo.GitDir(), func(g *git.Repository) (string, error) {
		return status.LastApplied(g, plumbing.ReferenceName(repo.BranchRef(branch)))
	})
}

// lead runs the reconciler and the status writer for one term as leader.
// On the way out the pending status is flushed, so a graceful stop loses
// nothing.
func lead(ctx context.Context, o daemonOptions, repo *sources.Repo, src *sources.Source,
	bus *natsbus.Bus, issuer *bootstrap.Issuer, metrics *reconciler.Metrics, loop *reconciler.LoopHealth, fence func() error,
	leader *atomic.Pointer[reconciler.Reconciler], log zerolog.Logger) error {
	g, err := status.OpenRepository(repo.GitDir())
	if err != nil {
		return err
	}
	sopts := status.Options{Repo: g, Branch: o.statusBranch, Interval: o.statusInterval, Refresh: o.statusRefresh, Logger: log, Fence: fence,
		OnCommit: metrics.StatusCommits.Inc, OnPushFailure: metrics.StatusPushFailures.Inc, SumCache: filepath.Join(o.dataDir, "status-sums")}
	if repo.Remote() {
		sopts.Remote = "origin"
		if sopts.Auth, err = repo.AuthMethod(); err != nil {
			return err
		}
	}
	w, err := status.NewWriter(ctx, sopts)
	if err != nil {
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Flush(fctx); err != nil {
			log.Error().Err(err).Msg("status: final flush")
		}
		_ = w.Close()
	}()
	r, err := reconciler.New(reconciler.Options{
		Revisions: src.Follow(ctx), JS: bus.JS, Status: w, Log: log, Metrics: metrics,
		Health: loop, Fence: fence, Orphans: o.orphans, OrphanGrace: o.orphanGrace,
		TaskTimeout: o.taskTimeout, Bootstrap: issuer, StartGC: true,
	})
	if err != nil {
		return err
	}
	leader.Store(r)
	defer leader.Store(nil)
	return r.Run(ctx)
}

// openSecrets loads the secrets key (made in the data dir on first start
// when no file is named) and opens the gitfleet-pki bucket with it: a
// bucket sealed under another key stops the daemon, changing nothing.
func openSecrets(ctx context.Context, o daemonOptions, bus *natsbus.Bus, log zerolog.Logger) (*pki.Keyring, *bootstrap.Issuer, error) {
	file := o.secretsKey
	if file == "" {
		file = filepath.Join(o.dataDir, secretsKeyName)
		if err := pki.NewKeyFile(file); err != nil {
			return nil, nil, err
		}
	}
	var previous []string
	if o.secretsPrevious != "" {
		previous = append(previous, o.secretsPrevious)
	}
	keys, err := pki.LoadKeyring(file, previous...)
	if err != nil {
		return nil, nil, err
	}
	store, resealed, err := pki.OpenStore(ctx, bus.JS, keys)
	if err != nil {
		return nil, nil, err
	}
	if resealed > 0 || o.secretsPrevious != "" {
		log.Info().Int("resealed", resealed).Str("key", keys.ID()).Msg("secrets sealed under the new key; --secrets-previous-key-file is no longer needed")
	}
	return keys, bootstrap.NewIssuer(store, keys, o.tokenTTL), nil
}

// secretsKeyName is the key file gitfleet makes in the data dir.
const secretsKeyName = "secrets.key"

// apiToken reads the HTTP API's bearer token: --api-token-file, or
// <data-dir>/api-token, which is made with a random token on first start
// (the data dir is the daemon user's alone).
func apiToken(o daemonOptions) ([]byte, error) {
	file := o.apiTokenFile
	if file == "" {
		file = filepath.Join(o.dataDir, apiTokenName)
		if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return nil, err
			}
			// Whole or not at all: `gitfleet scale` may read it meanwhile.
			if err := privfile.Create(file, []byte(hex.EncodeToString(b)+"\n")); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("api token: %w", err)
			}
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--api-token-file: %w", err)
	}
	token := bytes.TrimSpace(b)
	if len(token) < 16 {
		return nil, fmt.Errorf("--api-token-file %s: the token is shorter than 16 characters", file)
	}
	return token, nil
}

// apiTokenName is the token file gitfleet makes in the data dir.
const apiTokenName = "api-token"

// inProcessWorker makes the worker of provider name for up, and the
// provider, which the caller closes (closeProvider) once the worker's Run
// returned.
func inProcessWorker(ctx context.Context, name string, bus *natsbus.Bus, o daemonOptions, keys *pki.Keyring, records *providers.Records, log zerolog.Logger) (*providers.Worker, providers.Provider, error) {
	plog := log.With().Str("provider", name).Logger()
	dir := filepath.Join(o.dataDir, "local")
	signer, err := bus.NodeSigner(o.nats)
	if err != nil {
		return nil, nil, err
	}
	p, err := newProvider(ctx, name, bus.JS, local.Options{StateDir: dir, NATSURL: bus.URL, NATS: o.nats, NodeSigner: signer, Log: plog},
		o.docker.options(o.dataDir, bus.URL))
	if err != nil {
		return nil, nil, err
	}
	// The worker names its provider on its own lines. It publishes with
	// the daemon's connection, so no credential binds its identity.
	id, _ := workerID("", name, dir, "", "")
	w, err := providers.NewWorker(ctx, bus.JS, p, providers.WorkerOptions{Concurrency: 16, Log: log, Keys: keys,
		ID: id, InventoryInterval: o.inventoryInterval, Records: records})
	if err != nil {
		closeProvider(p, plog)
		return nil, nil, err
	}
	return w, p, nil
}

func loadVerifier(sshKeys, pgpKeys string) (*sources.Verifier, error) {
	if sshKeys == "" && pgpKeys == "" {
		return nil, nil
	}
	return sources.LoadVerifier(splitList(sshKeys), splitList(pgpKeys))
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// serveHTTP starts /healthz, /readyz, /metrics and /hooks/git.
func serveHTTP(ctx context.Context, o daemonOptions, src *sources.Source, nats *natsState, reg *prometheus.Registry,
	metrics *reconciler.Metrics, loop *reconciler.LoopHealth, scale http.Handler, ui dashboard.Options, log zerolog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/", dashboardHandler(o.listen, ui, log))
	mux.Handle(reconciler.ScalePath, scale)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		bus := nats.bus.Load()
		switch {
		case bus == nil:
			msg := "waiting for NATS"
			if err := nats.err.Load(); err != nil {
				msg += ": " + *err
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
		case !bus.Conn.IsConnected():
			http.Error(w, "not connected to NATS", http.StatusServiceUnavailable)
		case src.Current() == nil:
			msg := "no valid revision of the fleet repository yet"
			if err := src.Err(); err != nil {
				msg += ": " + err.Error()
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
		case loop.Err(loopErrorBound) != nil:
			http.Error(w, loop.Err(loopErrorBound).Error(), http.StatusServiceUnavailable)
		default:
			// JetStream answers, and someone leads: this replica or a
			// live one (its lease key has not expired).
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if _, err := bus.JS.AccountInfo(ctx); err != nil {
				http.Error(w, "JetStream does not answer: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
			lease := nats.lease.Load()
			if lease == nil {
				http.Error(w, "not campaigning for leadership yet", http.StatusServiceUnavailable)
				return
			}
			holder, leading, err := lease.Holder(ctx)
			switch {
			case err != nil:
				http.Error(w, "the leader bucket cannot be read: "+err.Error(), http.StatusServiceUnavailable)
			case leading:
				fmt.Fprintln(w, "ok: leader")
			case holder != "":
				fmt.Fprintf(w, "ok: follower of %s\n", holder)
			default:
				http.Error(w, "no replica leads: the lease is free and nobody has taken it (an election is under way, or every replica fails to take it; see their logs)", http.StatusServiceUnavailable)
			}
		}
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if o.webhookSecret != "" {
		// Every outcome's series from the start: increase() counts no
		// jump from a missing series, so a replica's first accepted push
		// would not hold GitfleetWebhookRefused back, nor its first
		// forged request count toward it.
		for _, outcome := range sources.WebhookOutcomes {
			metrics.WebhookRequests.WithLabelValues(outcome)
		}
		hook, err := src.Webhook(sources.WebhookOptions{Secret: []byte(o.webhookSecret),
			Count: func(outcome string) { metrics.WebhookRequests.WithLabelValues(outcome).Inc() }})
		if err != nil {
			return nil, err
		}
		mux.Handle(sources.WebhookPath, hook)
	} else {
		mux.HandleFunc(sources.WebhookPath, func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "webhook disabled: start gitfleet with --webhook-secret", http.StatusNotFound)
		})
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", o.listen, err)
	}
	srv := httpServer(mux)
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("http server stopped")
		}
	}()
	log.Info().Str("listen", ln.Addr().String()).Msg("serving the dashboard, the scale API, /healthz /readyz /metrics /hooks/git")
	return srv, nil
}

// httpServer is the server of the daemon's routes and of gitfleet
// dashboard. A slow client is cut off: headers within 5 s, the whole
// request within 15 s, an idle keep-alive connection after a minute;
// nothing is held open for long. /events clears its write deadline and
// streams on: the read timeout ends no request whose body was read.
func httpServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10}
}

// watchStatusBranch warns (warnStatusBranch) at the first good revision
// and at each one after that names another status branch than the one
// before, until ctx ends.
func watchStatusBranch(ctx context.Context, src *sources.Source, statusBranch string, log zerolog.Logger) {
	seen := ""
	for rev := range src.Follow(ctx) {
		if rev.Fleet == nil || rev.Fleet.Config.Spec.StatusBranch == seen {
			continue
		}
		seen = rev.Fleet.Config.Spec.StatusBranch
		warnStatusBranch(rev, statusBranch, log)
	}
}

// warnStatusBranch says when the fleet's gitfleet.yaml names another
// status branch than the daemon writes: describe, history and plan read
// the one gitfleet.yaml names, so they would not find this daemon's
// status. The daemon keeps its --status-branch: a commit may not move
// where status goes (the field could even name the spec branch).
func warnStatusBranch(cur *sources.Revision, statusBranch string, log zerolog.Logger) {
	if cur == nil || cur.Fleet == nil {
		return
	}
	if named := cur.Fleet.Config.Spec.StatusBranch; named != "" && named != statusBranch {
		log.Warn().Str("statusBranch", named).Str("daemonStatusBranch", statusBranch).
			Msg("gitfleet.yaml's spec.statusBranch is not the branch this daemon writes (--status-branch): describe, history and plan read the one gitfleet.yaml names; make them the same")
	}
}

// gitAuthFlags are the credentials of a remote repository.
func gitAuthFlags(fs *flag.FlagSet, a *sources.Auth) {
	fs.StringVar(&a.Username, "git-username", "", "HTTP basic-auth user for a remote repository")
	secretFlag(fs, &a.Password, "git-password", "GITFLEET_GIT_PASSWORD", "HTTP password (default $GITFLEET_GIT_PASSWORD)")
	secretFlag(fs, &a.Token, "git-token", "GITFLEET_GIT_TOKEN", "HTTP access token (default $GITFLEET_GIT_TOKEN)")
	fs.StringVar(&a.SSHKeyFile, "git-ssh-key", "", "SSH private key for ssh:// and git@ repositories")
	fs.StringVar(&a.KnownHostsFile, "git-known-hosts", "", "known_hosts file (default ~/.ssh/known_hosts)")
}

// dashboardHandler is the web dashboard at /: open on a loopback
// address, behind --ui-users or a token elsewhere, and off (saying why) when it
// listens beyond this host without a token.
func dashboardHandler(listen string, ui dashboard.Options, log zerolog.Logger) http.Handler {
	if !ui.Protected() && !loopback(listen) {
		log.Warn().Str("listen", listen).Msg("the web dashboard is off: --listen is not a loopback address and neither --ui-users nor a --ui-token is set")
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "the dashboard is off: gitfleet listens beyond this host without --ui-users or --ui-token-file", http.StatusForbidden)
		})
	}
	return dashboard.Handler(ui)
}

// uiOptions are the dashboard's sources over the git repository at dir:
// the status branch, and the history of branch and statusBranch.
func uiOptions(dir, branch, statusBranch string) dashboard.Options {
	open := func() (*git.Repository, error) { return openGit(dir) }
	return dashboard.Options{
		Source: dashboard.Branch(open, statusBranch),
		History: func(ctx context.Context, cluster string) (*history.Log, error) {
			g, err := open()
			if err != nil {
				return nil, err
			}
			src, err := sources.Open(ctx, sources.Options{Location: dir})
			if err != nil {
				return nil, err
			}
			defer src.Close()
			return history.Read(ctx, g, src, history.Options{Cluster: cluster, Branch: branch, StatusBranch: statusBranch})
		},
		MachineHistory: func(machine string) (*history.MachineLife, error) {
			g, err := open()
			if err != nil {
				return nil, err
			}
			return history.Machine(g, statusBranch, machine)
		},
	}
}

// loopback says whether addr (host:port) listens on this host only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// natsState is the daemon's NATS connection as /readyz sees it: nil while
// the daemon waits for NATS at start, with the last error.
type natsState struct {
	bus atomic.Pointer[natsbus.Bus]
	err atomic.Pointer[string]
	// lease is this replica's, once it campaigns.
	lease atomic.Pointer[reconciler.Lease]
}

func (n *natsState) waiting(err error) {
	if err == nil {
		n.err.Store(nil)
		return
	}
	msg := err.Error()
	n.err.Store(&msg)
}

// loopErrorBound is how long the reconciler loop may keep failing (store,
// publish, status) before /readyz fails.
const loopErrorBound = time.Minute

// stickyPort keeps the embedded NATS server on the same port across
// restarts, so the local provider's machines, which keep running while the
// daemon restarts, find it again. A file that cannot be read is said in
// the log: the server then takes any free port, which machines started
// before do not know.
func stickyPort(dataDir string, port int, log zerolog.Logger) int {
	if port != 0 {
		return port
	}
	p, err := readNATSPort(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if err != nil {
		log.Warn().Err(err).Msg("the embedded NATS server's last port is unknown: it takes a free port and remembers that one; local machines started before look for the old one (to keep them, write that port into the file, alone on its line, before the daemon starts)")
		return 0
	}
	return p
}

// natsPortFile names, in a data dir, the port of the daemon's embedded
// NATS server.
const natsPortFile = "nats.port"

// rememberPort writes the embedded server's port for the next start and
// for commands that reach the running daemon (gitfleet kubeconfig): whole
// or not at all, so a reader never meets an empty file.
func rememberPort(dataDir string, port int) error {
	return privfile.Write(filepath.Join(dataDir, natsPortFile), []byte(strconv.Itoa(port)+"\n"))
}

// readNATSPort reads the port rememberPort wrote.
func readNATSPort(dataDir string) (int, error) {
	file := filepath.Join(dataDir, natsPortFile)
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || p <= 0 || p > 65535 {
		return 0, fmt.Errorf("%s holds %q, not a port: remove it and restart the daemon, which writes it again", file, strings.TrimSpace(string(b)))
	}
	return p, nil
}
