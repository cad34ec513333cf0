package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"golang.org/x/crypto/bcrypt"

	"github.com/gitfleet/gitfleet/reconciler/status"
)

// fleetRepo writes a status branch with dev-1 done and prod-1 held in
// wave prod, and n more clusters of per machines, through the daemon's
// own writer.
func fleetRepo(t testing.TB, n, per int) *git.Repository {
	t.Helper()
	repo, err := git.PlainInit(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w, err := status.NewWriter(ctx, status.Options{Repo: repo, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	machine := func(name, role, dep, phase, version string) status.MachineStatus {
		return status.MachineStatus{Name: name, Role: role, Deployment: dep, Phase: phase, Version: version, Provider: "local",
			Addresses: []string{"127.0.0.1:4" + name[len(name)-3:]}, Cause: "rolling update to " + version}
	}
	set := func(c status.ClusterStatus) {
		if err := w.SetCluster(c, status.Origin{SourceCommit: "0123456789abcdef"}); err != nil {
			t.Fatal(err)
		}
	}
	set(status.ClusterStatus{Name: "dev-1", Class: "standard", Version: "v1.32.0", Phase: "Provisioned",
		Conditions:   []status.Condition{{Type: status.ConditionReady, Status: status.ConditionTrue}},
		ControlPlane: status.Replicas{Desired: 1, Replicas: 1, Ready: 1, Updated: 1},
		Deployments:  []status.DeploymentStatus{{Name: "md-0", Replicas: status.Replicas{Desired: 1, Replicas: 1, Ready: 1, Updated: 1}}},
		Machines:     []status.MachineStatus{machine("dev-1-control-plane-a01", "control-plane", "", "Running", "v1.32.0"), machine("dev-1-md-0-b02", "worker", "md-0", "Running", "v1.32.0")},
		Rollout:      &status.Rollout{ClassRevision: "c0ffee", Wave: "dev", State: "Done"}})
	set(status.ClusterStatus{Name: "prod-1", Class: "standard", Version: "v1.31.2", Phase: "Provisioned",
		Conditions:   []status.Condition{{Type: status.ConditionReady, Status: status.ConditionFalse, Reason: "WaitingForWave", Message: "wave dev is rolling out"}},
		ControlPlane: status.Replicas{Desired: 1, Replicas: 1, Ready: 1, Updated: 1},
		Machines:     []status.MachineStatus{machine("prod-1-control-plane-c03", "control-plane", "", "Running", "v1.31.2")},
		Rollout:      &status.Rollout{ClassRevision: "decade", Wave: "prod", State: "Waiting", Reason: "wave dev is not done", PendingRevision: "c0ffee"}})
	for i := range n {
		c := status.ClusterStatus{Name: fmt.Sprintf("edge-%04d", i), Class: "edge", Version: "v1.31.2", Phase: "Provisioned",
			Conditions: []status.Condition{{Type: status.ConditionReady, Status: status.ConditionTrue}}}
		for j := range per {
			c.Machines = append(c.Machines, machine(fmt.Sprintf("edge-%04d-md-0-x%03d", i, j), "worker", "md-0", "Running", "v1.31.2"))
		}
		set(c)
	}
	w.SetFleet(status.FleetStatus{LastApplied: &status.SourceCommit{Commit: "0123456789abcdef", Subject: "standard: v1.32.0"},
		LastRejected: &status.Rejection{SourceCommit: status.SourceCommit{Commit: "fedcba9876543210", Subject: "dev-1: four"},
			Errors: []string{`clusters/dev-1.yaml:14:21: spec.topology.workers.machineDeployments[0].replicas: "four" is not a number`}}}, status.Origin{})
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	return repo
}

func serve(t testing.TB, repo *git.Repository, o Options) *httptest.Server {
	t.Helper()
	o.Source = func() (*status.Snapshot, error) { return status.Read(repo, "gitfleet/status") }
	srv := httptest.NewServer(Handler(o))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	return getWith(t, http.DefaultClient, url)
}

func getWith(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func wantAll(t *testing.T, what, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

// The pages say what a user looks for: the fleet's counts and clusters,
// the rejected commit and why, a cluster's tree with each machine's phase,
// version and address, and where each wave of a rollout is.
func TestPages(t *testing.T) {
	srv := serve(t, fleetRepo(t, 0, 0), Options{})
	code, fleet := get(t, srv.URL+"/")
	if code != 200 {
		t.Fatalf("/: %d %s", code, fleet)
	}
	wantAll(t, "the fleet page", fleet, "2 clusters, 3 machines", `<a href="/clusters/dev-1">dev-1</a>`, `<a href="/clusters/prod-1">prod-1</a>`,
		"Rejected commit <code>fedcba9</code>", `&#34;four&#34; is not a number`, "Not ready</span> WaitingForWave: wave dev is rolling out",
		`<label for="q">Search clusters</label>`, "<caption>Clusters by phase</caption>",
		`<caption>Machines by provider</caption><tbody><tr><th scope="row">local</th><td>3</td></tr>`)
	_, cluster := get(t, srv.URL+"/clusters/dev-1")
	wantAll(t, "dev-1's page", cluster, "<h1>Cluster dev-1</h1>", "<strong>Control plane</strong>: 1 of 1 ready",
		"<strong>md-0</strong>: 1 of 1 ready", `<a class="machine" href="/history?machine=dev-1-md-0-b02">dev-1-md-0-b02</a> <span class="phase phase-Running">Running</span> v1.32.0 local at 127.0.0.1:4b02`,
		"rolling update to v1.32.0", `<h2 id="recent">Recent events</h2>`, "Ready True", `<a href="/history?cluster=dev-1">The whole history of dev-1</a>`)
	_, rollouts := get(t, srv.URL+"/rollouts")
	wantAll(t, "the rollouts page", rollouts, "Class standard", "<h3>Wave dev</h3>", "<h3>Wave prod</h3>",
		`prod-1</a>: <span class="state state-Waiting">Waiting</span> — wave dev is not done`)
	if code, _ := get(t, srv.URL+"/clusters/nope"); code != http.StatusNotFound {
		t.Errorf("an unknown cluster: %d", code)
	}
}

// haltedRepo writes a status branch where class standard's rollout
// halted: zz-canary failed in wave canary, aa-prod waits in wave prod.
func haltedRepo(t *testing.T) (*git.Repository, *status.Writer) {
	t.Helper()
	repo, err := git.PlainInit(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	w, err := status.NewWriter(t.Context(), status.Options{Repo: repo, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	reason := "halted: 1 of maxFailures 1 clusters failed (zz-canary); change the class again to release it (a fix or a revert), or raise spec.rollout.maxFailures in classes/standard.yaml:1"
	for _, c := range []status.ClusterStatus{
		{Name: "zz-canary", Class: "standard", Phase: "Provisioned", Rollout: &status.Rollout{ClassRevision: "b4d", Wave: "canary", State: "Failed",
			Reason: "machine zz-canary-md-0-x1 failed: simulated provisioning failure"}},
		{Name: "aa-prod", Class: "standard", Phase: "Provisioned", Rollout: &status.Rollout{ClassRevision: "g00d", Wave: "prod", State: "Waiting",
			Reason: "rollout of class standard " + reason, PendingRevision: "b4d"}},
	} {
		if err := w.SetCluster(c, status.Origin{}); err != nil {
			t.Fatal(err)
		}
	}
	w.SetFleet(status.FleetStatus{Rollouts: []status.ClassRollout{{Class: "standard", Revision: "b4d", Started: time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC),
		Change:      &status.SourceCommit{Commit: "0123456789abcdef", Subject: "standard: a worker template that fails", Author: "Bob <bob@example.com>"},
		MaxFailures: 1, CurrentWave: "prod", Halted: true, Reason: reason, Failed: []string{"zz-canary"},
		Waves: []status.WaveRollout{{Name: "canary", Clusters: 1}, {Name: "prod", MaxConcurrent: "25%", Clusters: 1, Waiting: 1}, {Name: "(unmatched)"}}}}}, status.Origin{})
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	return repo, w
}

// A rollout that halted in its first wave says so on the rollouts page,
// with the daemon's reason, the change that started it, the limits, and
// each cluster's state and reason; the waves keep the class's order.
func TestHaltedRollout(t *testing.T) {
	repo, _ := haltedRepo(t)
	srv := serve(t, repo, Options{})
	_, page := get(t, srv.URL+"/rollouts")
	wantAll(t, "the rollouts page", page, `<p class="alert halted" role="alert"><strong>Halted</strong>: 1 of maxFailures 1 clusters failed (zz-canary)`,
		`<a href="/history#commit-0123456789abcdef" title="0123456789abcdef"><code>0123456</code></a> by Bob &lt;bob@example.com&gt;: standard: a worker template that fails`, "<dd>1 (failed: zz-canary)</dd>",
		`<h3>Wave canary <span class="bad">halted</span></h3>`, "maxConcurrent 25%",
		`zz-canary</a>: <span class="state state-Failed">Failed</span> — machine zz-canary-md-0-x1 failed: simulated provisioning failure`,
		`aa-prod</a>: <span class="state state-Waiting">Waiting</span> — rollout of class standard halted`)
	if strings.Index(page, "Wave canary") > strings.Index(page, "Wave prod") || strings.Contains(page, "(unmatched)") {
		t.Errorf("waves out of the class's order, or an empty wave shown:\n%s", page)
	}
	_, body := get(t, srv.URL+"/api/v1/rollouts")
	var rs []ClassRollout
	if err := json.Unmarshal([]byte(body), &rs); err != nil || len(rs) != 1 || rs[0].Rollout == nil || !rs[0].Rollout.Halted || !rs[0].Waves[0].Halted || rs[0].Waves[1].MaxConcurrent != "25%" {
		t.Fatalf("/api/v1/rollouts: %v %s", err, body)
	}
}

// A cluster its class's halted rollout holds is not waiting for a wave:
// its page says the halt holds it, on which revision, and what releases
// it, in the RolloutHalted condition's words, once above its tree, as
// gitfleet describe does. A cluster added during the halt (no machine,
// admitted to no revision, in no wave) reads the same, and the rollouts
// page lists it in no wave rather than under an empty wave's name. Before,
// the page read "class revision , wave , Waiting" for it.
func TestClusterHeldByHaltedRollout(t *testing.T) {
	repo, w := haltedRepo(t)
	halt := "rollout of class standard halted at revision b4d: 1 of maxFailures 1 clusters failed (zz-canary); change the class again to release it (a fix or a revert), or raise spec.rollout.maxFailures in classes/standard.yaml:1"
	since := time.Now().Add(-17 * time.Minute)
	held := func(name, revision, wave, message string) status.ClusterStatus {
		return status.ClusterStatus{Name: name, Class: "standard", Phase: "Waiting",
			Conditions: []status.Condition{
				{Type: status.ConditionReady, Status: status.ConditionFalse, Reason: status.ConditionRolloutHalted, Message: message, LastTransitionTime: since},
				{Type: status.ConditionRolloutHalted, Status: status.ConditionTrue, Reason: status.ConditionRolloutHalted, Message: message, LastTransitionTime: since},
			},
			Rollout: &status.Rollout{ClassRevision: revision, Wave: wave, State: "Waiting", PendingRevision: "b4d", Reason: halt}}
	}
	for _, c := range []status.ClusterStatus{held("ab-prod", "g00d", "prod", halt), held("ac-new", "", "", "new cluster, no machine made: "+halt)} {
		if err := w.SetCluster(c, status.Origin{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, repo, Options{})
	esc := strings.NewReplacer("'", "&#39;").Replace
	for name, want := range map[string]string{
		"ab-prod": "Rollout: held by its class's halted rollout (runs class revision g00d): " + halt + " (for 17m",
		"ac-new":  "Rollout: held by its class's halted rollout (admitted to no revision): new cluster, no machine made: " + halt + " (for 17m",
	} {
		code, page := get(t, srv.URL+"/clusters/"+name)
		if code != 200 {
			t.Fatalf("%s: %d %s", name, code, page)
		}
		top, _, _ := strings.Cut(page, `<section aria-labelledby="tree">`)
		wantAll(t, name+"'s page", top, esc(want), `<span class="bad">Not ready</span> RolloutHalted</p>`)
		if n := strings.Count(top, "change the class again to release it"); n != 1 || strings.Contains(top, "wave ,") || strings.Contains(top, "<code></code>") {
			t.Errorf("%s's page says the halt %d times above its tree, or shows an empty wave or revision:\n%s", name, n, top)
		}
	}
	_, page := get(t, srv.URL+"/rollouts")
	wantAll(t, "the rollouts page", page, "<h3>In no wave yet</h3>", `ac-new</a>: <span class="state state-Waiting">Waiting</span> — rollout of class standard halted`)
	if strings.Contains(page, "<h3>Wave </h3>") {
		t.Errorf("the rollouts page shows a wave with no name:\n%s", page)
	}
}

// A cluster held up by a problem of the daemon's shows it on its own
// page, as describe CLUSTER does: the conditions of fleet.yaml that
// concern it (status.Snapshot.FleetConditionsOf), under a heading of
// their own, as the same table as its own conditions; none, and no
// heading, on a cluster they do not concern. prod-1's bootstrap error
// recorded for it shows on prod-1's page only, though its message names
// no cluster; the unanswered tasks of provider local on the pages of the
// clusters with local machines. The API answers them under
// fleetConditions, every field of the status file where it was. A status
// commit that clears them, changing fleet.yaml alone, reaches the page
// (the live updates fetch it again). Before, the cluster page showed none.
func TestClusterShowsFleetConditions(t *testing.T) {
	repo := fleetRepo(t, 1, 0) // edge-0000 has no machine
	setFleet := func(conds ...status.FleetCondition) {
		t.Helper()
		w, err := status.NewWriter(t.Context(), status.Options{Repo: repo, Interval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		w.SetFleet(status.FleetStatus{Conditions: conds}, status.Origin{})
		if err := w.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	since := time.Now().Add(-30 * time.Minute).UTC().Truncate(time.Second)
	bootstrap := "bootstrap: bootstrap: the cluster's trust material, endpoint and the machine's token are required"
	tasks := "provider local: no worker answered 1 task in 2m0s (create prod-1-md-0-zz9zz); start a worker for it (gitfleet worker --provider local) or check that its workers reach NATS"
	setFleet(
		status.FleetCondition{Condition: status.Condition{Type: status.ConditionReconciling, Status: status.ConditionFalse, Reason: "BootstrapFailing",
			Message: bootstrap, LastTransitionTime: since}, Clusters: []string{"prod-1"}},
		status.FleetCondition{Condition: status.Condition{Type: status.ConditionTasksAnswered, Status: status.ConditionFalse, Reason: "NoWorkerAnswers",
			Message: tasks, LastTransitionTime: since}, Providers: []string{"local"}})
	srv := httptest.NewServer(Handler(Options{Source: Branch(func() (*git.Repository, error) { return repo, nil }, "gitfleet/status")}))
	t.Cleanup(srv.Close)
	esc := strings.NewReplacer("'", "&#39;").Replace
	heading := func(name string) string {
		return `<section aria-labelledby="fleet-conds">` + "\n" + `<h2 id="fleet-conds">Fleet conditions concerning ` + name + `</h2>`
	}
	bootstrapRow := `<tr><th scope="row">Reconciling</th><td>False</td><td>BootstrapFailing</td><td>` + esc(bootstrap) + `</td><td>30m`
	tasksRow := `<tr><th scope="row">TasksAnswered</th><td>False</td><td>NoWorkerAnswers</td><td>` + tasks + `</td><td>30m`
	page := func(name string) string {
		t.Helper()
		code, page := get(t, srv.URL+"/clusters/"+name)
		if code != 200 {
			t.Fatalf("%s: %d %s", name, code, page)
		}
		return page
	}
	prod := page("prod-1")
	wantAll(t, "prod-1's page", prod, heading("prod-1"), bootstrapRow, tasksRow)
	if own, fleet := strings.Index(prod, `<h2 id="conds">`), strings.Index(prod, `<h2 id="fleet-conds">`); own < 0 || fleet < own || fleet > strings.Index(prod, "</main>") {
		t.Errorf("prod-1's page does not list the fleet conditions after its own, within its main content:\n%s", prod)
	}
	dev := page("dev-1")
	wantAll(t, "dev-1's page", dev, heading("dev-1"), tasksRow)
	if strings.Contains(dev, "BootstrapFailing") {
		t.Errorf("dev-1's page shows the bootstrap error recorded for prod-1:\n%s", dev)
	}
	if edge := page("edge-0000"); strings.Contains(edge, "Fleet conditions") || strings.Contains(edge, "NoWorkerAnswers") {
		t.Errorf("edge-0000, with no machine, shows fleet conditions that concern it not:\n%s", edge)
	}

	_, body := get(t, srv.URL+"/api/v1/clusters/prod-1")
	var d status.ClusterDescription
	if err := json.Unmarshal([]byte(body), &d); err != nil || d.Rollout == nil || d.Rollout.State != "Waiting" || len(d.FleetConditions) != 2 ||
		d.FleetConditions[0].Reason != "BootstrapFailing" || !slices.Equal(d.FleetConditions[0].Clusters, []string{"prod-1"}) ||
		d.FleetConditions[1].Reason != "NoWorkerAnswers" || !slices.Equal(d.FleetConditions[1].Providers, []string{"local"}) {
		t.Errorf("/api/v1/clusters/prod-1 lacks its fleet conditions, with what they record, or its own fields: %v\n%s", err, body)
	}
	if _, body := get(t, srv.URL+"/api/v1/clusters/edge-0000"); strings.Contains(body, "fleetConditions") {
		t.Errorf("/api/v1/clusters/edge-0000 has fleetConditions though none concerns it:\n%s", body)
	}

	setFleet() // the daemon's problems are over
	if prod := page("prod-1"); strings.Contains(prod, "Fleet conditions") || strings.Contains(prod, "BootstrapFailing") {
		t.Errorf("prod-1's page still shows fleet conditions fleet.yaml no longer has:\n%s", prod)
	}
}

// A cluster's recent events come from its status file: machines created
// and deleted with why, conditions that changed, its admission; newest
// first, at most n.
func TestRecentEvents(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 11, 25, 10, m, 0, 0, time.UTC) }
	c := &status.ClusterStatus{Name: "dev-1",
		Machines: []status.MachineStatus{{Name: "dev-1-md-0-b", Created: at(5), Joined: at(6), Cause: "rolling update of md-0 to v1.32.0"}, {Name: "dev-1-md-0-a"}},
		Deleted: []status.DeletedMachine{{Name: "dev-1-md-0-x", Cause: "remediate: no heartbeat for 40s", Reason: "MachineMissing", Deleted: at(7)},
			// Reasons that would say again what the cause says.
			{Name: "dev-1-md-0-y", Cause: "scale down md-0 to 1 machine", Reason: "ScaledDown", Deleted: at(8)},
			{Name: "dev-1-md-0-z", Cause: "remediate: gone (NodeExited)", Reason: "NodeExited", Deleted: at(9)}},
		Conditions: []status.Condition{{Type: "Ready", Status: "False", Reason: "RollingUpdate", Message: "1 of 2 workers up to date", LastTransitionTime: at(4)}},
		Rollout:    &status.Rollout{ClassRevision: "c0ffee", Wave: "dev", State: "Progressing", AdmittedAt: at(3)}}
	got := Recent(c, 5)
	want := []Event{
		{Time: at(9), Machine: "dev-1-md-0-z", What: "deleted", Why: "remediate: gone (NodeExited)"},
		{Time: at(8), Machine: "dev-1-md-0-y", What: "deleted", Why: "scale down md-0 to 1 machine"},
		{Time: at(7), Machine: "dev-1-md-0-x", What: "deleted", Why: "remediate: no heartbeat for 40s (MachineMissing)"},
		{Time: at(6), Machine: "dev-1-md-0-b", What: "joined the cluster"},
		{Time: at(5), Machine: "dev-1-md-0-b", What: "created", Why: "rolling update of md-0 to v1.32.0"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Recent:\n got %+v\nwant %+v", got, want)
	}
	if all := Recent(c, 10); len(all) != 7 || all[5].What != "Ready False" || all[6].What != "admitted to class revision c0ffee" {
		t.Errorf("all events: %+v", all)
	}
}

// The API is the same data as JSON.
func TestAPI(t *testing.T) {
	srv := serve(t, fleetRepo(t, 0, 0), Options{})
	_, body := get(t, srv.URL+"/api/v1/clusters")
	var list []ClusterSummary
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list) != 2 || list[0].Name != "dev-1" || !list[0].Ready || list[1].Ready {
		t.Fatalf("/api/v1/clusters: %v %+v", err, list)
	}
	_, body = get(t, srv.URL+"/api/v1/clusters/prod-1")
	var c status.ClusterStatus
	if err := json.Unmarshal([]byte(body), &c); err != nil || c.Rollout == nil || c.Rollout.State != "Waiting" {
		t.Fatalf("/api/v1/clusters/prod-1: %v %s", err, body)
	}
	_, body = get(t, srv.URL+"/api/v1/rollouts")
	var rs []ClassRollout
	if err := json.Unmarshal([]byte(body), &rs); err != nil || len(rs) != 1 || len(rs[0].Waves) != 2 || strings.Join(rs[0].Revisions, " ") != "c0ffee decade" {
		t.Fatalf("/api/v1/rollouts: %v %s", err, body)
	}
	_, body = get(t, srv.URL+"/api/v1/fleet")
	wantAll(t, "/api/v1/fleet", body, `"clusters": 2`, `"lastRejected"`, `"machinesByProvider": {
    "local": 3
  }`)
	_, body = get(t, srv.URL+"/api/v1/clusters?q=prod")
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list) != 1 || list[0].Name != "prod-1" {
		t.Errorf("search prod: %v %s", err, body)
	}
}

// 1,000 clusters are paged and searchable.
func TestThousandClustersArePaged(t *testing.T) {
	srv := serve(t, fleetRepo(t, 1000, 1), Options{PageSize: 50})
	_, page := get(t, srv.URL+"/")
	if n := strings.Count(page, `<a href="/clusters/`); n != 50 {
		t.Errorf("the first page lists %d clusters, want 50", n)
	}
	wantAll(t, "the first page", page, "1002 clusters, page 1 of 21", `rel="next"`)
	_, found := get(t, srv.URL+"/?q=edge-0999")
	wantAll(t, "the search", found, `<a href="/clusters/edge-0999">edge-0999</a>`, "1 clusters matching")
}

// Beyond 127.0.0.1 the dashboard asks for its token.
func TestToken(t *testing.T) {
	srv := serve(t, fleetRepo(t, 0, 0), Options{Token: "s3cret-token-value"})
	if code, _ := get(t, srv.URL+"/api/v1/fleet"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
	if code, _ := browserGet(t, srv.Client(), srv.URL+"/api/v1/fleet?token=s3cret-token-value"); code != 200 {
		t.Errorf("with the token: %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	req.Header.Set("Authorization", "Bearer s3cret-token-value")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 200 {
		t.Errorf("bearer: %v", err)
	}
}

// browserGet gets url as a browser would: following redirects, keeping
// the cookies they set.
func browserGet(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c.Jar = jar
	return getWith(t, c, url)
}

// ?token= in a link signs a browser in and leaves its address bar at
// once: 303 to the same address without it, with a cookie that holds an
// HMAC of the token (worth nothing as a bearer token), Secure when the
// request came over TLS (or a proxy says it did).
func TestTokenLink(t *testing.T) {
	const token = "s3cret-token-value"
	repo := fleetRepo(t, 0, 0)
	for _, tls := range []bool{false, true} {
		o := Options{Token: token, Source: func() (*status.Snapshot, error) { return status.Read(repo, "gitfleet/status") }}
		srv := httptest.NewUnstartedServer(Handler(o))
		if tls {
			srv.StartTLS()
		} else {
			srv.Start()
		}
		defer srv.Close()
		noFollow := *srv.Client()
		noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		res, err := noFollow.Get(srv.URL + "/rollouts?a=1&token=" + token + "&b=2")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/rollouts?a=1&b=2" {
			t.Errorf("tls %v: %d to %q, want 303 to /rollouts?a=1&b=2", tls, res.StatusCode, res.Header.Get("Location"))
		}
		cookies := res.Cookies()
		if len(cookies) != 1 || cookies[0].Value == "" || strings.Contains(cookies[0].Value, token) || !cookies[0].HttpOnly ||
			cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Secure != tls {
			t.Fatalf("tls %v: the cookie %+v", tls, cookies)
		}
		ask := func(header, value string) int {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/fleet", nil)
			req.Header.Set(header, value)
			res, err := noFollow.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}
		if code := ask("Cookie", "gitfleet-ui="+cookies[0].Value); code != 200 {
			t.Errorf("tls %v: with the cookie: %d", tls, code)
		}
		if code := ask("Cookie", "gitfleet-ui="+token); code != http.StatusUnauthorized {
			t.Errorf("tls %v: a cookie holding the token itself: %d", tls, code)
		}
		if code := ask("Authorization", "Bearer "+cookies[0].Value); code != http.StatusUnauthorized {
			t.Errorf("tls %v: the cookie's value as a bearer token: %d", tls, code)
		}
		if code, body := browserGet(t, srv.Client(), srv.URL+"/rollouts?token="+token); code != 200 || !strings.Contains(body, "<h1>Rollouts</h1>") {
			t.Errorf("tls %v: a browser following the link: %d\n%s", tls, code, body)
		}
	}
	// Behind a proxy that ends TLS.
	srv := serve(t, repo, Options{Token: token})
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/?token="+token, nil)
	req.Header.Set("X-Forwarded-Proto", "https")
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if c := res.Cookies(); len(c) != 1 || !c[0].Secure {
		t.Errorf("behind a TLS proxy: %+v", c)
	}
}

// The cookie a ?token= link sets is made from the token alone: another
// replica of the daemon (a second process behind the same Service, with
// the same token) takes it for every page and file, and a dashboard with
// another token refuses it, so rotating the token signs browsers out.
func TestTokenCookieAcrossReplicas(t *testing.T) {
	const token = "s3cret-token-value"
	repo := fleetRepo(t, 0, 0)
	one, two := serve(t, repo, Options{Token: token}), serve(t, repo, Options{Token: token})
	rotated := serve(t, repo, Options{Token: "an0ther-token-value"})
	noFollow := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Get(one.URL + "/rollouts?token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	cookies := res.Cookies()
	if res.StatusCode != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("the token link: %d, cookies %+v", res.StatusCode, cookies)
	}
	ask := func(base, path string) int {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.AddCookie(cookies[0])
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, path := range []string{"/rollouts", "/style.css", "/live.js", "/api/v1/fleet"} {
		if code := ask(two.URL, path); code != 200 {
			t.Errorf("%s on the other replica with the cookie: %d, want 200", path, code)
		}
		if code := ask(rotated.URL, path); code != http.StatusUnauthorized {
			t.Errorf("%s with the cookie of another token: %d, want 401", path, code)
		}
	}
}

// Basic auth is the other way in: users of an htpasswd file with bcrypt
// entries, which must not be readable by others; the browser is told to
// ask (WWW-Authenticate), and the token still works beside it.
func TestUsers(t *testing.T) {
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("correct horse"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("users", "# readers\nalice:"+string(hash)+"\n\n", 0o600)
	for _, c := range []struct{ name, content, want string }{
		{"md5", "alice:" + string(hash) + "\nbob:$apr1$Vx1kq1l2$3yzT0PBfBXbD6q6k.9X3w/\n", "md5:2: user bob: the hash is not bcrypt"},
		{"colon", "alice\n", "colon:1: want user:hash"},
		{"empty", "# nobody\n", "no user in the file"},
		{"twice", "alice:" + string(hash) + "\nalice:" + string(hash) + "\n", "twice:2: user alice is listed twice"},
	} {
		if _, err := ReadUsers(write(c.name, c.content, 0o600)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := ReadUsers(write("open", "alice:"+string(hash)+"\n", 0o644)); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a file others can read: %v", err)
	}
	users, err := ReadUsers(good)
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, fleetRepo(t, 0, 0), Options{Users: users, Token: "s3cret-token-value"})
	ask := func(user, pass string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		res.Header.Set("X-Body", string(body))
		return res
	}
	for range 2 { // the second time from memory
		if res := ask("alice", "correct horse"); res.StatusCode != 200 || !strings.Contains(res.Header.Get("X-Body"), "prod-1") {
			t.Errorf("alice with her password: %d", res.StatusCode)
		}
	}
	for _, c := range [][2]string{{"alice", "wrong"}, {"mallory", "correct horse"}, {"", ""}} {
		res := ask(c[0], c[1])
		if res.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("%q: %d, WWW-Authenticate %q", c[0], res.StatusCode, res.Header.Get("WWW-Authenticate"))
		}
		if body := res.Header.Get("X-Body"); !strings.Contains(body, "--ui-users") || !strings.Contains(body, "--ui-token") {
			t.Errorf("%q: the refusal does not say what is asked: %s", c[0], body)
		}
	}
	if code, _ := browserGet(t, srv.Client(), srv.URL+"/api/v1/fleet?token=s3cret-token-value"); code != 200 {
		t.Errorf("the token beside the users: %d", code)
	}
}

// BenchmarkFleetPage1000 renders the fleet page of 1,000 clusters × 13
// machines as the server does: the status branch is read again only when
// it moved (Branch).
func BenchmarkFleetPage1000(b *testing.B) {
	repo := fleetRepo(b, 1000, 13)
	h := Handler(Options{Source: Branch(func() (*git.Repository, error) { return repo, nil }, "gitfleet/status")})
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://localhost/", nil))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// /events says when the status branch moves: the commit the page was
// made from, then each new status commit.
func TestEvents(t *testing.T) {
	repo := fleetRepo(t, 0, 0)
	srv := serve(t, repo, Options{Poll: 20 * time.Millisecond})
	res, err := http.Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				lines <- data
			}
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10s")
			return ""
		}
	}
	s0, _ := status.Read(repo, "gitfleet/status")
	if got := next(); got != s0.Commit {
		t.Fatalf("first event %q, want the status commit %s", got, s0.Commit)
	}
	w, err := status.NewWriter(t.Context(), status.Options{Repo: repo, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c := *s0.Cluster("prod-1")
	c.Phase = "RollingOut"
	if err := w.SetCluster(c, status.Origin{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	s1, _ := status.Read(repo, "gitfleet/status")
	if s1.Commit == s0.Commit {
		t.Fatal("the writer made no commit")
	}
	if got := next(); got != s1.Commit {
		t.Errorf("second event %q, want the new status commit %s", got, s1.Commit)
	}
}

// The style sheet and the live-update script are served with their types.
func TestStaticFiles(t *testing.T) {
	srv := serve(t, fleetRepo(t, 0, 0), Options{})
	for path, want := range map[string]string{"/style.css": "text/css", "/live.js": "text/javascript"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), want) || len(b) < 100 {
			t.Errorf("%s: %d %q, %d bytes", path, res.StatusCode, res.Header.Get("Content-Type"), len(b))
		}
	}
}

// hostGet asks url with the Host header host.
func hostGet(t *testing.T, url, host string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Host = host
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// A dashboard that asks for no password answers only to this host's
// names: a page of another site that points a name of its own at
// 127.0.0.1 (DNS rebinding) is refused, saying why and what to do. With
// users or a token, asking who reads is the guard, whatever the name.
func TestOnlyLocalNames(t *testing.T) {
	repo := fleetRepo(t, 0, 0)
	srv := serve(t, repo, Options{})
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "[::1]:" + port, "127.1.2.3", "[::1]"} {
		if res, body := hostGet(t, srv.URL+"/api/v1/fleet", host); res.StatusCode != 200 {
			t.Errorf("Host %s: %d %s", host, res.StatusCode, body)
		}
	}
	for _, host := range []string{"rebind.attacker.example:" + port, "rebind.attacker.example", "localhost.attacker.example", "10.0.0.1:" + port} {
		res, body := hostGet(t, srv.URL+"/api/v1/fleet", host)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "DNS rebinding") || !strings.Contains(body, "--ui-users or --ui-token-file") ||
			!strings.Contains(body, "http://127.0.0.1:"+port+"/") {
			t.Errorf("Host %q: %d %s", host, res.StatusCode, body)
		}
	}
	guarded := serve(t, repo, Options{Token: "s3cret-token-value"})
	req, _ := http.NewRequest(http.MethodGet, guarded.URL+"/api/v1/fleet", nil)
	req.Host = "dashboard.example.com"
	req.Header.Set("Authorization", "Bearer s3cret-token-value")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 200 {
		t.Errorf("a guarded dashboard under its public name: %v %v", res, err)
	}
}

// Every answer carries a content security policy that allows the pages'
// own style sheet, script and fetches only, nosniff and no-referrer;
// behind users or a token, no-store too, so no cache keeps the fleet.
func TestSecurityHeaders(t *testing.T) {
	repo := fleetRepo(t, 0, 0)
	for _, o := range []Options{{}, {Token: "s3cret-token-value"}} {
		srv := serve(t, repo, o)
		for _, path := range []string{"/", "/api/v1/fleet", "/style.css", "/live.js", "/clusters/nope", "/api/v1/fleet?token=wrong-token-value"} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+o.Token)
			if strings.Contains(path, "token=") {
				req.Header.Del("Authorization")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			h := res.Header
			if h.Get("Content-Security-Policy") != contentPolicy || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("token %v, %s (%d): %v", o.Token != "", path, res.StatusCode, h)
			}
			if noStore := h.Get("Cache-Control") == "no-store"; noStore != o.Protected() {
				t.Errorf("token %v, %s: Cache-Control %q", o.Token != "", path, h.Get("Cache-Control"))
			}
		}
	}
	if !strings.Contains(contentPolicy, "script-src 'self';") || strings.Contains(contentPolicy, "unsafe") {
		t.Errorf("the policy: %s", contentPolicy)
	}
}
