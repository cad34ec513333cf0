package sources_test

import (
	"context"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/sources"
)

// A revision says where its objects' fields are written, for errors found
// after validation (the planner's): the field's line and column in the
// right document of a file, its nearest written parent's when it is not
// written, and for a file kustomize renders, the line in its source file.
func TestRevisionPlacesFields(t *testing.T) {
	ctx := context.Background()
	work := gittest.NewRepo(t)
	work.Commit("two clusters in a file, one rendered", map[string]string{
		"classes/standard.yaml":   classYAML,
		"clusters/ab.yaml":        "# two clusters\n" + cluster("a") + "---\n" + cluster("b"),
		"edge/kustomization.yaml": "resources: [cluster.yaml]\nnamePrefix: prod-\n",
		"edge/cluster.yaml":       "# the edge cluster\n\n" + cluster("edge") + "---\n" + cluster("edge2"),
	})
	rev, err := open(t, work.Dir).Revision(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if rev.Rejected() || rev.Places == nil {
		t.Fatalf("revision: err %v, places %v", rev.Err, rev.Places)
	}
	for _, c := range []struct {
		cluster, field string
		line, col      int
		ok             bool
	}{
		{"a", "spec.topology.version", 9, 5, true},
		{"b", "spec.topology.version", 18, 5, true},
		{"b", "metadata.name", 14, 3, true},
		// Not written: its nearest written parent.
		{"b", "spec.topology.controlPlane.replicas", 16, 3, true},
		// Rendered by kustomize: the source file's line (kustomize's
		// output has it on line 9), at the value, as validation errors
		// in rendered files are.
		{"prod-edge", "spec.topology.version", 10, 14, true},
		{"prod-edge", "spec.topology.workers", 9, 5, true},
		// The file's second document, though the first has the field too.
		{"prod-edge2", "spec.topology.version", 19, 14, true},
		{"prod-edge2", "metadata.name", 15, 9, true},
	} {
		src := rev.Fleet.Cluster(c.cluster).Source
		line, col, ok := rev.Places.At(src, c.field)
		if line != c.line || col != c.col || ok != c.ok {
			t.Errorf("At(%v, %s) = %d, %d, %v; want %d, %d, %v", src, c.field, line, col, ok, c.line, c.col, c.ok)
		}
	}
	if _, _, ok := rev.Places.At(v1alpha1.Source{Path: "clusters/ab.yaml", Line: 5}, "spec"); ok {
		t.Error("At a line where no document starts: ok")
	}
	if _, _, ok := (*sources.Places)(nil).At(v1alpha1.Source{Path: "clusters/ab.yaml", Line: 2}, "spec"); ok {
		t.Error("nil Places: ok")
	}

	var places *sources.Places
	if _, errs, err := sources.ValidateRev(ctx, work.Dir, "main", sources.ValidateOptions{Places: func(p *sources.Places) { places = p }}); err != nil || len(errs) > 0 {
		t.Fatalf("ValidateRev: %v %v", errs, err)
	}
	if line, col, ok := places.At(v1alpha1.Source{Path: "clusters/ab.yaml", Line: 11}, "spec.topology.version"); line != 18 || col != 5 || !ok {
		t.Errorf("ValidateRev's Places: %d, %d, %v; want 18, 5", line, col, ok)
	}
}
