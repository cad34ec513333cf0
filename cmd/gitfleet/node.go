package main

import (
	"context"

	"github.com/gitfleet/gitfleet/providers/local"
	"github.com/gitfleet/gitfleet/providers/natsbus"
)

func init() {
	register(&command{
		name:    "node",
		usage:   "node --cluster C --machine M --state-dir DIR",
		summary: "be one machine of the local provider (started by the local worker)",
		run:     runNode,
	})
}

func runNode(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("node", env)
	o := local.NodeOptions{NATS: natsbus.Options{Name: "gitfleet-node"}}
	o.NATS.BindFlags(fs)
	fs.StringVar(&o.Cluster, "cluster", "", "cluster the machine belongs to")
	fs.StringVar(&o.Machine, "machine", "", "machine name")
	fs.StringVar(&o.StateDir, "state-dir", "", "the machine's state folder")
	fs.StringVar(&o.KubernetesVersion, "kubernetes-version", "", "Kubernetes version the machine runs")
	fs.StringVar(&o.MachineJSON, "machine-json", "", "the machine (wire.Machine JSON) to write to machine.json")
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", local.DefaultHeartbeatInterval, "how often to publish a heartbeat")
	var lo logOptions
	lo.bindFlags(fs)
	fs.DurationVar(&o.StartupDelay, "startup-delay", 0, "report unhealthy (booting) for this long after start")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	log, err := lo.logger(env.stderr)
	if err != nil {
		return err
	}
	o.Log = log
	return local.RunNode(ctx, o)
}
