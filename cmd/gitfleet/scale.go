package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/reconciler"
)

func init() {
	register(&command{
		name:    "scale",
		usage:   "scale CLUSTER/DEPLOYMENT --replicas N [--server URL] [--token-file F] [--as NAME]",
		summary: "size an autoscaled MachineDeployment through the daemon, within its autoscaler annotations' bounds",
		run:     runScale,
	})
}

func runScale(ctx context.Context, env *cmdEnv, args []string) error {
	fs := newFlagSet("scale", env)
	replicas := fs.Int("replicas", -1, "the machine count to run (required)")
	server := fs.String("server", "http://127.0.0.1:8080", "the daemon's HTTP address (its --listen)")
	tokenFile := fs.String("token-file", filepath.Join(".gitfleet", "data", apiTokenName), "the daemon's --api-token-file (gitfleet up: <data-dir>/api-token)")
	as := fs.String("as", "", "who asks, for the daemon's log and the status (default: this user's name)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || strings.Count(pos[0], "/") != 1 {
		return &exitError{code: exitUsage, err: errors.New("name one pool as CLUSTER/DEPLOYMENT, e.g. gitfleet scale dev-1/md-0 --replicas 3")}
	}
	if *replicas < 0 {
		return &exitError{code: exitUsage, err: errors.New("--replicas N is required (N >= 0)")}
	}
	cluster, deployment, _ := strings.Cut(pos[0], "/")
	b, err := os.ReadFile(*tokenFile)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	who := *as
	if who == "" {
		if u, err := user.Current(); err == nil {
			who = u.Username
		}
	}
	body, _ := json.Marshal(map[string]int{"replicas": *replicas})
	url := strings.TrimSuffix(*server, "/") + "/api/v1/clusters/" + cluster + "/machinedeployments/" + deployment + "/scale"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(reconciler.UserHeader, who)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("--server %s: %w", *server, err)
	}
	defer resp.Body.Close()
	var out struct {
		reconciler.ScaleResult
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("%s: %s, and not the daemon's JSON", url, resp.Status)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("refused (%s): %s", resp.Status, out.Error)
	}
	fmt.Fprintf(env.stdout, "%s/%s scaled to %d (bounds %d..%d)\n", out.Cluster, out.MachineDeployment, out.Replicas, out.Min, out.Max)
	return nil
}
