package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/internal/memreturn"
	"github.com/gitfleet/gitfleet/internal/privfile"
	"github.com/gitfleet/gitfleet/pki"
	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/docker"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/local"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

func init() {
	register(&command{
		name:         "worker",
		usage:        "worker --provider inmemory|local|docker [--nats URL] [--secrets-key-file F] [--concurrency N] [--listen ADDR]",
		summary:      "run a provider worker: take machine tasks from NATS, report events",
		run:          runWorker,
		untilStopped: always,
	})
}

func runWorker(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("worker", env)
	nopts := natsbus.Options{URL: natsbus.Embedded, Name: "gitfleet-worker", Worker: true}
	nopts.BindFlags(fs)
	provider := fs.String("provider", "", "provider to run: inmemory, local or docker")
	var dk dockerFlags
	dk.bind(fs)
	dataDir := fs.String("data-dir", ".gitfleet", "where the worker keeps its state: the NATS store and credentials (with --nats embedded), local/ (machines), docker/ (seeds), and the default secrets.key (gitfleet up and serve use .gitfleet/data)")
	stateDir := fs.String("state-dir", "", "local: folder of the machines' state folders (default DATA-DIR/local)")
	nodeBinary := fs.String("node-binary", "", "local: the gitfleet binary that runs nodes (default: this one)")
	var wopts providers.WorkerOptions
	var lo logOptions
	lo.bindFlags(fs)
	fs.IntVar(&wopts.Concurrency, "concurrency", 4, "tasks run at once")
	fs.DurationVar(&wopts.AckWait, "ack-wait", 30*time.Second, "redeliver a task whose worker has not acked or reported progress for this long")
	fs.IntVar(&wopts.MaxAttempts, "max-attempts", 10, "attempts before a failing task becomes a Failed machine")
	fs.DurationVar(&wopts.InventoryInterval, "inventory-interval", time.Minute, "how often the provider's machines are reported to the daemon (also at start and when a leader asks)")
	listen := fs.String("listen", "", "HTTP address for /healthz, /readyz and /metrics, e.g. 127.0.0.1:8081; empty: none")
	keyFile := fs.String("secrets-key-file", "", "the daemon's secrets key, to open machines' bootstrap data (default DATA-DIR/secrets.key when it exists)")
	id := fs.String("worker-id", "", "this worker's identity (letters, digits, '-' and '_' (not first), at most 128), the same across restarts (default: host name, plus a hash of --state-dir for local; with credentials of gitfleet nats-creds --worker NAME, NAME_ before it, and it must be NAME or begin with NAME_)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	switch *provider {
	case inmemory.Name, local.Name, docker.Name:
	case "":
		return &exitError{code: exitUsage, err: fmt.Errorf("--provider is required: inmemory, local or docker")}
	default:
		return &exitError{code: exitUsage, err: fmt.Errorf("--provider %q: unknown provider (want inmemory, local or docker)", *provider)}
	}
	log, err := lo.logger(env.stderr)
	if err != nil {
		return err
	}
	// The worker names its provider on its own lines; the provider's
	// lines get it here.
	wopts.Log = log
	// A quiet worker gives back the pages its inventories used.
	go memreturn.Run(ctx, memreturn.Options{Log: log})
	plog := log.With().Str("provider", *provider).Logger()
	nopts.DataDir = *dataDir
	nopts.ResolveCredentials()
	dir := *stateDir
	if dir == "" {
		dir = filepath.Join(*dataDir, "local")
	}
	// A worker credential (gitfleet nats-creds --worker NAME) publishes
	// in NAME's name and hears NAME's inbox only: the worker's identity
	// must be NAME's, and its replies come to that inbox (workerInbox).
	cred, credProvider := "", ""
	if nopts.CredsFile != "" {
		if cred, credProvider, err = natsbus.CredsWorker(nopts.CredsFile); err != nil {
			return err
		}
	}
	if cred != "" && credProvider != *provider {
		return &exitError{code: exitUsage, err: fmt.Errorf("--provider %s: the credentials in %s report provider %q's machines only: make credentials for %s with gitfleet nats-creds --worker %s --provider %s",
			*provider, nopts.CredsFile, credProvider, *provider, cred, *provider)}
	}
	if wopts.ID, err = workerID(*id, *provider, dir, cred, nopts.CredsFile); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if *provider == local.Name {
		if err := keepIdentity(dir, wopts.ID, *id != "", cred); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	}
	nopts.InboxPrefix = workerInbox(wopts.ID, cred, nopts.CredsFile)

	bus, err := natsbus.OpenWait(ctx, nopts, log, nil)
	if err != nil {
		return err
	}
	defer bus.Close()
	signer, err := bus.NodeSigner(nopts)
	if err != nil {
		return err
	}
	p, err := newProvider(ctx, *provider, bus.JS, local.Options{StateDir: dir, Binary: *nodeBinary, NATSURL: bus.URL, NATS: nopts,
		NodeSigner: signer, Log: plog}, dk.options(*dataDir, bus.URL))
	if err != nil {
		return err
	}
	defer closeProvider(p, plog) // after the worker drained (Run returned)
	if wopts.Keys, err = workerKeys(*keyFile, *dataDir); err != nil {
		return err
	}
	w, err := providers.NewWorker(ctx, bus.JS, p, wopts)
	if err != nil {
		return err
	}
	if *listen != "" {
		srv, err := serveWorkerHTTP(ctx, *listen, bus, w)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	return w.Run(ctx)
}

// workerKeys loads the secrets key: the file named, else the data dir's
// when there is one; nil without either (a create with bootstrap data
// then fails, saying so).
func workerKeys(file, dataDir string) (*pki.Keyring, error) {
	if file == "" {
		file = filepath.Join(dataDir, secretsKeyName)
		if _, err := os.Stat(file); err != nil {
			return nil, nil
		}
	}
	return pki.LoadKeyring(file)
}

// serveWorkerHTTP serves a worker's /healthz (alive), /readyz (connected
// to NATS, JetStream answers) and /metrics (its tasks by outcome, Go and
// process figures).
func serveWorkerHTTP(ctx context.Context, addr string, bus *natsbus.Bus, w *providers.Worker) (*http.Server, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), w.Collector())
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprintln(rw, "ok") })
	mux.HandleFunc("/readyz", func(rw http.ResponseWriter, r *http.Request) {
		if !bus.Conn.IsConnected() {
			http.Error(rw, "not connected to NATS", http.StatusServiceUnavailable)
			return
		}
		actx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := bus.JS.AccountInfo(actx); err != nil {
			http.Error(rw, "JetStream does not answer: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, "ok")
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, BaseContext: func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second, WriteTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}

// newProvider makes the provider called name. Only local uses lo (its state
// dir, node binary and the NATS its nodes report to); inmemory keeps its
// machines in a bucket on js.
func newProvider(ctx context.Context, name string, js jetstream.JetStream, lo local.Options, do docker.Options) (providers.Provider, error) {
	switch name {
	case docker.Name:
		do.NATS, do.NodeSigner, do.Log = lo.NATS, lo.NodeSigner, lo.Log
		p, err := docker.New(do)
		if err != nil {
			return nil, err
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := p.Ping(pctx); err != nil {
			_ = p.Close()
			return nil, err
		}
		return p, nil
	case inmemory.Name:
		return inmemory.New(ctx, js, inmemory.Options{Replicas: lo.NATS.Replicas})
	case local.Name:
		return local.New(lo)
	}
	return nil, fmt.Errorf("unknown provider %q (want inmemory, local or docker)", name)
}

// closeProvider releases what a provider holds, once no worker runs it
// any more: docker's client and its watch of the Engine's events, which
// would otherwise live until the process ends.
func closeProvider(p providers.Provider, log zerolog.Logger) {
	c, ok := p.(io.Closer)
	if !ok {
		return
	}
	if err := c.Close(); err != nil {
		log.Warn().Err(err).Msg("closing the provider")
	}
}

// dockerFlags are the docker provider's.
type dockerFlags struct{ image, natsURL string }

func (d *dockerFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&d.image, "docker-image", docker.DefaultImage, "docker: the machines' image, built by make images (never pulled)")
	fs.StringVar(&d.natsURL, "docker-nats-url", "", "docker: NATS as the machines' containers reach it (default: --nats with 127.0.0.1 as host.docker.internal; the server must listen where containers reach it)")
}

// options are the docker provider's options: seeds under the data dir,
// and a NATS URL the containers can dial.
func (d dockerFlags) options(dataDir, natsURL string) docker.Options {
	u := d.natsURL
	if u == "" {
		u = strings.NewReplacer("127.0.0.1", "host.docker.internal", "localhost", "host.docker.internal", "0.0.0.0", "host.docker.internal").Replace(natsURL)
	}
	return docker.Options{Image: d.image, SeedDir: filepath.Join(dataDir, "docker"), NATSURL: u}
}

// workerIDFile, in a local worker's state folder, names the identity of
// the worker its machines belong to.
const workerIDFile = "worker-id"

// keepIdentity refuses to run a local worker as another identity than the
// one its state folder's machines belong to: the leader would take each
// machine it reports for a copy of the record's worker's, and delete it as
// an orphan, while the records stayed with an identity no worker has any
// more. The folder names its identity (workerIDFile) from the first start
// on. One that holds machines and names none was filled by a worker of an
// earlier version, whose identity was the default unless its --worker-id
// gave another: a start that takes its identity from worker credentials
// (given is false) would have another, and is refused, naming the one to
// keep; a --worker-id is taken at its word. A file that names an identity
// no worker can have (written before it was refused) is replaced.
func keepIdentity(stateDir, id string, given bool, cred string) error {
	path := filepath.Join(stateDir, workerIDFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil && !validWorkerID(strings.TrimSpace(string(data))):
		// An identity no worker can have, which an earlier version wrote
		// before it refused it: no machine is its.
		if err := privfile.Write(path, []byte(id+"\n")); err != nil {
			return fmt.Errorf("worker identity: %w", err)
		}
		return nil
	case err == nil:
		was := strings.TrimSpace(string(data))
		if was == id {
			return nil
		}
		return fmt.Errorf("the machines in %s belong to worker %s, and this worker would be %s: the daemon would take them for copies and delete them. "+
			"Run it as %s (--worker-id %s, with credentials of gitfleet nats-creds --worker %s --provider local); to give its machines up (they are deleted and made again), remove %s",
			stateDir, was, id, was, was, wire.WorkerCredential(was), path)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("worker identity: %w", err)
	}
	if machines, _ := filepath.Glob(filepath.Join(stateDir, "*", "*")); len(machines) > 0 && !given && cred != "" {
		abs, err := filepath.Abs(stateDir)
		if err != nil {
			abs = stateDir
		}
		was := providers.DefaultWorkerID(abs)
		return fmt.Errorf("%s holds machines that a worker of an earlier version made, as %s unless its --worker-id gave another identity, and this worker would be %s: "+
			"the daemon would take them for copies and delete them. Run it as the identity they belong to: --worker-id %s (or the one its --worker-id gave: "+
			"the worker= of its log, the worker: of its machines in the status branch), with credentials of gitfleet nats-creds --worker %s --provider local (the identity up to its first '_')",
			stateDir, was, id, was, wire.WorkerCredential(was))
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("worker identity: %w", err)
	}
	if err := privfile.Create(path, []byte(id+"\n")); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("worker identity: %w", err)
	}
	return nil
}

// workerID is the worker's identity: --worker-id, or the host name, with
// a hash of the state folder for local (two folders on one host are two
// workers with different machines). With a worker credential cred (from
// credsFile), the identity is cred or cred_<anything>: --worker-id must
// be, and the default is cred_ and the host name. An identity no worker
// may have (wire.ValidWorker, the part before its first '_' a credential's
// name) is refused here, before anything is written in its name, saying
// which flag to give; a default too long is not cut, since two hosts whose
// names differ at their end would then be one worker.
func workerID(flag, provider, stateDir, cred, credsFile string) (string, error) {
	if flag != "" && !validWorkerID(flag) {
		return "", fmt.Errorf("--worker-id %q: a worker's identity is letters, digits, '-' and '_' (not first), at most %d of them", flag, wire.MaxWorkerID)
	}
	id := flag
	if id == "" {
		id = providers.DefaultWorkerID("")
		if provider == local.Name {
			abs, err := filepath.Abs(stateDir)
			if err != nil {
				abs = stateDir
			}
			id = providers.DefaultWorkerID(abs)
		}
		host := id
		if cred != "" {
			id = cred + "_" + id
		}
		switch {
		case cred != "" && len(id) > wire.MaxWorkerID:
			give := "--worker-id " + cred
			if room := wire.MaxWorkerID - len(cred) - 1; room > 0 {
				give += fmt.Sprintf(" (or %s_ and at most %d characters)", cred, room)
			}
			return "", fmt.Errorf("the default identity %s_%s (the name of the credentials in %s, then this host's) is %d characters, more than %d: give %s, or make credentials of a name of at most %d characters (gitfleet nats-creds --worker NAME --provider %s)",
				cred, host, credsFile, len(id), wire.MaxWorkerID, give, max(wire.MaxWorkerID-len(host)-1, 1), provider)
		case !validWorkerID(id):
			return "", fmt.Errorf("the default identity %q, from the host name, cannot be a worker's: give --worker-id (letters, digits, '-' and '_' (not first), at most %d of them)", id, wire.MaxWorkerID)
		}
	}
	if cred != "" && wire.WorkerCredential(id) != cred {
		return "", fmt.Errorf("--worker-id %s: the credentials in %s are worker %s's, whose identities are %s or %s_<anything>: give one of those, or make credentials for %s with gitfleet nats-creds --worker %s --provider %s",
			id, credsFile, cred, cred, cred, wire.WorkerCredential(id), wire.WorkerCredential(id), provider)
	}
	return id, nil
}

// validWorkerID reports whether id can be a worker's identity, as
// providers.NewWorker checks it: one whose part before any '_' can name
// its NATS credentials.
func validWorkerID(id string) bool {
	return wire.ValidWorker(id) && wire.ValidCredential(wire.WorkerCredential(id))
}

// workerInbox is the inbox prefix the worker id hears its replies on: its
// credential's own, wire.WorkerInboxPrefix of its identity up to the first
// '_', the only inbox a worker's user may hear (docs/operations.md, "Who
// may do what"), whoever made that user: gitfleet nats-creds (cred), or
// an operator who gave one of their own the table's permissions, with a
// JWT or not. It is "" (_INBOX) only when the JWT of credsFile, which
// gitfleet did not make, refuses that inbox and lets the user hear _INBOX:
// an earlier version's worker.creds, or a user made to its pattern.
func workerInbox(id, cred, credsFile string) string {
	own := wire.WorkerInboxPrefix(wire.WorkerCredential(id))
	if cred != "" || credsFile == "" {
		return own
	}
	refused := func(prefix string) bool {
		forbid, err := natsbus.CredsForbidSubscribe(credsFile, prefix+".reply.x")
		return err == nil && forbid
	}
	if refused(own) && !refused(strings.TrimSuffix(nats.InboxPrefix, ".")) {
		return ""
	}
	return own
}
