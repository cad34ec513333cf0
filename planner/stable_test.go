package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// TestTemplateHashIsStable pins the template hashes and spec bytes of a
// few pools: a gitfleet that hashed the same templates differently would
// replace every machine of every fleet when it is upgraded. A change here
// must be deliberate, and say so in the CHANGELOG.
func TestTemplateHashIsStable(t *testing.T) {
	class := testClass("v1.30.2")
	class.Spec.Variables = []v1alpha1.ClassVariable{{Name: "size", Default: int64(8)}, {Name: "note", Default: "<a & b> \u2028 ü"},
		{Name: "ratio", Default: 0.25}}
	class.Spec.Patches = []v1alpha1.ClassPatch{workerPatch("size", "default", fromVar("/spec/resources/cpus", "size"),
		fromVar("/spec/note", "note"), fromVar("/spec/ratio", "ratio"))}
	c := testCluster("c1", 3, 2)
	c.Spec.Topology.Workers.MachineDeployments[0].FailureDomain = "zone-b"
	d, probs := Expand(testFleet(class, c))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	dc := d.Cluster("c1")
	got := map[string]string{
		"control-plane spec": string(dc.ControlPlane.Spec), "control-plane hash": dc.ControlPlane.TemplateHash,
		"worker spec": string(dc.Deployments[0].Spec), "worker hash": dc.Deployments[0].TemplateHash,
	}
	want := map[string]string{
		"control-plane spec": `{"cpus":2}`, "control-plane hash": "d14aac3337",
		"worker spec": `{"cpus":4,"note":"\u003ca \u0026 b\u003e \u2028 ü","ratio":0.25,"resources":{"cpus":8}}`,
		"worker hash": "f8281a1c95",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("template hashes or spec bytes changed (-pinned +now):\n%s", d)
	}
}
