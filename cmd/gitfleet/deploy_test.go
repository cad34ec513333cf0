package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/natsbus"
	"github.com/gitfleet/gitfleet/reconciler"
)

// recorder is a Registerer that keeps the names of the series its
// collectors describe.
type recorder struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([a-z_]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *recorder) Unregister(prometheus.Collector) bool { return false }

// TestDeployReferencesKnownMetrics: every gitfleet series the Grafana
// dashboard and the Prometheus alerts query is one the daemon or a worker
// exports, so a renamed metric cannot leave an empty panel or an alert
// that never fires; and every alert the docs promise is there.
func TestDeployReferencesKnownMetrics(t *testing.T) {
	rec := &recorder{names: map[string]bool{}}
	reconciler.NewMetrics(rec)
	rec.MustRegister(providers.Collector(), natsbus.QueueCollector(nil))

	var exprs []string
	b, err := os.ReadFile("../../deploy/grafana/gitfleet.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("gitfleet.json: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	b, err = os.ReadFile("../../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			exprs = append(exprs, r.Expr)
		}
	}
	sort.Strings(alerts)
	if got := strings.Join(alerts, " "); got != "GitfleetHeartbeatsDropped GitfleetNoLeader GitfleetQueueGrowing GitfleetRolloutHalted GitfleetStatusPushFailing GitfleetTasksFailing GitfleetWebhookRefused" {
		t.Errorf("alerts: %s", got)
	}
	used := regexp.MustCompile(`gitfleet_[a-z_]+`)
	for _, e := range exprs {
		for _, name := range used.FindAllString(e, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
			if !rec.names[name] && !rec.names[base] {
				t.Errorf("%s is queried (%s) but exported by nothing", name, e)
			}
		}
	}
	if len(exprs) < 15 {
		t.Errorf("only %d queries", len(exprs))
	}
}

// TestSystemdUnits: every gitfleet command line of deploy/systemd names
// only flags the command has (its -h lists them), and every unit carries
// the hardening options.
func TestSystemdUnits(t *testing.T) {
	units, err := filepath.Glob("../../deploy/systemd/*.service")
	if err != nil || len(units) < 3 {
		t.Fatalf("units: %v %v", units, err)
	}
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), "\\\n", " ")
		for _, want := range []string{"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "CapabilityBoundingSet=\n", "SystemCallFilter=@system-service"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s lacks %s", u, strings.TrimSpace(want))
			}
		}
		for _, line := range strings.Split(text, "\n") {
			exec, ok := strings.CutPrefix(line, "ExecStart=/usr/local/bin/gitfleet ")
			if !ok {
				continue
			}
			fields := strings.Fields(exec)
			code, stdout, stderr := runCmd(t, fields[0], "-h")
			help := stdout + stderr
			if code != 0 && !strings.Contains(help, "-") {
				t.Fatalf("%s: gitfleet %s -h: exit %d", u, fields[0], code)
			}
			for _, f := range fields[1:] {
				if name, ok := strings.CutPrefix(f, "--"); ok {
					if !strings.Contains(help, "-"+strings.SplitN(name, "=", 2)[0]+" ") && !strings.Contains(help, "-"+strings.SplitN(name, "=", 2)[0]+"\n") {
						t.Errorf("%s: gitfleet %s has no flag --%s", u, fields[0], name)
					}
				}
			}
		}
	}
}
