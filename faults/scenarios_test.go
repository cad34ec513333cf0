package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gitfleet/gitfleet/internal/freeport"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// scenario is one fault: setup (optional) shapes the fleet before its
// first process starts, fault runs on the converged fleet and leaves it to
// recover, verify (optional) checks what only this scenario can tell.
type scenario struct {
	name   string
	short  bool // part of make test's short suite
	setup  func(f *fleet)
	fault  func(f *fleet)
	verify func(f *fleet)
}

// ackWait is the workers' --ack-wait in the scenarios that pause one.
const ackWait = 2 * time.Second

var scenarios = []scenario{
	{name: "worker SIGKILL mid-create, restarted", short: true, fault: func(f *fleet) {
		f.stopWorker()
		// Scale up, so creates are in flight when the worker dies.
		f.edit("clusters/dev-1.yaml", "replicas: 2", "replicas: 4")
		want["dev-1"] = 5
		f.startWorker()
		f.waitFor("the first new node", time.Minute, func() bool { return len(f.nodes()) >= 10 })
		f.stopWorker()
		f.startWorker()
	}},
	{name: "reboot: every node killed while the daemon is down", short: true, fault: func(f *fleet) {
		f.stopDaemon()
		f.stopWorker()
		for _, n := range f.nodes() {
			_ = syscall.Kill(n.pid, syscall.SIGKILL)
		}
		f.startWorker()
		f.startDaemon()
	}},
	{name: "NATS store deleted with machines running", fault: func(f *fleet) {
		f.stopDaemon()
		f.stopWorker()
		f.nats.Kill()
		if err := os.RemoveAll(f.nats.Store); err != nil {
			f.t.Fatal(err)
		}
		f.nats.Start()
		f.startWorker()
		f.startDaemon()
	}},
	{name: "nats-server SIGKILL and restart on its store", fault: func(f *fleet) {
		f.nats.Kill()
		time.Sleep(time.Second)
		f.nats.Start()
	}},
	{name: "daemon SIGKILL mid-rollout", fault: func(f *fleet) {
		before := f.nodeNames()
		f.edit("classes/standard.yaml", "version: v1.31.2", "version: v1.32.0")
		// Kill it as the first machine of the new version starts.
		f.waitFor("the first machine of the new version", time.Minute, func() bool { return f.hasNew(before) })
		f.stopDaemon()
		f.startDaemon()
	}},
	{name: "stray machine (orphan)", fault: func(f *fleet) {
		// A node started by hand for a machine no record wants.
		dir := filepath.Join(f.stateRoot, "w1", "dev-1", "dev-1-md-0-stray")
		stray := exec.Command(binary(f.t), "node", "--cluster", "dev-1", "--machine", "dev-1-md-0-stray", "--state-dir", dir,
			"--nats", f.nats.URL())
		if err := stray.Start(); err != nil {
			f.t.Fatal(err)
		}
		go func() { _ = stray.Wait() }()
	}},
	{name: "two local workers: rollout, then scale-down", short: true,
		setup: func(f *fleet) { f.startWorker("w2") },
		fault: func(f *fleet) {
			// Every machine is replaced, on either worker; then dev-1
			// shrinks, so deletes must reach the worker that holds each
			// machine.
			before := f.nodeNames()
			f.edit("classes/standard.yaml", "version: v1.31.2", "version: v1.32.0")
			f.waitFor("the first machine of the new version", time.Minute, func() bool { return f.hasNew(before) })
			f.edit("clusters/dev-1.yaml", "replicas: 2", "replicas: 1")
			want["dev-1"] = 2
		},
		verify: func(f *fleet) {
			per := map[string]int{}
			for _, n := range f.nodes() {
				per[n.worker]++
			}
			if per["w1"] == 0 || per["w2"] == 0 {
				f.t.Errorf("machines per worker %v: the scenario wants both workers to hold machines", per)
			}
		}},
	{name: "worker SIGSTOP for 2× AckWait, with a second worker",
		setup: func(f *fleet) {
			f.workerArgs = []string{"--ack-wait", ackWait.String()}
			f.startWorker("w2")
		},
		fault: func(f *fleet) {
			// w1 is paused with tasks delivered to it; they are redelivered
			// to w2 after AckWait, and w1 wakes up holding them.
			signal(f.workers["w1"], syscall.SIGSTOP)
			f.edit("clusters/dev-1.yaml", "replicas: 2", "replicas: 6")
			want["dev-1"] = 7
			time.Sleep(2*ackWait + 2*time.Second)
			signal(f.workers["w1"], syscall.SIGCONT)
		},
		verify: func(f *fleet) {
			// The scenario counts only if w1 woke up holding tasks: it
			// dropped them (held past half the ack wait, or, read from
			// its socket only on waking, found done by w2 meanwhile), or
			// a copy it made was deleted as an orphan.
			if !f.logged("dropping a task that waited past half its ack wait") && !f.logged(`"why":"the task is done`) &&
				!f.logged("deleting orphan machine") {
				f.t.Errorf("w1 held no task while paused: the scenario tested nothing")
			}
		}},
	{name: "push race on a remote repository",
		setup: func(f *fleet) {
			root := f.t.TempDir()
			f.remote = gittest.NewBare(f.t, root, "fleet.git")
			srv := gittest.NewServer(f.t, root)
			f.repoArg = srv.URL + "/fleet.git"
			f.listen = "127.0.0.1:" + strconv.Itoa(freeport.Port(f.t))
			f.daemonArgs = []string{"--webhook-secret", "race-secret"}
			if out, err := exec.Command("git", "-C", f.repo, "push", "-q", f.remote, "main").CombinedOutput(); err != nil {
				f.t.Fatalf("git push: %v\n%s", err, out)
			}
		},
		fault: func(f *fleet) {
			// For 5 seconds, a spec commit is pushed and a webhook sent every
			// 30 ms while the daemon pushes status; one of the commits
			// scales dev-1.
			end := time.Now().Add(5 * time.Second)
			for i := 0; time.Now().Before(end); i++ {
				if i == 40 {
					f.edit("clusters/dev-1.yaml", "replicas: 2", "replicas: 3")
					want["dev-1"] = 4
				} else {
					if err := os.WriteFile(filepath.Join(f.repo, "NOTES.md"), []byte(fmt.Sprintf("push %d\n", i)), 0o644); err != nil {
						f.t.Fatal(err)
					}
					if err := f.tryCommit(fmt.Sprintf("notes %d", i)); err != nil {
						f.t.Error(err)
					}
				}
				f.webhook(fmt.Sprintf("race-%d", i))
				time.Sleep(30 * time.Millisecond)
			}
		}},
	{name: "two daemons: the leader SIGKILLed",
		setup: func(f *fleet) { f.startDaemon("d2") },
		fault: func(f *fleet) {
			f.stopDaemon(f.leader())
			f.edit("clusters/dev-1.yaml", "replicas: 2", "replicas: 3")
			want["dev-1"] = 4
		}},
	{name: "two daemons: the leader SIGSTOPped, then resumed",
		setup: func(f *fleet) { f.startDaemon("d2") },
		fault: func(f *fleet) {
			old := f.leader()
			signal(f.daemons[old], syscall.SIGSTOP)
			f.edit("clusters/dev-1.yaml", "replicas: 2", "replicas: 3")
			want["dev-1"] = 4
			// Past the lease: the other replica leads and applies the commit.
			f.waitFor("a new leader", time.Minute, func() bool { l := f.leader(); return l != "" && l != old })
			time.Sleep(3 * time.Second)
			signal(f.daemons[old], syscall.SIGCONT)
		}},
	{name: "forged events",
		fault: func(f *fleet) {
			f.before = f.nodeNames()
			dev := f.machineOf("dev-1")
			prod := f.machineOf("prod-1")
			forged := []struct{ subject, body string }{
				// An unknown phase.
				{wire.EventSubject("dev-1", "forger"), event("delete.dev-1."+dev, "dev-1", dev, "Exploded")},
				// A body that names another machine than its subject.
				{wire.EventSubject("dev-1", "forger"), event("delete.prod-1."+prod, "prod-1", prod, "Deleted")},
				// Deleted and Failed for live machines, on their own subjects.
				{wire.EventSubject("dev-1", "forger"), event("delete.dev-1."+dev, "dev-1", dev, "Deleted")},
				{wire.EventSubject("prod-1", "forger"), event("create.prod-1."+prod, "prod-1", prod, "Failed")},
				// Not JSON, and no apiVersion.
				{wire.EventSubject("dev-1", "forger"), "{not json"},
				{wire.EventSubject("dev-1", "forger"), `{"cluster":"dev-1","machine":"` + dev + `","phase":"Deleted"}`},
			}
			js := f.jetStream()
			for _, m := range forged {
				if _, err := js.Publish(context.Background(), m.subject, []byte(m.body)); err != nil {
					f.t.Fatalf("publish a forged event: %v", err)
				}
			}
		},
		verify: func(f *fleet) {
			// Nothing forged was applied: the same machines still run.
			if after := f.nodeNames(); !slices.Equal(f.before, after) {
				f.t.Errorf("forged events replaced machines: before %v, after %v", f.before, after)
			}
		}},
	{name: "a task purged from the stream",
		setup: func(f *fleet) { f.daemonArgs = []string{"--task-timeout", "5s"} },
		fault: func(f *fleet) {
			f.stopWorker()
			f.edit("clusters/dev-1.yaml", "replicas: 2", "replicas: 4")
			want["dev-1"] = 5
			js := f.jetStream()
			stream, err := js.Stream(context.Background(), wire.StreamTasks)
			if err != nil {
				f.t.Fatal(err)
			}
			f.waitFor("the scale-up's tasks in the stream", time.Minute, func() bool {
				info, err := stream.Info(context.Background())
				return err == nil && info.State.Msgs >= 2
			})
			if err := stream.Purge(context.Background()); err != nil {
				f.t.Fatal(err)
			}
			f.startWorker()
		}},
}

// logged says whether any process of the fleet logged msg.
func (f *fleet) logged(msg string) bool {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	return strings.Contains(f.logs.String(), msg)
}

// waitFor polls cond until it holds, failing the scenario after limit.
func (f *fleet) waitFor(what string, limit time.Duration, cond func() bool) {
	f.t.Helper()
	for start := time.Now(); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > limit {
			f.t.Fatalf("waited %s for %s", limit, what)
		}
	}
}

// nodeNames are the names of the running machines, sorted.
func (f *fleet) nodeNames() []string {
	var names []string
	for _, n := range f.nodes() {
		names = append(names, n.cluster+"/"+n.name)
	}
	slices.Sort(names)
	return names
}

// hasNew says whether a machine runs that was not in before.
func (f *fleet) hasNew(before []string) bool {
	return slices.ContainsFunc(f.nodeNames(), func(n string) bool { return !slices.Contains(before, n) })
}

// machineOf is a running machine of cluster.
func (f *fleet) machineOf(cluster string) string {
	for _, n := range f.nodes() {
		if n.cluster == cluster {
			return n.name
		}
	}
	f.t.Fatalf("no machine of %s runs", cluster)
	return ""
}

func event(task, cluster, machine, phase string) string {
	return fmt.Sprintf(`{"apiVersion":%q,"taskID":%q,"attempt":1,"cluster":%q,"machine":%q,"phase":%q,"time":%q}`,
		wire.APIVersion, task, cluster, machine, phase, time.Now().UTC().Format(time.RFC3339))
}

// jetStream is a connection to the fleet's NATS, as any process on the
// host could make one; made once per fleet (it reconnects by itself).
func (f *fleet) jetStream() jetstream.JetStream {
	f.t.Helper()
	if f.js != nil {
		return f.js
	}
	nc, err := nats.Connect(f.nats.URL(), nats.MaxReconnects(-1))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(nc.Close)
	if f.js, err = jetstream.New(nc); err != nil {
		f.t.Fatal(err)
	}
	return f.js
}

// leader is the replica that holds the lease ("" when none does).
func (f *fleet) leader() string {
	js := f.jetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, wire.BucketLeader)
	if err != nil {
		return ""
	}
	e, err := kv.Get(ctx, "leader")
	if err != nil {
		return ""
	}
	return string(e.Value())
}

// webhook sends a push notification as GitLab does: with its token, a
// delivery ID of its own and a body that names the pushed commit (two
// pushes never send the same body; the daemon refuses a body it has seen
// as a replay).
func (f *fleet) webhook(delivery string) {
	head, err := exec.Command("git", "-C", f.repo, "rev-parse", "HEAD").Output()
	if err != nil {
		f.t.Fatal(err)
	}
	body := []byte(fmt.Sprintf(`{"object_kind":"push","ref":"refs/heads/main","after":%q}`, strings.TrimSpace(string(head))))
	req, err := http.NewRequest(http.MethodPost, "http://"+f.listen+"/hooks/git", strings.NewReader(string(body)))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("X-Gitlab-Token", "race-secret")
	req.Header.Set("X-Gitlab-Event-UUID", delivery)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return // the daemon may be busy starting; the next one counts
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode != http.StatusServiceUnavailable {
		f.t.Errorf("webhook %s: %s", delivery, resp.Status)
	}
}
