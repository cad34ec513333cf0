package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestWorkerCredentials: gitfleet nats-creds makes a worker's credentials
// from the daemon's data dir, readable by its owner only; a worker run
// with them takes its identity from them (NAME_<host> by default), does
// its work on the daemon's embedded server, publishing its events on its
// own name's subject; a --worker-id of another credential is refused
// before anything is started, saying what to do.
func TestWorkerCredentials(t *testing.T) {
	dataDir := t.TempDir()
	bus := daemonBus(t, dataDir)
	creds := filepath.Join(t.TempDir(), "w1.creds")
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"nats-creds", "--data-dir", dataDir, "--worker", "w1", "--provider", "inmemory", "-o", creds}, &cmdEnv{stdout: &out, stderr: &errb}); code != 0 {
		t.Fatalf("nats-creds: exit %d: %s", code, errb.String())
	}
	if fi, err := os.Stat(creds); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v; want 0600", creds, err, fi.Mode().Perm())
	}
	if out.Len() != 0 {
		t.Errorf("nats-creds -o printed %q", out.String())
	}
	// Without -o, to standard output.
	out.Reset()
	if code := run(t.Context(), []string{"nats-creds", "--data-dir", dataDir, "--worker", "w2", "--provider", "inmemory"}, &cmdEnv{stdout: &out, stderr: &errb}); code != 0 || !strings.Contains(out.String(), "BEGIN NATS USER JWT") {
		t.Errorf("nats-creds to stdout: exit %d, %q", code, out.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"nats-creds", "--data-dir", dataDir}, "--worker is required"},
		// A data dir with no keys: credentials from keys made now would
		// be refused by every server.
		{[]string{"nats-creds", "--data-dir", filepath.Join(dataDir, "typo"), "--worker", "w1", "--provider", "inmemory"}, "holds no NATS keys"},
		{[]string{"nats-creds", "--data-dir", dataDir, "--worker", "w_1", "--provider", "inmemory"}, "no '_'"},
		// Credentials report one provider's machines: a report of a
		// provider whose machines do not live on one host covers all of
		// them, so credentials of any provider could have every machine
		// of another found gone.
		{[]string{"nats-creds", "--data-dir", dataDir, "--worker", "w1"}, "--provider is required"},
		{[]string{"nats-creds", "--data-dir", dataDir, "--worker", "w1", "--provider", "vsphere"}, `--provider "vsphere": unknown provider`},
		{[]string{"worker", "--provider", "docker", "--nats", bus.URL, "--nats-creds", creds},
			`--provider docker: the credentials in ` + creds + ` report provider "inmemory"'s machines only: make credentials for docker with gitfleet nats-creds --worker w1 --provider docker`},
		{[]string{"worker", "--provider", "inmemory", "--nats", bus.URL, "--nats-creds", creds, "--worker-id", "w2"},
			"the credentials in " + creds + " are worker w1's, whose identities are w1 or w1_<anything>"},
		{[]string{"worker", "--provider", "inmemory", "--nats", bus.URL, "--nats-creds", creds, "--worker-id", "w1x"}, "gitfleet nats-creds --worker w1x"},
	} {
		errb.Reset()
		if code := run(t.Context(), c.args, &cmdEnv{stdout: &bytes.Buffer{}, stderr: &errb}); code != exitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%s: exit %d, %q; want %d saying %q", strings.Join(c.args, " "), code, errb.String(), exitUsage, c.want)
		}
	}

	if _, err := os.Stat(filepath.Join(dataDir, "typo")); err == nil {
		t.Error("nats-creds made keys in a data dir that had none")
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var werr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"worker", "--provider", "inmemory", "--nats", bus.URL, "--nats-creds", creds, "--data-dir", t.TempDir(), "--log-format", "json"},
			&cmdEnv{stdout: &bytes.Buffer{}, stderr: &werr})
	}()
	waitUntil(t, "the worker starts", func() bool { return strings.Contains(werr.String(), "worker started") })
	if !strings.Contains(werr.String(), `"worker":"w1_`) {
		t.Errorf("the worker's identity is not w1_<host>: %s", werr.String())
	}
	task := wire.Task{ID: "t1", Operation: wire.OpCreate, Machine: wire.Machine{Name: "m", Cluster: "c", Provider: "inmemory", Version: "v1.30.0"}}
	runTask(t, ctx, bus.JS, task, "w1")
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("worker exit %d: %s", code, werr.String())
	}
	if strings.Contains(werr.String(), "Permissions Violation") {
		t.Errorf("the worker's credentials were refused something it does: %s", werr.String())
	}
}

// TestNATSCredsOnlyReads: gitfleet nats-creds reads the daemon's keys and
// writes nothing but its output. Given a data dir without them (a wrong
// --data-dir), it says so and makes none: before, it made a whole new
// operator and account there and printed credentials no server trusts,
// exiting 0. It leaves the daemon's folder as it found it (it rewrote
// daemon.creds, and revoked and removed a worker.creds, as root when run
// so). -o never replaces a file, nor writes in the daemon's folder: -o
// over account.nk lost the account's key, and a worker.creds written
// there is revoked at the daemon's next start.
func TestNATSCredsOnlyReads(t *testing.T) {
	run1 := func(args ...string) (int, string) {
		var errb bytes.Buffer
		code := run(t.Context(), append([]string{"nats-creds", "--provider", "inmemory"}, args...), &cmdEnv{stdout: &bytes.Buffer{}, stderr: &errb})
		return code, errb.String()
	}
	empty := t.TempDir()
	if code, msg := run1("--data-dir", empty, "--worker", "w1"); code == 0 || !strings.Contains(msg, "no NATS keys") {
		t.Errorf("nats-creds on a data dir without keys: exit %d, %q; want it refused, saying so", code, msg)
	}
	if _, err := os.Stat(filepath.Join(empty, natsbus.AuthDirName)); err == nil {
		t.Errorf("nats-creds made %s", filepath.Join(empty, natsbus.AuthDirName))
	}

	dataDir := t.TempDir()
	authDir := filepath.Join(dataDir, natsbus.AuthDirName)
	if _, err := natsbus.LoadAuth(authDir); err != nil { // as the daemon's start does
		t.Fatal(err)
	}
	// A worker.creds an earlier version wrote: the daemon's to revoke.
	legacy := filepath.Join(authDir, natsbus.LegacyWorkerCredsFile)
	if err := os.WriteFile(legacy, []byte("an earlier version's"), 0o600); err != nil {
		t.Fatal(err)
	}
	folder := func() map[string]string {
		out := map[string]string{}
		files, _ := os.ReadDir(authDir)
		for _, f := range files {
			data, _ := os.ReadFile(filepath.Join(authDir, f.Name()))
			out[f.Name()] = string(data)
		}
		return out
	}
	before := folder()
	out := filepath.Join(t.TempDir(), "w1.creds")
	if code, msg := run1("--data-dir", dataDir, "--worker", "w1", "-o", out); code != 0 {
		t.Fatalf("nats-creds: exit %d, %s", code, msg)
	}
	after := folder()
	for name, data := range before {
		if after[name] != data {
			t.Errorf("nats-creds changed %s", name)
		}
	}
	if len(after) != len(before) {
		t.Errorf("the daemon's folder held %d files, now %d", len(before), len(after))
	}

	// -o over a file that exists, or into the daemon's folder.
	accountKey := before["account.nk"]
	for _, c := range []struct{ path, want string }{
		{out, "exists"},
		{filepath.Join(authDir, "account.nk"), "the daemon's own folder"},
		{filepath.Join(authDir, "w2.creds"), "the daemon's own folder"},
	} {
		prev, _ := os.ReadFile(c.path)
		if code, msg := run1("--data-dir", dataDir, "--worker", "w2", "-o", c.path); code != exitUsage || !strings.Contains(msg, c.want) {
			t.Errorf("-o %s: exit %d, %q; want it refused saying %q", c.path, code, msg, c.want)
		}
		if now, _ := os.ReadFile(c.path); !bytes.Equal(now, prev) {
			t.Errorf("-o %s changed it", c.path)
		}
	}
	if key, _ := os.ReadFile(filepath.Join(authDir, "account.nk")); string(key) != accountKey {
		t.Error("the account's key was lost")
	}
}

// TestLocalWorkerKeepsItsIdentity: a local worker's machines are its
// identity's, so one that would start as another identity on the same
// state folder is refused, saying which to take. The upgrade to worker
// credentials did just that: a worker of an earlier version ran as its
// host name and a hash of its folder, and with credentials NAME and no
// --worker-id it came back as NAME_<that>, whose report listed every
// machine of the folder as a copy of another worker's: all were deleted as
// orphans, and their records stayed Running with no node behind them.
func TestLocalWorkerKeepsItsIdentity(t *testing.T) {
	dataDir := t.TempDir()
	bus := daemonBus(t, dataDir)
	authDir := filepath.Join(dataDir, natsbus.AuthDirName)
	credsFor := func(name string) string {
		path := filepath.Join(t.TempDir(), name+".creds")
		var errb bytes.Buffer
		if code := run(t.Context(), []string{"nats-creds", "--data-dir", dataDir, "--worker", name, "--provider", "local", "-o", path}, &cmdEnv{stdout: &bytes.Buffer{}, stderr: &errb}); code != 0 {
			t.Fatalf("nats-creds --worker %s: exit %d: %s", name, code, errb.String())
		}
		return path
	}
	// A state folder an earlier version's worker filled, under its
	// default identity.
	state := filepath.Join(t.TempDir(), "local")
	if err := os.MkdirAll(filepath.Join(state, "c1", "c1-md-0-abcde"), 0o700); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(state)
	earlier := providers.DefaultWorkerID(abs)
	// A refused worker returns at once; one that starts runs until ctx
	// ends (refused wants a ctx that does).
	refused := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	worker := func(ctx context.Context, errb *syncBuffer, creds string, extra ...string) int {
		args := append([]string{"worker", "--provider", "local", "--nats", bus.URL, "--nats-creds", creds,
			"--nats-node-signer", filepath.Join(authDir, natsbus.NodeSignerFile), "--state-dir", state,
			"--data-dir", t.TempDir(), "--log-format", "json"}, extra...)
		return run(ctx, args, &cmdEnv{stdout: &bytes.Buffer{}, stderr: errb})
	}

	// Credentials of another name and no --worker-id: refused, naming the
	// identity to keep and the credentials to make for it.
	var errb syncBuffer
	if code := worker(refused(), &errb, credsFor("host-1-local")); code != exitUsage || !strings.Contains(errb.String(), "--worker-id "+earlier) ||
		!strings.Contains(errb.String(), "gitfleet nats-creds --worker "+wire.WorkerCredential(earlier)) {
		t.Fatalf("a worker that would take over %s's machines as another: exit %d, %s", earlier, code, errb.String())
	}

	// As the identity the machines are: it runs, and the folder says whose
	// they are from then on.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan int, 1)
	var out syncBuffer
	creds := credsFor(wire.WorkerCredential(earlier))
	go func() { done <- worker(ctx, &out, creds, "--worker-id", earlier) }()
	waitUntil(t, "the worker starts", func() bool { return strings.Contains(out.String(), "worker started") })
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("the worker as %s: exit %d: %s", earlier, code, out.String())
	}
	if b, err := os.ReadFile(filepath.Join(state, "worker-id")); err != nil || strings.TrimSpace(string(b)) != earlier {
		t.Errorf("the state folder names %q (%v); want %s", b, err, earlier)
	}

	// Once recorded, any other identity is refused, --worker-id included.
	for _, extra := range [][]string{nil, {"--worker-id", "host-1-local_x"}} {
		var errb syncBuffer
		code := worker(refused(), &errb, credsFor("host-1-local"), extra...)
		if code != exitUsage || !strings.Contains(errb.String(), "belong to worker "+earlier) {
			t.Errorf("worker %v on %s's folder: exit %d, %s", extra, earlier, code, errb.String())
		}
	}
}

// TestWorkerIdentityFits: a credential's name may be as long as an
// identity, and the default identity NAME_<host> then is longer than any
// worker may have. The worker is refused at once, saying which --worker-id
// to give, and writes nothing: it wrote that identity in its state folder,
// then providers refused it, and every start after, with a valid
// --worker-id, was refused too, its folder's machines (none) said to
// belong to the invalid one. A --worker-id too long is refused the same
// way, and a folder that names an identity no worker can have (an earlier
// version's doing) takes the valid one.
func TestWorkerIdentityFits(t *testing.T) {
	dataDir := t.TempDir()
	bus := daemonBus(t, dataDir)
	long := strings.Repeat("a", wire.MaxWorkerID-len("-local")) + "-local"
	creds := filepath.Join(t.TempDir(), "long.creds")
	var errb bytes.Buffer
	if code := run(t.Context(), []string{"nats-creds", "--data-dir", dataDir, "--worker", long, "--provider", "local", "-o", creds}, &cmdEnv{stdout: &bytes.Buffer{}, stderr: &errb}); code != 0 {
		t.Fatalf("nats-creds --worker %s: exit %d: %s", long, code, errb.String())
	}
	worker := func(ctx context.Context, errb *syncBuffer, state string, extra ...string) int {
		args := append([]string{"worker", "--provider", "local", "--nats", bus.URL, "--nats-creds", creds,
			"--nats-node-signer", filepath.Join(dataDir, natsbus.AuthDirName, natsbus.NodeSignerFile), "--state-dir", state,
			"--data-dir", t.TempDir(), "--log-format", "json"}, extra...)
		return run(ctx, args, &cmdEnv{stdout: &bytes.Buffer{}, stderr: errb})
	}
	state := filepath.Join(t.TempDir(), "local")
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{nil, "give --worker-id " + long + ","},
		{[]string{"--worker-id", long + "_host-1"}, "--worker-id \"" + long + "_host-1\": a worker's identity is letters, digits, '-' and '_' (not first), at most 128"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		var errb syncBuffer
		code := worker(ctx, &errb, state, c.extra...)
		cancel()
		if code != exitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("worker %v with credentials of %d characters: exit %d, %s; want %d saying %q", c.extra, len(long), code, errb.String(), exitUsage, c.want)
		}
		if b, err := os.ReadFile(filepath.Join(state, "worker-id")); err == nil {
			t.Errorf("worker %v, refused, wrote %s naming %q", c.extra, filepath.Join(state, "worker-id"), b)
		}
	}

	// With a --worker-id that fits it runs, on that folder and on one
	// where an earlier version wrote an identity no worker can have.
	other := filepath.Join(t.TempDir(), "local")
	if err := os.MkdirAll(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "worker-id"), []byte(long+"_host-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{state, other} {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan int, 1)
		var out syncBuffer
		go func() { done <- worker(ctx, &out, dir, "--worker-id", long) }()
		waitUntil(t, "the worker starts", func() bool {
			select {
			case code := <-done:
				t.Fatalf("the worker as %s on %s: exit %d: %s", long, dir, code, out.String())
			default:
			}
			return strings.Contains(out.String(), "worker started")
		})
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("the worker as %s: exit %d: %s", long, code, out.String())
		}
		if b, err := os.ReadFile(filepath.Join(dir, "worker-id")); err != nil || strings.TrimSpace(string(b)) != long {
			t.Errorf("%s names %q (%v); want %s", filepath.Join(dir, "worker-id"), b, err, long)
		}
	}
}

// TestWorkerWithAnOperatorsUser: docs/operations.md lets operators who run
// their own NATS accounts give a worker's user the permissions of its
// table, subscribe _INBOX_worker.NAME.> among them. Such a user carries no
// tag of gitfleet's, and the worker asked for its replies on _INBOX, which
// the server refused: every JetStream request went unanswered, and the
// worker waited for NATS for ever, its log saying "timeout". It now hears
// them on _INBOX_worker.NAME, NAME being its identity up to the first '_',
// and runs a task to its end; a user that may not subscribe there has the
// worker say so, naming the subjects to allow. A user that may hear _INBOX
// only (an earlier version's worker.creds) still runs one.
func TestWorkerWithAnOperatorsUser(t *testing.T) {
	dataDir := t.TempDir()
	bus := daemonBus(t, dataDir)
	// A user the operator made with the account's key (nsc add user), as
	// the table says, tagged with nothing.
	user := func(name string, perm func(*jwt.Permissions)) string {
		account := readSeed(t, filepath.Join(dataDir, natsbus.AuthDirName, "account.nk"))
		u, _ := nkeys.CreateUser()
		pub, _ := u.PublicKey()
		seed, _ := u.Seed()
		uc := jwt.NewUserClaims(pub)
		uc.Name = name
		perm(&uc.Permissions)
		j, err := uc.Encode(account)
		if err != nil {
			t.Fatal(err)
		}
		creds, _ := jwt.FormatUserConfig(j, seed)
		path := filepath.Join(t.TempDir(), name+".creds")
		if err := os.WriteFile(path, creds, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// start runs a worker until it starts, or its log says want (then it
	// is stopped); it fails the test when neither comes within 20s.
	start := func(ctx context.Context, creds, id, want string) (stop func() string) {
		ctx, cancel := context.WithCancel(ctx)
		var errb syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, []string{"worker", "--provider", "inmemory", "--nats", bus.URL, "--nats-creds", creds, "--worker-id", id,
				"--data-dir", t.TempDir(), "--log-format", "json"}, &cmdEnv{stdout: &bytes.Buffer{}, stderr: &errb})
		}()
		stop = func() string {
			cancel()
			<-done
			return errb.String()
		}
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(errb.String(), want); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("worker %s: not %q within 20s: %s", id, want, stop())
			}
		}
		return stop
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w1 := user("w1", func(p *jwt.Permissions) { natsbus.WorkerPermissions(p, "w1", "inmemory") })
	stop := start(ctx, w1, "w1_a", "worker started")
	runTask(t, ctx, bus.JS, wire.Task{ID: "t1", Operation: wire.OpCreate, Machine: wire.Machine{Name: "m", Cluster: "c", Provider: "inmemory", Version: "v1.30.0"}}, "w1")
	if log := stop(); strings.Contains(log, "Permissions Violation") {
		t.Errorf("the operator's worker user was refused something the worker does: %s", log)
	}

	// A user made for another name: the worker says what its user lacks.
	other := user("w2", func(p *jwt.Permissions) { natsbus.WorkerPermissions(p, "other", "inmemory") })
	want := "allow the user to subscribe to " + wire.WorkerInboxPrefix("w2") + ".>"
	stop = start(ctx, other, "w2", want)
	stop()

	// An earlier version's pattern, which hears _INBOX only.
	legacy := user("gitfleet-worker", func(p *jwt.Permissions) {
		natsbus.WorkerPermissions(p, "w3", "inmemory")
		p.Sub.Allow = jwt.StringList{"_INBOX.>", wire.SubjectInventoryRequest}
	})
	stop = start(ctx, legacy, "w3", "worker started")
	if log := stop(); strings.Contains(log, "Permissions Violation") {
		t.Errorf("a worker on a user that hears _INBOX was refused something: %s", log)
	}
}

// daemonBus is the daemon's embedded NATS server on dataDir, with its
// streams, as gitfleet up starts it: its credentials are made in
// DATA-DIR/nats-auth, for nats-creds to mint workers' from. It is closed
// when the test ends.
func daemonBus(t *testing.T, dataDir string) *natsbus.Bus {
	t.Helper()
	bus, err := natsbus.Open(t.Context(), natsbus.Options{URL: natsbus.Embedded, DataDir: dataDir}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Close)
	if err := natsbus.Ensure(t.Context(), bus.JS); err != nil {
		t.Fatal(err)
	}
	return bus
}
