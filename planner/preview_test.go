package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

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
	if r.Totals != (PreviewTotals{Added: 1, Removed: 1, Changed: 5, Replaced: 10, Created: 2 + 5, Deleted: 3}) {
		t.Errorf("totals = %+v", r.Totals)
	}
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
