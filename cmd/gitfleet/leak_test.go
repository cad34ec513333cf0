package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/bootstrap"
	"github.com/gitfleet/gitfleet/providers/natsbus"
)

// leaks gathers, during an end-to-end run, the secrets gitfleet made (the
// machines' bootstrap tokens, the clusters' CA keys and certificate keys,
// read from the machines' own bootstrap data) and where they must never
// appear: every NATS message, every process's arguments.
type leaks struct {
	mu      sync.Mutex
	secrets map[string]string // secret → what it is
	bodies  bytes.Buffer      // every NATS message seen: subject and body
	args    map[string]bool   // every command line seen
	nc      *nats.Conn
}

// tapNATS subscribes to every subject of the daemon's embedded server, as
// the daemon (whose credentials may hear everything).
func (e *e2e) tapNATS(l *leaks) {
	e.t.Helper()
	var port int
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if port, err = readNATSPort(e.data); err == nil {
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("tap NATS: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	opts := natsbus.Options{CredsFile: filepath.Join(e.data, natsbus.AuthDirName, natsbus.DaemonCredsFile), Name: "leak-tap"}
	var nc *nats.Conn
	for {
		var err error
		nc, err = natsbus.Connect(e.t.Context(), "nats://127.0.0.1:"+strconv.Itoa(port), opts, zerolog.Nop())
		if err == nil || time.Now().After(deadline) {
			if err != nil {
				e.t.Fatalf("tap NATS: %v", err)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := nc.Subscribe(">", func(m *nats.Msg) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.bodies.WriteString(m.Subject + " ")
		l.bodies.Write(m.Data)
		l.bodies.WriteByte('\n')
	}); err != nil {
		e.t.Fatal(err)
	}
	l.nc = nc
	e.t.Cleanup(nc.Close)
}

// collect reads the secrets in every running machine's bootstrap data,
// and every process's command line.
func (e *e2e) collect(l *leaks) {
	e.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	files, _ := filepath.Glob(filepath.Join(e.data, "local", "*", "*", "user-data"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		d, err := bootstrap.Parse(b)
		if err != nil {
			e.t.Errorf("%s: %v", f, err)
			continue
		}
		l.secrets[d.Token] = "bootstrap token of " + d.Node
		if _, secret, ok := strings.Cut(d.Token, "."); ok {
			l.secrets[secret] = "bootstrap token secret of " + d.Node
		}
		if d.CertificateKey != "" {
			l.secrets[d.CertificateKey] = "certificate key of " + d.Node + "'s cluster"
		}
		for path, content := range d.Files {
			if !strings.HasSuffix(path, ".key") {
				continue
			}
			// The key's body, without its PEM armour: found wherever it
			// is copied, whatever the line breaks.
			body := strings.Join(strings.Fields(strings.NewReplacer("-----BEGIN EC PRIVATE KEY-----", "", "-----END EC PRIVATE KEY-----", "").Replace(content)), "")
			l.secrets[body[:min(len(body), 64)]] = path + " of " + d.Node + "'s cluster"
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			l.args[string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))] = true
		}
	}
}

// check fails the test for every secret found in the Git history (every
// object of every branch of the fleet repository), the logs (the daemon's
// and every machine's still on disk), the NATS messages or a command line.
func (e *e2e) checkLeaks(l *leaks) {
	e.t.Helper()
	if l.nc != nil {
		_ = l.nc.Flush()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.secrets) < 10 {
		e.t.Fatalf("only %d secrets gathered from the machines' bootstrap data", len(l.secrets))
	}
	places := map[string]string{"NATS messages": l.bodies.String()}
	var args strings.Builder
	for a := range l.args {
		args.WriteString(a + "\n")
	}
	places["process arguments"] = args.String()
	// The dashboard's pages and JSON API (docs/dashboard.md: they show the
	// status branch, which holds no secret).
	var dash strings.Builder
	paths := []string{"/", "/rollouts", "/history", "/api/v1/fleet", "/api/v1/clusters", "/api/v1/rollouts", "/api/v1/history"}
	for _, c := range e.status().Clusters {
		paths = append(paths, "/clusters/"+c.Name, "/api/v1/clusters/"+c.Name, "/api/v1/history?cluster="+c.Name)
	}
	for _, p := range paths {
		code, body := httpGet("http://" + e.listen + p)
		if code != 200 {
			e.t.Errorf("the dashboard's %s: %d", p, code)
		}
		dash.WriteString(body)
	}
	places["the dashboard"] = dash.String()
	logs, _ := filepath.Glob(filepath.Join(e.data, "local", "*", "*", "node.log"))
	for _, f := range append(logs, e.logFile) {
		b, _ := os.ReadFile(f)
		places[f] = string(b)
	}
	g, err := git.PlainOpen(e.repo)
	if err != nil {
		e.t.Fatal(err)
	}
	var history bytes.Buffer
	blobs, _ := g.BlobObjects()
	_ = blobs.ForEach(func(b *object.Blob) error {
		r, err := b.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		_, err = history.ReadFrom(r)
		return err
	})
	commits, _ := g.CommitObjects()
	_ = commits.ForEach(func(c *object.Commit) error {
		history.WriteString(c.Message + "\n")
		return nil
	})
	places["Git history"] = history.String()
	if len(l.bodies.String()) < 1000 || history.Len() < 1000 {
		e.t.Fatalf("too little to scan: %d bytes of NATS messages, %d of Git objects", l.bodies.Len(), history.Len())
	}
	for where, text := range places {
		if strings.Contains(text, "PRIVATE KEY") {
			e.t.Errorf("%s holds a private key", where)
		}
		for s, what := range l.secrets {
			if strings.Contains(text, s) {
				e.t.Errorf("%s holds the %s", where, what)
			}
		}
	}
}
