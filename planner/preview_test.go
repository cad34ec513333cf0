package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

func previewFleets() (*v1alpha1.Fleet, *v1alpha1.Fleet) {
	base := wavesFleet("v1.29.4")
	base.Clusters = append(base.Clusters, testCluster("old", 1, 2))
	head := wavesFleet("v1.30.2")
	head.Clusters[1].Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(3) // prod-a
	head.Clusters = append(head.Clusters, testCluster("new", 3, 2, labels("tier", "prod")))
	return base, head
}

func TestPreviewGolden(t *testing.T) {
	base, head := previewFleets()
	r := Preview(base, head, nil, nil)
	r.Base, r.Head = "main", "bump"
	// prod-a's two new workers are made at once, at v1.29.4 (its wave
	// comes last), and replaced with the others in its wave.
	if r.Totals != (PreviewTotals{Added: 1, Removed: 1, Changed: 5, Replaced: 12, Created: 2 + 5, Deleted: 3}) {
		t.Errorf("totals = %+v", r.Totals)
	}
	s := newSim(t, base)
	s.quiet = true
	s.run(100)
	from := len(s.applied)
	s.setFleet(head)
	s.run(300)
	checkPreviewIsWhatHappens(t, r, s.applied[from:])
	var text, md, js bytes.Buffer
	if err := RenderText(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := RenderMarkdown(&md, r, 0); err != nil {
		t.Fatal(err)
	}
	if err := RenderJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "preview/text", text.String())
	golden(t, "preview/markdown", md.String())
	var back PreviewReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Clusters) != len(r.Clusters) {
		t.Errorf("JSON does not read back: %v", err)
	}
}

// TestPreviewKeyedIsPreview: reusing base's expansions for the clusters
// whose inputs head did not change gives the report Preview gives, for a
// class change (nothing reused), for one cluster changed (the rest
// reused), and with observed machines.
func TestPreviewKeyedIsPreview(t *testing.T) {
	base, head := previewFleets()
	one, _ := previewFleets()
	one.Clusters[2].Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(5)
	base2 := testFleet(testClass("v1.29.4"), testCluster("c1", 1, 2), testCluster("c2", 1, 2))
	s := newSim(t, base2)
	s.quiet = true
	s.run(50)
	head2 := testFleet(testClass("v1.29.4"), testCluster("c1", 1, 2), testCluster("c2", 1, 4))
	for name, c := range map[string]struct {
		base, head *v1alpha1.Fleet
		observed   []ObservedMachine
	}{
		"class change":   {base, head, nil},
		"one cluster":    {base, one, nil},
		"observed":       {base2, head2, s.observed()},
		"nothing at all": {base, base, nil},
	} {
		want := Preview(c.base, c.head, nil, c.observed)
		got := PreviewKeyed(c.base, c.head, contentKeys(c.base), contentKeys(c.head), nil, c.observed)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: keyed preview differs (-Preview +PreviewKeyed):\n%s", name, d)
		}
		if name == "one cluster" && (got.Totals.Changed != 1 || got.Clusters[0].Name != one.Clusters[2].Metadata.Name) {
			t.Errorf("%s: %+v, want one cluster changed", name, got.Totals)
		}
	}
}

func TestPreviewWithObservedMachines(t *testing.T) {
	base := testFleet(testClass("v1.29.4"), testCluster("c1", 1, 2))
	s := newSim(t, base)
	s.quiet = true
	s.run(50)
	head := testFleet(testClass("v1.30.2"), testCluster("c1", 1, 2))
	r := Preview(base, head, nil, s.observed())
	if !r.Observed || len(r.Clusters) != 1 {
		t.Fatalf("report = %+v", r)
	}
	c := r.Clusters[0]
	if c.Replaced != 3 || len(c.Machines) != 3 || !strings.HasPrefix(c.Machines[0], "c1-") {
		t.Errorf("change = %+v, want 3 named machines replaced", c)
	}
}

func TestPreviewErrors(t *testing.T) {
	base := testFleet(testClass("v1.29.4"), testCluster("c1", 1, 1))
	head := testFleet(testClass("v1.31.0"), testCluster("c1", 1, 1))
	r := Preview(base, head, []error{errors.New("clusters/c1.yaml:4:3: spec.topology.class: required")}, nil)
	all := strings.Join(r.Errors, "\n")
	for _, want := range []string{
		"clusters/c1.yaml:4:3: spec.topology.class: required",
		"classes/standard.yaml:1: spec.version: cluster c1: cannot upgrade from v1.29.4 to v1.31.0",
		"add one (e.g. v1.30.0) to the class's spec.kubernetesVersions",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("errors lack %q:\n%s", want, all)
		}
	}
	if !r.HasChanges() {
		t.Error("a version change is a change")
	}
}

func TestPreviewNoChanges(t *testing.T) {
	f := testFleet(testClass("v1.29.4"), testCluster("c1", 1, 1))
	r := Preview(f, f, nil, nil)
	if r.HasChanges() || r.Unchanged != 1 {
		t.Errorf("report = %+v", r)
	}
}

func TestMarkdownStaysUnderLimit(t *testing.T) {
	base := testFleet(testClass("v1.29.4"))
	head := testFleet(testClass("v1.30.2"))
	for i := range 5000 {
		c := testCluster(fmt.Sprintf("cluster-with-a-long-name-%05d", i), 3, 10)
		base.Clusters = append(base.Clusters, c)
		head.Clusters = append(head.Clusters, c)
	}
	var errs []error
	for i := range 3000 {
		errs = append(errs, fmt.Errorf("clusters/x%d.yaml:1: spec: something is wrong here", i))
	}
	r := Preview(base, head, errs, nil)
	var md bytes.Buffer
	if err := RenderMarkdown(&md, r, 0); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	if len(out) > MarkdownLimit {
		t.Errorf("markdown is %d characters, more than %d", len(out), MarkdownLimit)
	}
	if !strings.Contains(out, "Cut to stay under 60000 characters") || !strings.Contains(out, "table rows") {
		t.Errorf("markdown does not say what was cut:\n%s", out[len(out)-600:])
	}
	if !strings.HasPrefix(strings.SplitN(out, "**", 2)[1], "3000 errors") || !strings.Contains(out, "| ~ | `cluster-with-a-long-name-00000`") {
		t.Error("markdown lacks the error count or the first table row")
	}
}

// The preview counts what the planner will do: a chained upgrade replaces
// every machine once per minor, which the simulator confirms by counting
// the creates it applies.
func TestPreviewCountsChainedReplacements(t *testing.T) {
	base := testFleet(testClass("v1.29.4", "v1.30.2"), testCluster("c1", 3, 2))
	head := testFleet(testClass("v1.31.0", "v1.30.2"), testCluster("c1", 3, 2))
	s := newSim(t, base)
	s.quiet = true
	s.run(100)
	r := Preview(base, head, nil, s.observed())
	if len(r.Errors) > 0 || len(r.Clusters) != 1 {
		t.Fatalf("report = %+v", r)
	}
	c := r.Clusters[0]
	if c.Replaced != 10 || len(c.Chain) != 1 || c.Chain[0] != "v1.30.2" {
		t.Errorf("change = %+v, want 5 machines replaced twice (via v1.30.2)", c)
	}
	before := s.names
	s.setFleet(head)
	s.run(400)
	if created := s.names - before; created != c.Replaced {
		t.Errorf("the planner created %d machines; the preview said %d replacements", created, c.Replaced)
	}
}

// A refused version change lists no replacement: the planner touches
// nothing in that cluster.
func TestPreviewRefusedListsNothing(t *testing.T) {
	base := testFleet(testClass("v1.29.4"), testCluster("c1", 1, 2))
	head := testFleet(testClass("v1.31.0"), testCluster("c1", 1, 3))
	r := Preview(base, head, nil, nil)
	if len(r.Clusters) != 1 {
		t.Fatalf("report = %+v", r)
	}
	c := r.Clusters[0]
	if c.Replaced+c.Created+c.Deleted != 0 || len(c.Pools) != 0 || len(c.Machines) != 0 || c.Refused == "" {
		t.Errorf("change = %+v, want refused with nothing replaced, created or deleted", c)
	}
	if r.Totals.Replaced+r.Totals.Created+r.Totals.Deleted != 0 {
		t.Errorf("totals = %+v, want no machine touched", r.Totals)
	}
	var text bytes.Buffer
	if err := RenderText(&text, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "refused: the version change is refused") {
		t.Errorf("text does not say the change is refused:\n%s", text.String())
	}
}

// An OnDelete pool in a version change holds the chain and every later
// wave until someone deletes its machines: the preview says so.
func TestPreviewWarnsOnDeleteHoldsChain(t *testing.T) {
	base := wavesFleet("v1.29.4")
	head := wavesFleet("v1.31.0")
	for _, f := range []*v1alpha1.Fleet{base, head} {
		f.Classes[0].Spec.KubernetesVersions = []string{"v1.30.2"}
		onDelete(clusterOf(f, "canary-a"))
	}
	r := Preview(base, head, nil, nil)
	var canary *ClusterChange
	for i := range r.Clusters {
		if r.Clusters[i].Name == "canary-a" {
			canary = &r.Clusters[i]
		} else if len(r.Clusters[i].Warnings) > 0 {
			t.Errorf("%s warns %q; its pools are RollingUpdate", r.Clusters[i].Name, r.Clusters[i].Warnings)
		}
	}
	if canary == nil || len(canary.Warnings) != 1 {
		t.Fatalf("canary-a = %+v, want one warning", canary)
	}
	w := canary.Warnings[0]
	for _, want := range []string{"pool md is OnDelete", "chained upgrade", "every later wave"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q lacks %q", w, want)
		}
	}
	var md bytes.Buffer
	if err := RenderMarkdown(&md, r, 0); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "**1 warning**:\n\n- `canary-a`: pool md is OnDelete") {
		t.Errorf("markdown does not list the warning at the top:\n%s", md.String())
	}
}

// A cluster that pins its version is named as unchanged by a class
// upgrade, with the pin as the reason and the class's diff; the upgraded
// cluster carries the field diff that moves it.
func TestPreviewNamesPinnedCluster(t *testing.T) {
	pin := func(c *v1alpha1.Cluster) { c.Spec.Topology.Version = "v1.29.4" }
	base := testFleet(testClass("v1.29.4"), testCluster("dev", 1, 1), testCluster("prod", 1, 1, pin), testCluster("other", 1, 1))
	head := testFleet(testClass("v1.30.2"), testCluster("dev", 1, 1), testCluster("prod", 1, 1, pin), testCluster("other", 1, 1))
	r := Preview(base, head, nil, nil)
	if len(r.Clusters) != 2 || r.Clusters[0].Name != "dev" || r.Clusters[1].Name != "other" {
		t.Fatalf("changed clusters = %+v, want dev and other", r.Clusters)
	}
	want := []FieldChange{{Object: "class standard", Path: "spec.version", From: "v1.29.4", To: "v1.30.2"}}
	if diff := cmp.Diff(want, r.Clusters[0].Diff); diff != "" {
		t.Errorf("dev's diff (-want +got):\n%s", diff)
	}
	if r.Unchanged != 1 || len(r.Untouched) != 1 || r.Untouched[0].Name != "prod" ||
		!strings.Contains(r.Untouched[0].Reason, "pins spec.topology.version v1.29.4") {
		t.Fatalf("unchanged = %d, untouched = %+v; want prod named with its pin", r.Unchanged, r.Untouched)
	}
	var text bytes.Buffer
	if err := RenderText(&text, r); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"= prod (unchanged)\n    why: it pins spec.topology.version v1.29.4", "      + class standard: spec.version: v1.30.2"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, text.String())
		}
	}
	var md bytes.Buffer
	if err := RenderMarkdown(&md, r, 0); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"```diff\n- class standard: spec.version: v1.29.4\n+ class standard: spec.version: v1.30.2\n```", "- `prod`: it pins"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("markdown lacks %q:\n%s", s, md.String())
		}
	}
}

// TestPreviewOwnChangeGoesAtOnce: a change in a cluster's own files (its
// pool's size, a template patch of its own) goes at once, in no wave: its
// block and its table row say so, not the wave class changes reach it in
// as if it waited for it.
func TestPreviewOwnChangeGoesAtOnce(t *testing.T) {
	base := wavesFleet("v1.30.2")
	head := wavesFleet("v1.30.2")
	head.Clusters[0].Spec.Topology.Workers.MachineDeployments[0].Replicas = ptr(2) // canary-a
	r := Preview(base, head, nil, nil)
	var text, md bytes.Buffer
	if err := RenderText(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := RenderMarkdown(&md, r, 0); err != nil {
		t.Fatal(err)
	}
	if len(r.Clusters) != 1 {
		t.Fatalf("clusters %+v: want canary-a alone", r.Clusters)
	}
	if !r.Clusters[0].AtOnce {
		t.Errorf("canary-a: %+v, want at once", r.Clusters[0])
	}
	for _, want := range []string{"wave: none, at once: the change is in the cluster's own files, and waves order class changes (which reach it in 1/3 canary)", "At once, in no wave: canary-a."} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, &text)
		}
	}
	if !strings.Contains(md.String(), "| ~ | `canary-a` | standard | v1.30.2 | at once (1/3 canary) |") {
		t.Errorf("markdown's row does not say at once:\n%s", &md)
	}
}

// TestPreviewPausedCanary: a class change whose canary is paused. The
// paused cluster gets no step, so none of its machines counts as
// replaced; it is listed as unchanged, paused, and the footer and a
// warning say that the rollout passes its wave over and which wave the
// change reaches first.
func TestPreviewPausedCanary(t *testing.T) {
	pause := func(f *v1alpha1.Fleet) *v1alpha1.Fleet {
		f.Clusters[0].Spec.Paused = true // canary-a
		return f
	}
	r := Preview(pause(wavesFleet("v1.29.4")), pause(wavesFleet("v1.30.2")), nil, nil)
	text, md := renderTextAndMarkdown(t, r)
	golden(t, "preview/paused-canary", text)
	if r.Totals.Replaced != 8 || r.Totals.Changed != 4 {
		t.Errorf("totals %+v: want the 4 clusters not paused changed, 8 machines replaced", r.Totals)
	}
	for _, c := range r.Clusters {
		if c.Name == "canary-a" {
			t.Errorf("the paused canary-a is listed as changed: %+v", c)
		}
	}
	for _, out := range []string{text, md} {
		for _, want := range []string{
			"every cluster of wave canary is paused (canary-a): the rollout this change starts passes that wave over, as paused clusters take no part, so wave staging is the first it reaches",
			"rolls out wave canary (passed over: canary-a paused), then wave staging (stage-a, stage-b; maxConcurrent 1: 1 cluster at a time)",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("plan lacks %q:\n%s", want, out)
			}
		}
	}
	if !strings.Contains(text, "= canary-a (unchanged)\n    why: it is paused (spec.paused is true in") {
		t.Errorf("text does not list canary-a as paused and unchanged:\n%s", text)
	}
}
