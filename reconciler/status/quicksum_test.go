package status

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// sumText writes a clusterSum with times as instants, for comparison.
func sumText(s clusterSum) string {
	var conds []string
	for _, c := range s.conds {
		conds = append(conds, fmt.Sprintf("%q=%q@%s", c.typ, c.status, c.since.UTC().Format(time.RFC3339Nano)))
	}
	slices.Sort(conds)
	var deleted []string
	for _, d := range s.deleted {
		deleted = append(deleted, fmt.Sprintf("%q:%q:%q:%q:%q@%s", d.Name, d.Role, d.Deployment, d.Cause, d.Reason, d.Deleted.UTC().Format(time.RFC3339Nano)))
	}
	return fmt.Sprintf("class=%q version=%q phase=%q machines=%d phases=%v versions=%v created=%s conds=%v deleted=%v",
		s.class, s.version, s.phase, s.machines, s.machinePhases.toMap(), s.machineVersions.toMap(), s.created.UTC().Format(time.RFC3339Nano), conds, deleted)
}

// TestQuickSummaryAgreesWithYAMLv3: what a new leader reads of a status
// file line by line is what yaml.v3's full decode gives, for thousands of
// random clusters of tricky strings; files it cannot read (block scalars)
// are left to yaml.v3.
func TestQuickSummaryAgreesWithYAMLv3(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	quick := 0
	for i := range 3000 {
		c := randCluster(r)
		if r.IntN(4) == 0 {
			// Duplicate condition types: the last one wins in both.
			c.Conditions = append(c.Conditions, c.Conditions...)
		}
		data, err := encodeYAML(c.normalized())
		if err != nil {
			t.Fatal(err)
		}
		full, err := DecodeCluster(data)
		if err != nil {
			t.Fatalf("value %d: yaml.v3 cannot read what was written: %v\n%s", i, err, data)
		}
		got, ok := quickSummary(data)
		if !ok {
			if !strings.Contains(string(data), "|") {
				t.Errorf("value %d: quickSummary gave up on a file without block scalars:\n%s", i, data)
			}
			continue
		}
		quick++
		if g, w := sumText(got), sumText(summarize(full)); g != w {
			t.Fatalf("value %d:\nquick   %s\nyaml.v3 %s\nfile:\n%s", i, g, w, data)
		}
	}
	if quick < 1500 {
		t.Errorf("only %d files read quickly", quick)
	}
	for _, bad := range []string{"name: x\nphase: |\n  a\n", "name: x\n\tphase: y\n", "name: {a: b}\n", "conditions:\n    status: x\n"} {
		if _, ok := quickSummary([]byte(bad)); ok {
			t.Errorf("quickSummary read %q; want it left to yaml.v3", bad)
		}
	}
}

// TestWrittenSumIsReadBack: the summary the Writer keeps of a file it
// wrote is what reading that file back gives, so the summary cache may
// hold it in place of the file.
func TestWrittenSumIsReadBack(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 2000 {
		c := randCluster(r)
		c.Name = fmt.Sprintf("c-%d", i)
		if r.IntN(4) == 0 {
			c.Conditions = append(c.Conditions, c.Conditions...)
		}
		for j := range c.Conditions {
			// Times as a daemon has them: nanoseconds, not UTC.
			c.Conditions[j].LastTransitionTime = c.Conditions[j].LastTransitionTime.Add(time.Duration(r.IntN(1e9))).In(time.FixedZone("X", 3600))
		}
		data, err := EncodeCluster(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeCluster(data)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := sumText(writtenSum(c)), sumText(summarize(back)); g != w {
			t.Fatalf("value %d:\nkept %s\nread %s\nfile:\n%s", i, g, w, data)
		}
	}
}

// BenchmarkReadSummary: what a new leader reads of one cluster's status
// file (13 machines), line by line and with yaml.v3.
func BenchmarkReadSummary(b *testing.B) {
	c := ClusterStatus{Name: "c00001", Class: "bench", Version: "v1.31.2", Phase: ClusterProvisioned,
		Conditions: []Condition{{Type: ConditionReady, Status: ConditionTrue, LastTransitionTime: time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)}}}
	for i := range 13 {
		c.Machines = append(c.Machines, MachineStatus{Name: fmt.Sprintf("c00001-md-0-%05d", i), Role: "worker", Deployment: "md-0",
			Phase: "Running", Version: "v1.31.2", Provider: "inmemory", ProviderID: fmt.Sprintf("inmemory://c00001/%d", i),
			Cause: "scale up md-0 from 0 to 10", Created: time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)})
	}
	data, err := EncodeCluster(c)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("lines", func(b *testing.B) {
		for b.Loop() {
			if _, ok := quickSummary(data); !ok {
				b.Fatal("not read")
			}
		}
	})
	b.Run("yaml.v3", func(b *testing.B) {
		for b.Loop() {
			c, _ := DecodeCluster(data)
			summarize(c)
		}
	})
}
