package status

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// tricky strings: words YAML reads as other types, indicators, quotes,
// spaces at the ends, long text, non-ASCII, control characters, lines.
var tricky = []string{
	"", "a", "Ready", "True", "true", "False", "yes", "No", "on", "OFF", "y", "N", "null", "Null", "~",
	"1", "0.5", "1e3", "0x1F", "0o17", ".nan", ".inf", "-.inf", "2026-11-25", "2026-11-25T01:00:00Z", "12:30",
	"v1.31.2", "c-00001", "md-0", "inmemory://c/m", "10.0.0.1", "-", "- a", "?", "? a", ":", "a: b", "a:b",
	"#x", "a #x", "a#x", "&a", "*a", "!tag", "|", ">", "%x", "@x", "`x`", "'q'", "it's", `say "hi"`,
	" lead", "trail ", "two  spaces", "tab\there", "é", "日本", "emoji 🚀", "a,b", "[x]", "{x}", "<<",
	"scale up md-0 from 2 to 3", "no heartbeat for 30.9 s, MachineHealthCheck prod-1-workers",
	"a:", "a :b", "x #y", "a b", "Yes sir", "on the way", "c00001-md-0-abcde", "inmemory://c00001/c00001-md-0-x", "http://x:8080/p", "a:b:c", "a -b", "a - b", "a ? b",
	strings.Repeat("long words ", 20), strings.Repeat("x", 100), "line one\nline two", "cr\rhere", "bell\a",
}

func pick(r *rand.Rand) string { return tricky[r.IntN(len(tricky))] }

func randTime(r *rand.Rand) time.Time {
	if r.IntN(4) == 0 {
		return time.Time{}
	}
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(1e17)))
	if r.IntN(3) == 0 {
		t = t.In(time.FixedZone("x", 3600))
	}
	return t
}

func randConds(r *rand.Rand) []Condition {
	var cs []Condition
	for range r.IntN(3) {
		cs = append(cs, Condition{Type: pick(r), Status: pick(r), Reason: pick(r), Message: pick(r), LastTransitionTime: randTime(r)})
	}
	return cs
}

// randFleetConds are randConds with what each concerns, or none.
func randFleetConds(r *rand.Rand) []FleetCondition {
	var cs []FleetCondition
	for _, c := range randConds(r) {
		fc := FleetCondition{Condition: c}
		for range r.IntN(3) {
			fc.Clusters = append(fc.Clusters, pick(r))
		}
		for range r.IntN(2) {
			fc.Providers = append(fc.Providers, pick(r))
		}
		cs = append(cs, fc)
	}
	return cs
}

func randReplicas(r *rand.Rand) Replicas {
	rp := Replicas{Version: pick(r), Desired: r.IntN(5) - 1, Replicas: r.IntN(5), Ready: r.IntN(3), Updated: r.IntN(2)}
	if r.IntN(3) == 0 {
		rp.Backoff = &Backoff{Failures: r.IntN(3), LastFailure: pick(r), NextRetry: randTime(r)}
	}
	return rp
}

func randCluster(r *rand.Rand) ClusterStatus {
	c := ClusterStatus{Name: pick(r), Class: pick(r), Version: pick(r), Phase: pick(r), Paused: r.IntN(2) == 0,
		Created: randTime(r), Conditions: randConds(r), ControlPlane: randReplicas(r)}
	for range r.IntN(3) {
		c.Deployments = append(c.Deployments, DeploymentStatus{Name: pick(r), Replicas: randReplicas(r)})
	}
	for range r.IntN(4) {
		m := MachineStatus{Name: pick(r), Role: pick(r), Deployment: pick(r), Phase: pick(r), Version: pick(r),
			Provider: pick(r), ProviderID: pick(r), Worker: pick(r), TemplateHash: pick(r), Unhealthy: r.IntN(2) == 0,
			Reason: pick(r), Cause: pick(r), Message: pick(r), Conditions: randConds(r), SourceCommit: pick(r), Created: randTime(r)}
		for range r.IntN(3) {
			m.Addresses = append(m.Addresses, pick(r))
		}
		if r.IntN(5) == 0 {
			m = MachineStatus{} // every field empty
		}
		c.Machines = append(c.Machines, m)
	}
	if r.IntN(2) == 0 {
		c.Rollout = &Rollout{ClassRevision: pick(r), Wave: pick(r), AdmittedAt: randTime(r), State: pick(r), Reason: pick(r), PendingRevision: pick(r)}
	}
	for range r.IntN(3) {
		c.Deleted = append(c.Deleted, DeletedMachine{Name: pick(r), Role: pick(r), Deployment: pick(r), Cause: pick(r), Reason: pick(r), Deleted: randTime(r)})
	}
	return c
}

func randFleet(r *rand.Rand) FleetStatus {
	f := FleetStatus{RefreshedAt: randTime(r), Conditions: randFleetConds(r)}
	if r.IntN(2) == 0 {
		f.LastApplied = &SourceCommit{Commit: pick(r), Subject: pick(r)}
	}
	if r.IntN(2) == 0 {
		f.LastRejected = &Rejection{SourceCommit: SourceCommit{Commit: pick(r), Subject: pick(r)}}
		for range r.IntN(3) {
			f.LastRejected.Errors = append(f.LastRejected.Errors, pick(r))
		}
	}
	for range r.IntN(3) {
		f.Orphans = append(f.Orphans, Orphan{Cluster: pick(r), Machine: pick(r), Provider: pick(r), Worker: pick(r), ProviderID: pick(r), Since: randTime(r), Action: pick(r)})
	}
	f.Counts = Counts{Clusters: r.IntN(3), Machines: r.IntN(40)}
	return f
}

// TestFastYAMLMatchesYAMLv3: for thousands of random status values built
// from tricky strings, the fast encoder writes yaml.v3's bytes exactly, or
// hands the value to yaml.v3 (multi-line strings); either way the status
// files are what they were.
func TestFastYAMLMatchesYAMLv3(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fast, slow := 0, 0
	for i := range 3000 {
		var v any = randCluster(r)
		if i%3 == 0 {
			v = randFleet(r)
		}
		want, err := slowYAML(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fastYAML(v)
		if errors.Is(err, errSlowPath) {
			slow++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		fast++
		if !bytes.Equal(got, want) {
			t.Fatalf("value %d: fast encoder wrote\n%s\nyaml.v3 writes\n%s", i, got, want)
		}
	}
	if fast < 1000 {
		t.Errorf("only %d of %d values took the fast path", fast, fast+slow)
	}
}

// BenchmarkEncodeCluster: one cluster of 13 machines, as every planning
// pass that changes a cluster writes it.
func BenchmarkEncodeCluster(b *testing.B) {
	c := ClusterStatus{Name: "c00001", Class: "bench", Version: "v1.31.2", Phase: ClusterProvisioned,
		Created:    time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC),
		Conditions: []Condition{{Type: ConditionReady, Status: ConditionTrue, LastTransitionTime: time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)}},
	}
	for i := range 13 {
		c.Machines = append(c.Machines, MachineStatus{Name: "c00001-md-0-" + string(rune('a'+i)), Role: "worker", Deployment: "md-0",
			Phase: "Running", Version: "v1.31.2", Provider: "inmemory", ProviderID: "inmemory://c00001/x", Worker: "w1",
			TemplateHash: "3f2a9c", Cause: "scale up md-0 from 0 to 10", SourceCommit: "0123456789abcdef0123456789abcdef01234567",
			Created: time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)})
	}
	for _, enc := range []struct {
		name string
		f    func(any) ([]byte, error)
	}{{"fast", fastYAML}, {"yaml.v3", slowYAML}} {
		b.Run(enc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := enc.f(c.normalized()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A status commit's subject counts a rejection's errors in words: "1
// error", not "1 errors".
func TestFleetSummaryCountsInWords(t *testing.T) {
	for n, want := range map[int]string{1: "fleet: rejected 0123456 (1 error)", 2: "fleet: rejected 0123456 (2 errors)"} {
		f := FleetStatus{LastRejected: &Rejection{SourceCommit: SourceCommit{Commit: "0123456789"}, Errors: make([]string, n)}}
		if got := f.summary(); got != want {
			t.Errorf("%d errors: summary %q, want %q", n, got, want)
		}
	}
}
