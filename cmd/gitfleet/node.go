package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gitfleet/gitfleet/providers/local"
	"github.com/gitfleet/gitfleet/providers/natsbus"
)

func init() {
	register(&command{
		name:         "node",
		usage:        "node list|kill MACHINE|stop [--data-dir DIR]",
		summary:      "the local provider's machines on this host: list them, kill one (to try remediation), stop them all; node --cluster C --machine M --state-dir DIR is one machine (started by the local worker)",
		run:          runNode,
		untilStopped: nodeRuns,
	})
}

// nodeRuns: node runs a machine until stopped; its control verbs (list,
// kill, stop) are one-shot.
func nodeRuns(args []string) bool {
	return len(args) == 0 || !slices.Contains(nodeVerbs, args[0])
}

var nodeVerbs = []string{"list", "kill", "stop"}

func runNode(ctx context.Context, env *cmdEnv, args []string) error {
	if len(args) > 0 {
		if slices.Contains(nodeVerbs, args[0]) {
			return runNodeControl(env, args[0], args[1:])
		}
	}
	fs := newFlagSet("node", env)
	o := local.NodeOptions{NATS: natsbus.Options{Name: "gitfleet-node"}}
	o.NATS.BindClientFlags(fs)
	fs.StringVar(&o.Cluster, "cluster", "", "cluster the machine belongs to")
	fs.StringVar(&o.Machine, "machine", "", "machine name")
	fs.StringVar(&o.StateDir, "state-dir", "", "the machine's state folder")
	fs.StringVar(&o.SeedDir, "seed-dir", "", "folder of the machine's NoCloud seed (user-data, meta-data); default the state folder")
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:0", "address of the machine's health endpoint (/healthz)")
	fs.StringVar(&o.KubernetesVersion, "kubernetes-version", "", "Kubernetes version the machine runs")
	fs.StringVar(&o.MachineJSON, "machine-json", "", "the machine (wire.Machine JSON) to write to machine.json")
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", local.DefaultHeartbeatInterval, "how often to publish a heartbeat")
	var lo logOptions
	lo.bindFlags(fs)
	fs.DurationVar(&o.StartupDelay, "startup-delay", 0, "report unhealthy (booting) for this long after start")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.NATS.URL == natsbus.Embedded {
		// A node runs no server: it would retry "embedded" as an address
		// forever, warning, and never send a heartbeat.
		return &exitError{code: exitUsage, err: errors.New("--nats embedded: a node connects to its worker's NATS; give that server's nats://host:port (the local worker passes it)")}
	}
	log, err := lo.logger(env.stderr)
	if err != nil {
		return err
	}
	o.Log = log
	return local.RunNode(ctx, o)
}

// runNodeControl lists, kills or stops the local provider's node
// processes under the data folder. Only processes that hold a machine
// folder's lock there, or whose machine folder there was removed while
// they ran, are touched: never another user's or another fleet's.
func runNodeControl(env *cmdEnv, verb string, args []string) error {
	fs := newFlagSet("node "+verb, env)
	dataDir := fs.String("data-dir", ".gitfleet/data", "the data folder of gitfleet up (its default), or of a worker (its --data-dir, default .gitfleet); nodes live under DIR/local")
	stateDir := fs.String("state-dir", "", "the local provider's state folder (default: DATA-DIR/local)")
	sig := fs.String("signal", "KILL", "kill: KILL (the machine dies; its worker sees it gone and it is replaced), STOP (it hangs: its heartbeats stop and a health check replaces it) or TERM (it shuts down cleanly)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *stateDir == "" {
		*stateDir = filepath.Join(*dataDir, "local")
	}
	nodes, err := local.Running(*stateDir)
	if err != nil {
		return err
	}
	switch verb {
	case "list":
		if len(pos) > 0 {
			return &exitError{code: exitUsage, err: fmt.Errorf("node list takes no argument, got %q", pos)}
		}
		for _, n := range nodes {
			fmt.Fprintf(env.stdout, "%s\t%s\tpid %d\n", n.Cluster, n.Machine, n.PID)
		}
		if len(nodes) == 0 {
			fmt.Fprintf(env.stdout, "no node runs under %s\n", *stateDir)
		}
		return nil
	case "kill":
		if len(pos) != 1 {
			return &exitError{code: exitUsage, err: errors.New("name one machine: gitfleet node kill MACHINE (gitfleet node list shows them)")}
		}
		s := map[string]syscall.Signal{"KILL": syscall.SIGKILL, "TERM": syscall.SIGTERM, "STOP": syscall.SIGSTOP}[*sig]
		if s == 0 {
			return &exitError{code: exitUsage, err: fmt.Errorf("--signal %q: use KILL, STOP or TERM", *sig)}
		}
		// A whole name, else the first (sorted) name that starts with
		// it: "prod-1-md-0" kills one worker of prod-1's md-0.
		slices.SortFunc(nodes, func(a, b local.RunningNode) int {
			return cmp.Or(cmp.Compare(boolInt(a.Machine != pos[0]), boolInt(b.Machine != pos[0])), strings.Compare(a.Machine, b.Machine))
		})
		for _, n := range nodes {
			if n.Machine == pos[0] || strings.HasPrefix(n.Machine, pos[0]) {
				if err := n.Signal(s); err != nil {
					return fmt.Errorf("kill %s (pid %d): %w", n.Machine, n.PID, err)
				}
				fmt.Fprintf(env.stdout, "sent SIG%s to %s of %s (pid %d)\n", *sig, n.Machine, n.Cluster, n.PID)
				return nil
			}
		}
		return fmt.Errorf("no node of a machine named %q (or starting with it) runs under %s (gitfleet node list shows those that do)", pos[0], *stateDir)
	default: // stop
		if len(pos) > 0 {
			return &exitError{code: exitUsage, err: fmt.Errorf("node stop stops every node; it takes no argument, got %q", pos)}
		}
		for _, n := range nodes {
			_ = n.Signal(syscall.SIGTERM)
		}
		for _, n := range nodes {
			if !n.Gone(10 * time.Second) {
				_ = n.Signal(syscall.SIGKILL)
			}
		}
		fmt.Fprintf(env.stdout, "stopped %d nodes under %s\n", len(nodes), *stateDir)
		return nil
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
