// Package dashboard serves the fleet as web pages and a small read-only
// JSON API, from the status branch: live from the daemon (its writer's
// branch) or offline from a clone, for auditors. Pages are server-rendered
// with html/template and embedded CSS; there is no build step.
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/reconciler/history"
	"github.com/gitfleet/gitfleet/reconciler/status"
)

//go:embed templates/*.html templates/*.css templates/*.js
var files embed.FS

// pages are the templates, parsed at first use: parsing them is ~2 ms,
// which every gitfleet command would pay at its start otherwise.
var pages = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("").Funcs(template.FuncMap{
		"since": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return time.Since(t).Round(time.Second).String()
		},
		"short":      func(s string) string { return s[:min(len(s), 7)] },
		"when":       func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"join":       strings.Join,
		"trimPrefix": func(prefix, s string) string { return strings.TrimPrefix(s, prefix) },
		"add":        func(a, b int) int { return a + b },
	}).ParseFS(files, "templates/*.html"))
})

// Source reads the status the pages show: the status branch's newest
// commit.
type Source func() (*status.Snapshot, error)

// Options configure the handler.
type Options struct {
	Source Source
	// Token, when set, is asked of every request (a bearer token, or the
	// token query parameter once, which sets a cookie): for a dashboard
	// that listens beyond 127.0.0.1.
	Token string
	// Users, when set, may read the pages with HTTP basic auth (either
	// this or the token lets a request in).
	Users Users
	// Log says who failed to sign in (never the password), and warns of
	// weak entries in Users.
	Log zerolog.Logger
	// limits bound the password checks (zero: the defaults).
	limits authLimits
	// PageSize is how many clusters a page lists (default 50).
	PageSize int
	// Poll is how often /events looks at the status branch (default 1s),
	// once for all its streams.
	Poll time.Duration
	// MaxStreams is how many /events streams may be open at once
	// (default 100); more are answered 503.
	MaxStreams int
	// History reads the audit trail (all clusters for ""), and
	// MachineHistory one machine's life; nil: no history page.
	History        func(ctx context.Context, cluster string) (*history.Log, error)
	MachineHistory func(machine string) (*history.MachineLife, error)
}

// Handler serves the pages at /, /clusters/{name} and /rollouts and the
// API under /api/v1/.
func Handler(o Options) http.Handler {
	if o.PageSize <= 0 {
		o.PageSize = 50
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = 100
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", o.fleetPage)
	mux.HandleFunc("GET /clusters/{name}", o.clusterPage)
	mux.HandleFunc("GET /rollouts", o.rolloutsPage)
	mux.HandleFunc("GET /style.css", static("style.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /api/v1/fleet", o.apiFleet)
	mux.HandleFunc("GET /api/v1/clusters", o.apiClusters)
	mux.HandleFunc("GET /api/v1/clusters/{name}", o.apiCluster)
	mux.HandleFunc("GET /api/v1/rollouts", o.apiRollouts)
	mux.HandleFunc("GET /history", o.historyPage)
	mux.Handle("GET /events", newFeed(o.Source, o.Poll, o.MaxStreams))
	mux.HandleFunc("GET /live.js", static("live.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /api/v1/history", o.apiHistory)
	if !o.Protected() {
		return headers(localOnly(mux), false)
	}
	return headers(o.guard(mux), true)
}

// contentPolicy lets a page load its own style sheet and script and fetch
// its own address, and nothing else: the templates hold no inline script,
// style or image, so an injection that got past html/template would run
// nothing.
const contentPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// headers adds the security headers to every answer, and, when the
// dashboard asks who is reading (private), tells caches not to keep what
// it shows.
func headers(next http.Handler, private bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if private {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// localOnly serves a dashboard that asks for no password only to requests
// for this host's names: localhost, a loopback address, or the address the
// request came in on. Otherwise any web page could read it by DNS
// rebinding: a name of its own that it points at 127.0.0.1 after the
// browser loaded it, which makes the dashboard same-origin to the page.
// The Host header is the name the browser looked up.
func localOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if !localHost(r.Host, local) {
			open := "127.0.0.1"
			if local != nil {
				open = local.String()
			}
			http.Error(w, fmt.Sprintf("this dashboard answers to localhost and loopback addresses only, not to Host %q: it asks for no password, "+
				"so a page of another site could read it under a name of its own (DNS rebinding). Open http://%s/, "+
				"or give --ui-users or --ui-token-file to serve it under other names", r.Host, open), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// localHost says whether host (a Host header) names this host: localhost,
// a loopback address, or local's address.
func localHost(host string, local net.Addr) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	if local == nil {
		return false
	}
	at, err := netip.ParseAddrPort(local.String())
	return err == nil && at.Addr().Unmap() == ip.Unmap()
}

// static serves an embedded file of the templates folder.
func static(name, contentType string) http.HandlerFunc {
	b, err := files.ReadFile("templates/" + name)
	if err != nil {
		panic(err) // embedded: covered by the tests
	}
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(b)
	}
}

func (o Options) snapshot(w http.ResponseWriter) *status.Snapshot {
	s, err := o.Source()
	if err != nil {
		http.Error(w, "the status branch cannot be read: "+err.Error(), http.StatusServiceUnavailable)
		return nil
	}
	return s
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// ClusterSummary is a cluster's line in the fleet's list.
type ClusterSummary struct {
	Name         string `json:"name"`
	Class        string `json:"class,omitempty"`
	Version      string `json:"version,omitempty"`
	Phase        string `json:"phase"`
	Ready        bool   `json:"ready"`
	NotReady     string `json:"notReady,omitempty"` // why, when not Ready
	Machines     int    `json:"machines"`
	Running      int    `json:"running"`
	RolloutState string `json:"rolloutState,omitempty"`
}

func summarize(c *status.ClusterStatus) ClusterSummary {
	s := ClusterSummary{Name: c.Name, Class: c.Class, Version: c.Version, Phase: c.Phase, Machines: len(c.Machines)}
	for _, m := range c.Machines {
		if m.Phase == "Running" {
			s.Running++
		}
	}
	for _, cond := range c.Conditions {
		if cond.Type == status.ConditionReady {
			s.Ready = cond.Status == status.ConditionTrue
			if !s.Ready {
				s.NotReady = strings.TrimSpace(cond.Reason + ": " + cond.Message)
			}
		}
	}
	if c.Rollout != nil {
		s.RolloutState = c.Rollout.State
	}
	return s
}

// filter is the clusters whose name, class, version or phase holds q.
func filter(s *status.Snapshot, q string) []ClusterSummary {
	q = strings.ToLower(strings.TrimSpace(q))
	out := []ClusterSummary{} // [] in JSON when none matches, not null
	for i := range s.Clusters {
		c := summarize(&s.Clusters[i])
		if q == "" || strings.Contains(strings.ToLower(c.Name+" "+c.Class+" "+c.Version+" "+c.Phase), q) {
			out = append(out, c)
		}
	}
	return out
}

func (o Options) apiFleet(w http.ResponseWriter, _ *http.Request) {
	if s := o.snapshot(w); s != nil {
		writeJSON(w, struct {
			Commit string             `json:"statusCommit"`
			Fleet  status.FleetStatus `json:"fleet"`
			// MachinesByProvider is counted from the cluster files.
			MachinesByProvider map[string]int `json:"machinesByProvider"`
		}{s.Commit, s.Fleet, machinesByProvider(s)})
	}
}

func (o Options) apiClusters(w http.ResponseWriter, r *http.Request) {
	if s := o.snapshot(w); s != nil {
		writeJSON(w, filter(s, r.URL.Query().Get("q")))
	}
}

// cluster is the snapshot and the cluster the path names; nil (with the
// error answered) when either cannot be had.
func (o Options) cluster(w http.ResponseWriter, r *http.Request) (*status.Snapshot, *status.ClusterStatus) {
	s := o.snapshot(w)
	if s == nil {
		return nil, nil
	}
	c := s.Cluster(r.PathValue("name"))
	if c == nil {
		http.Error(w, fmt.Sprintf("no cluster %q on the status branch", r.PathValue("name")), http.StatusNotFound)
	}
	return s, c
}

// apiCluster answers the cluster's status file with the fleet conditions
// that concern it under fleetConditions, as describe CLUSTER -o json
// prints it (status.Snapshot.DescribeCluster).
func (o Options) apiCluster(w http.ResponseWriter, r *http.Request) {
	if s, c := o.cluster(w, r); c != nil {
		writeJSON(w, s.DescribeCluster(c.Name))
	}
}

func (o Options) apiRollouts(w http.ResponseWriter, _ *http.Request) {
	if s := o.snapshot(w); s != nil {
		writeJSON(w, Rollouts(s))
	}
}

// ClassRollout is a class's rollout: the daemon's decision for the
// class (fleet.yaml's rollouts) and each wave with its clusters by state
// (their own files).
type ClassRollout struct {
	Class string `json:"class"`
	// Rollout is the daemon's record: revision, the change that started
	// it, maxFailures, halted and why; nil before the daemon recorded one.
	Rollout *status.ClassRollout `json:"rollout,omitempty"`
	// Revisions are the class revisions its clusters are admitted to or
	// wait for, sorted.
	Revisions []string `json:"revisions,omitempty"`
	Waves     []Wave   `json:"waves"`
}

// Wave is one wave of a class's rollout.
type Wave struct {
	Name string `json:"name"`
	// MaxConcurrent is the wave's limit as written; "" for none.
	MaxConcurrent string `json:"maxConcurrent,omitempty"`
	// Halted: the class's rollout halted on failures of this wave's
	// clusters.
	Halted   bool           `json:"halted,omitempty"`
	Clusters []WaveCluster  `json:"clusters"`
	States   map[string]int `json:"states"`
}

// WaveCluster is a cluster in a wave: its rollout state and why.
type WaveCluster struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// Rollouts groups the clusters' rollout status by class and wave, the
// waves in the class's order where the daemon recorded it.
func Rollouts(s *status.Snapshot) []ClassRollout {
	byClass := map[string]*ClassRollout{}
	class := func(name string) *ClassRollout {
		cr := byClass[name]
		if cr == nil {
			cr = &ClassRollout{Class: name}
			byClass[name] = cr
		}
		return cr
	}
	wave := func(cr *ClassRollout, name string) *Wave {
		i := slices.IndexFunc(cr.Waves, func(w Wave) bool { return w.Name == name })
		if i < 0 {
			cr.Waves = append(cr.Waves, Wave{Name: name, States: map[string]int{}})
			i = len(cr.Waves) - 1
		}
		return &cr.Waves[i]
	}
	for i := range s.Fleet.Rollouts {
		r := &s.Fleet.Rollouts[i]
		cr := class(r.Class)
		cr.Rollout = r
		for _, w := range r.Waves {
			if w.Clusters == 0 {
				continue // the implicit last wave, or a wave no cluster is in
			}
			wv := wave(cr, w.Name)
			wv.MaxConcurrent = w.MaxConcurrent
		}
	}
	for _, c := range s.Clusters {
		if c.Rollout == nil || c.Class == "" {
			continue
		}
		cr := class(c.Class)
		for _, rev := range []string{c.Rollout.ClassRevision, c.Rollout.PendingRevision} {
			if rev != "" && !slices.Contains(cr.Revisions, rev) {
				cr.Revisions = append(cr.Revisions, rev)
				slices.Sort(cr.Revisions)
			}
		}
		w := wave(cr, c.Rollout.Wave)
		if r := cr.Rollout; r != nil && r.Halted && slices.Contains(r.Failed, c.Name) {
			w.Halted = true
		}
		w.Clusters = append(w.Clusters, WaveCluster{Name: c.Name, State: c.Rollout.State, Reason: c.Rollout.Reason})
		w.States[c.Rollout.State]++
	}
	out := make([]ClassRollout, 0, len(byClass))
	for _, cr := range byClass {
		out = append(out, *cr)
	}
	slices.SortFunc(out, func(a, b ClassRollout) int { return strings.Compare(a.Class, b.Class) })
	return out
}

// machinesByProvider counts the fleet's machines by provider (fleet.yaml
// counts them by phase and version only).
func machinesByProvider(s *status.Snapshot) map[string]int {
	out := map[string]int{}
	for i := range s.Clusters {
		for _, m := range s.Clusters[i].Machines {
			out[m.Provider]++
		}
	}
	return out
}

type fleetView struct {
	S          *status.Snapshot
	ByProvider map[string]int
	Clusters   []ClusterSummary
	Query      string
	Page       int
	Pages      int
	Total      int
}

func (o Options) fleetPage(w http.ResponseWriter, r *http.Request) {
	s := o.snapshot(w)
	if s == nil {
		return
	}
	all := filter(s, r.URL.Query().Get("q"))
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	pages := max(1, (len(all)+o.PageSize-1)/o.PageSize)
	page = min(max(page, 1), pages)
	from := (page - 1) * o.PageSize
	v := fleetView{S: s, ByProvider: machinesByProvider(s), Clusters: all[from:min(from+o.PageSize, len(all))], Query: r.URL.Query().Get("q"), Page: page, Pages: pages, Total: len(all)}
	render(w, "fleet.html", v)
}

func (o Options) clusterPage(w http.ResponseWriter, r *http.Request) {
	s, c := o.cluster(w, r)
	if c == nil {
		return
	}
	v := clusterView{S: s, C: c, Summary: summarize(c), FleetConditions: s.FleetConditionsOf(c.Name), Recent: Recent(c, recentEvents), Held: c.HaltHold()}
	if v.Held != nil {
		// Its rollout says the halt, in the RolloutHalted condition's
		// words, as describe does: Ready's reason alone says it here.
		for _, cd := range c.Conditions {
			if cd.Type == status.ConditionReady && cd.Status != status.ConditionTrue && cd.Reason == status.ConditionRolloutHalted {
				v.Summary.NotReady = cd.Reason
			}
		}
	}
	render(w, "cluster.html", v)
}

// clusterView is what a cluster's page shows.
type clusterView struct {
	S       *status.Snapshot
	C       *status.ClusterStatus
	Summary ClusterSummary
	// FleetConditions are the conditions of fleet.yaml that concern the
	// cluster, as describe CLUSTER lists them
	// (status.Snapshot.FleetConditionsOf): a problem of the daemon's that
	// holds it up, such as a lost CA or a provider no worker answers for.
	FleetConditions []status.FleetCondition
	Recent          []Event
	// Held is the RolloutHalted condition of a cluster its class's halted
	// rollout holds (status.ClusterStatus.HaltHold): it waits for no wave.
	Held *status.Condition
}

// recentEvents is how many events a cluster's page lists; the history
// page has the rest.
const recentEvents = 12

// Event is something that happened to a cluster, as its status file
// dates it: a machine created (and why), joined or deleted (and why), a
// condition that changed, an admission to a class revision.
type Event struct {
	Time    time.Time `json:"time"`
	Machine string    `json:"machine,omitempty"`
	What    string    `json:"what"`
	Why     string    `json:"why,omitempty"`
}

// Recent lists a cluster's newest n events from its status file alone,
// newest first: no walk of the history, so a page costs the same however
// long the fleet has run.
func Recent(c *status.ClusterStatus, n int) []Event {
	var out []Event
	for _, m := range c.Machines {
		if !m.Created.IsZero() {
			out = append(out, Event{Time: m.Created, Machine: m.Name, What: "created", Why: m.Cause})
		}
		if !m.Joined.IsZero() {
			out = append(out, Event{Time: m.Joined, Machine: m.Name, What: "joined the cluster"})
		}
	}
	for _, d := range c.Deleted {
		why := d.Cause
		// The reason adds what the cause does not say already: a
		// provider's (NodeExited) after a remediation's cause, not the
		// word the daemon took from the cause itself (ScaledDown).
		if d.Reason != "" && d.Reason != planner.DeleteReason(d.Cause) && !strings.Contains(d.Cause, d.Reason) {
			why += " (" + d.Reason + ")"
		}
		out = append(out, Event{Time: d.Deleted, Machine: d.Name, What: "deleted", Why: why})
	}
	for _, cd := range c.Conditions {
		if !cd.LastTransitionTime.IsZero() {
			out = append(out, Event{Time: cd.LastTransitionTime, What: cd.Type + " " + cd.Status, Why: strings.TrimSpace(cd.Reason + " " + cd.Message)})
		}
	}
	if r := c.Rollout; r != nil && !r.AdmittedAt.IsZero() {
		out = append(out, Event{Time: r.AdmittedAt, What: "admitted to class revision " + r.ClassRevision, Why: "wave " + r.Wave})
	}
	slices.SortStableFunc(out, func(a, b Event) int { return b.Time.Compare(a.Time) })
	return out[:min(n, len(out))]
}

func (o Options) rolloutsPage(w http.ResponseWriter, _ *http.Request) {
	if s := o.snapshot(w); s != nil {
		render(w, "rollouts.html", struct {
			S        *status.Snapshot
			Rollouts []ClassRollout
		}{s, Rollouts(s)})
	}
}

// historyView is the trail the history page shows: a cluster's (or the
// fleet's) spec commits with the status they led to, or one machine's life.
type historyView struct {
	Cluster, Machine string
	Log              *history.Log
	Life             *history.MachineLife
}

// readHistory reads what ?cluster= and ?machine= ask for.
func (o Options) readHistory(w http.ResponseWriter, r *http.Request) *historyView {
	if o.History == nil || o.MachineHistory == nil {
		http.Error(w, "this dashboard has no history", http.StatusNotFound)
		return nil
	}
	v := &historyView{Cluster: r.URL.Query().Get("cluster"), Machine: r.URL.Query().Get("machine")}
	var err error
	if v.Machine != "" {
		v.Life, err = o.MachineHistory(v.Machine)
	} else {
		v.Log, err = o.History(r.Context(), v.Cluster)
	}
	switch {
	case errors.Is(err, history.ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
		return nil
	case err != nil:
		http.Error(w, "the history cannot be read: "+err.Error(), http.StatusServiceUnavailable)
		return nil
	}
	return v
}

func (o Options) historyPage(w http.ResponseWriter, r *http.Request) {
	if v := o.readHistory(w, r); v != nil {
		render(w, "history.html", v)
	}
}

func (o Options) apiHistory(w http.ResponseWriter, r *http.Request) {
	v := o.readHistory(w, r)
	switch {
	case v == nil:
	case v.Life != nil:
		writeJSON(w, v.Life)
	default:
		writeJSON(w, v.Log)
	}
}

func render(w http.ResponseWriter, name string, v any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pages().ExecuteTemplate(w, name, v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// Branch is a Source that reads branch of the repository open returns,
// again only when the branch has moved: a page costs its rendering, not a
// read of every cluster's file, while the fleet is quiet.
func Branch(open func() (*git.Repository, error), branch string) Source {
	var mu sync.Mutex
	var last *status.Snapshot
	var tip plumbing.Hash
	return func() (*status.Snapshot, error) {
		g, err := open()
		if err != nil {
			return nil, err
		}
		now, err := status.ResolveBranch(g, branch)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if last != nil && now == tip {
			return last, nil
		}
		s, err := status.Read(g, branch)
		if err != nil {
			return nil, err
		}
		last, tip = s, now
		return s, nil
	}
}
