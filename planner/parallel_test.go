package planner

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// TestParallelExpansionMatchesOneCore: a fleet large enough to expand and
// compare on several goroutines gives the same expansion and preview as on
// one core (and -race sees the goroutines share the fleet safely).
func TestParallelExpansionMatchesOneCore(t *testing.T) {
	fleet := func(version string) *v1alpha1.Fleet {
		class := testClass(version)
		class.Spec.Patches = []v1alpha1.ClassPatch{workerPatch("name", "default",
			v1alpha1.JSONPatch{Op: "add", Path: "/spec/owner", ValueFrom: &v1alpha1.ValueFrom{Variable: "builtin.cluster.name"}})}
		f := testFleet(class)
		for i := range 300 {
			f.Clusters = append(f.Clusters, testCluster(fmt.Sprintf("c%03d", i), 1+2*(i%2), 1+i%5, labels("i", fmt.Sprint(i))))
		}
		return f
	}
	base, head := fleet("v1.31.2"), fleet("v1.32.0")
	run := func(procs int) (*Desired, *PreviewReport) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		d, probs := Expand(head)
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		return d, Preview(base, head, nil, nil)
	}
	d1, p1 := run(1)
	d4, p4 := run(4)
	if d := cmp.Diff(d1.Clusters, d4.Clusters, cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(DesiredCluster{}, Pool{})); d != "" {
		t.Errorf("expansion on 4 cores differs from 1 (-1 +4):\n%s", d)
	}
	if d := cmp.Diff(p1, p4); d != "" {
		t.Errorf("preview on 4 cores differs from 1 (-1 +4):\n%s", d)
	}
	if p4.Totals.Changed != 300 || len(p4.Clusters) != 300 || p4.Clusters[299].Name != "c299" {
		t.Errorf("preview: %d changed, %d listed, want 300 in name order", p4.Totals.Changed, len(p4.Clusters))
	}
	if spec := string(d4.Cluster("c123").Deployments[0].Spec); !strings.Contains(spec, `"owner":"c123"`) {
		t.Errorf("c123's patched worker spec = %s, want owner c123", spec)
	}
}
