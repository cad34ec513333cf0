package planner

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// The planner's problems point at their field's line and column when the
// caller gives a Locator, as validation errors do; at their document's
// first line without one, or when it cannot tell.
func TestPreviewPlacesProblems(t *testing.T) {
	base := testFleet(testClass("v1.29.4"), testCluster("c1", 1, 1))
	head := testFleet(testClass("v1.29.4"), testCluster("c1", 1, 1), testCluster("c2", 1, 1))
	head.Clusters[0].Spec.Topology.Version = "v1.28.0" // a downgrade: the planner refuses it
	head.Clusters[0].Source.Line = 4
	head.Clusters[1].Spec.Topology.ClassRef.Name = "nope" // no such class
	type asked struct {
		src   v1alpha1.Source
		field string
	}
	var calls []asked
	locate := func(src v1alpha1.Source, field string) (int, int, bool) {
		calls = append(calls, asked{src, field})
		switch {
		case src.Path == "clusters/c1.yaml" && field == "spec.topology.version":
			return 20, 5, true
		case src.Path == "clusters/c2.yaml" && field == "spec.topology.classRef.name":
			return 16, 7, true
		}
		return 0, 0, false
	}
	r := PreviewOf(PreviewInput{Base: base, Head: head, Locate: locate})
	want := []string{
		`clusters/c2.yaml:16:7: spec.topology.classRef.name: no ClusterClass named "nope"; add it under classes/ or name an existing class`,
		"clusters/c1.yaml:20:5: spec.topology.version: cluster c1: cannot downgrade from v1.29.4 to v1.28.0: Kubernetes versions never go down; set the version back to v1.29.4 or later",
	}
	if d := cmp.Diff(want, r.Errors); d != "" {
		t.Errorf("errors (-want +got):\n%s", d)
	}
	if len(calls) != 2 || calls[0].src != head.Clusters[1].Source || calls[1].src != head.Clusters[0].Source {
		t.Errorf("locator asked %+v, want the problems' sources", calls)
	}

	// Without a locator, or one that cannot tell: the document's line.
	for name, loc := range map[string]Locator{
		"none":      nil,
		"not found": func(v1alpha1.Source, string) (int, int, bool) { return 0, 0, false },
	} {
		r := PreviewOf(PreviewInput{Base: base, Head: head, Locate: loc})
		if len(r.Errors) != 2 || !strings.HasPrefix(r.Errors[1], "clusters/c1.yaml:4: spec.topology.version: cluster c1: cannot downgrade") {
			t.Errorf("%s: errors = %q, want the downgrade at the document's line 4", name, r.Errors)
		}
	}
}

func TestProblemError(t *testing.T) {
	p := Problem{Source: v1alpha1.Source{Path: "classes/standard.yaml", Line: 3}, Field: "spec.version", Message: "too new"}
	for _, c := range []struct {
		p    Problem
		want string
	}{
		{p, "classes/standard.yaml:3: spec.version: too new"},
		{p.Place(func(v1alpha1.Source, string) (int, int, bool) { return 9, 3, true }), "classes/standard.yaml:9:3: spec.version: too new"},
		{p.Place(func(v1alpha1.Source, string) (int, int, bool) { return 9, 0, true }), "classes/standard.yaml:9: spec.version: too new"},
		{p.Place(nil), "classes/standard.yaml:3: spec.version: too new"},
		{Problem{Source: v1alpha1.Source{Path: "a.yaml", Line: 1}, Message: "m", Line: 2, Col: 4}, "a.yaml:2:4: m"},
	} {
		if got := c.p.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}
