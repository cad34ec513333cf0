package planner

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// contentKeys keys each object of f by its JSON and its source, as the
// sources package keys them by blob hash and line.
func contentKeys(f *v1alpha1.Fleet) func(kind, name string) string {
	keys := map[string]string{}
	add := func(kind, name string, v any, src v1alpha1.Source) {
		b, _ := json.Marshal(v)
		keys[kind+"/"+name] = fmt.Sprintf("%s %s", b, src)
	}
	for _, c := range f.Classes {
		add(v1alpha1.KindClusterClass, c.Metadata.Name, c, c.Source)
	}
	for _, c := range f.Clusters {
		add(v1alpha1.KindCluster, c.Metadata.Name, c, c.Source)
	}
	for _, md := range f.MachineDeployments {
		add(v1alpha1.KindMachineDeployment, md.Metadata.Name, md, md.Source)
	}
	for _, hc := range f.HealthChecks {
		add(v1alpha1.KindMachineHealthCheck, hc.Metadata.Name, hc, hc.Source)
	}
	return func(kind, name string) string { return keys[kind+"/"+name] }
}

// changedRefs are the objects whose content keys differ between a and b,
// those in one of them only included, as the source names them.
func changedRefs(a, b *v1alpha1.Fleet) []ObjectRef {
	ka, kb := contentKeys(a), contentKeys(b)
	var out []ObjectRef
	seen := map[ObjectRef]bool{}
	for _, f := range []*v1alpha1.Fleet{a, b} {
		refs := []ObjectRef{}
		for _, c := range f.Classes {
			refs = append(refs, ObjectRef{v1alpha1.KindClusterClass, c.Metadata.Name})
		}
		for _, c := range f.Clusters {
			refs = append(refs, ObjectRef{v1alpha1.KindCluster, c.Metadata.Name})
		}
		for _, md := range f.MachineDeployments {
			refs = append(refs, ObjectRef{v1alpha1.KindMachineDeployment, md.Metadata.Name})
		}
		for _, hc := range f.HealthChecks {
			refs = append(refs, ObjectRef{v1alpha1.KindMachineHealthCheck, hc.Metadata.Name})
		}
		for _, r := range refs {
			if !seen[r] && ka(r.Kind, r.Name) != kb(r.Kind, r.Name) {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	return out
}

func reuseFleet(classVersion string) *v1alpha1.Fleet {
	f := testFleet(testClass(classVersion, "v1.29.4", "v1.30.2"))
	for i := range 6 {
		f.Clusters = append(f.Clusters, testCluster(fmt.Sprintf("c%d", i), 3, 2))
	}
	f.MachineDeployments = []*v1alpha1.MachineDeployment{{
		Metadata: v1alpha1.ObjectMeta{Name: "extra"}, Source: v1alpha1.Source{Path: "mds/extra.yaml", Line: 1},
		Spec: v1alpha1.MachineDeploymentSpec{ClusterName: "c1", Replicas: ptr(2), Template: v1alpha1.MachineTemplate{Provider: "inmemory"}},
	}}
	f.HealthChecks = []*v1alpha1.MachineHealthCheck{{
		Metadata: v1alpha1.ObjectMeta{Name: "hc"}, Source: v1alpha1.Source{Path: "hc.yaml", Line: 1},
		Spec: v1alpha1.MachineHealthCheckSpec{ClusterName: "c2"},
	}}
	return f
}

// TestExpandReusingIsExpand: after each kind of change, ExpandReusing gives
// what Expand gives, keeps the very expansion of every cluster none of
// whose inputs changed, and expands again every cluster one of whose
// inputs did: its own file, an added, changed or removed MachineDeployment
// or health check naming it, its class.
func TestExpandReusingIsExpand(t *testing.T) {
	base := reuseFleet("v1.29.4")
	prev, _ := ExpandReusing(nil, base, contentKeys(base))
	for _, tc := range []struct {
		name    string
		change  func(f *v1alpha1.Fleet)
		touched []string
	}{
		{"nothing", func(f *v1alpha1.Fleet) {}, nil},
		{"one cluster scaled", func(f *v1alpha1.Fleet) { f.Clusters[0] = testCluster("c0", 3, 5) }, []string{"c0"}},
		{"a cluster's file moved", func(f *v1alpha1.Fleet) { f.Clusters[3].Source.Line = 7 }, []string{"c3"}},
		{"standalone deployment scaled", func(f *v1alpha1.Fleet) { f.MachineDeployments[0].Spec.Replicas = ptr(4) }, []string{"c1"}},
		{"standalone deployment moved to c4", func(f *v1alpha1.Fleet) { f.MachineDeployments[0].Spec.ClusterName = "c4" }, []string{"c1", "c4"}},
		{"health check removed", func(f *v1alpha1.Fleet) { f.HealthChecks = nil }, []string{"c2"}},
		{"class bumped", func(f *v1alpha1.Fleet) { f.Classes[0] = testClass("v1.30.2", "v1.29.4", "v1.30.2") }, []string{"c0", "c1", "c2", "c3", "c4", "c5"}},
		{"cluster added", func(f *v1alpha1.Fleet) { f.Clusters = append(f.Clusters, testCluster("c6", 1, 1)) }, []string{"c6"}},
		{"cluster removed", func(f *v1alpha1.Fleet) { f.Clusters = f.Clusters[:5] }, nil},
		{"cluster renamed", func(f *v1alpha1.Fleet) { f.Clusters[5] = testCluster("c9", 1, 1) }, []string{"c9"}},
		{"two clusters scaled", func(f *v1alpha1.Fleet) {
			f.Clusters[4], f.Clusters[0] = testCluster("c4", 1, 3), testCluster("c0", 5, 2)
		}, []string{"c0", "c4"}},
		{"a cluster with a standalone deployment scaled", func(f *v1alpha1.Fleet) { f.Clusters[1] = testCluster("c1", 3, 4) }, []string{"c1"}},
		{"a cluster with a health check scaled", func(f *v1alpha1.Fleet) { f.Clusters[2] = testCluster("c2", 1, 2) }, []string{"c2"}},
		{"a cluster's class made unknown", func(f *v1alpha1.Fleet) { f.Clusters[3].Spec.Topology.ClassRef.Name = "gone" }, []string{"c3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := reuseFleet("v1.29.4")
			tc.change(next)
			// ExpandChanged, told which objects changed, gives what
			// ExpandReusing gives (checked below), the same pointers kept;
			// it takes its own way when only clusters kept under their
			// names changed.
			changed := changedRefs(base, next)
			fast := !slices.ContainsFunc(changed, func(r ObjectRef) bool {
				return r.Kind != v1alpha1.KindCluster || prev.Cluster(r.Name) == nil || next.Cluster(r.Name) == nil
			})
			fast = fast && !slices.ContainsFunc(changed, func(r ObjectRef) bool { return next.Cluster(r.Name).Spec.Topology.ClassRef.Name != "standard" })
			if _, _, ok := expandChanged(prev, next, contentKeys(next), changed); ok != fast {
				t.Errorf("ExpandChanged of %v took its own way: %v, want %v", changed, ok, fast)
			}
			got, gotProblems := ExpandChanged(prev, next, contentKeys(next), changed)
			reusing, reusingProblems := ExpandReusing(prev, next, contentKeys(next))
			for i, c := range reusing.Clusters {
				if same := got.Clusters[i] == prev.Cluster(c.Name); same != (c == prev.Cluster(c.Name)) {
					t.Errorf("%s: ExpandChanged kept it %v, ExpandReusing %v", c.Name, same, !same)
				}
				if got.Cluster(c.Name) != got.Clusters[i] {
					t.Errorf("%s: found by name is not the one in the list", c.Name)
				}
			}
			if !reflect.DeepEqual(gotProblems, reusingProblems) {
				t.Errorf("ExpandChanged's problems %v, ExpandReusing's %v", gotProblems, reusingProblems)
			}
			want, wantProblems := Expand(next)
			if len(got.Clusters) != len(want.Clusters) {
				t.Fatalf("%d clusters, want %d", len(got.Clusters), len(want.Clusters))
			}
			for i := range want.Clusters {
				// What the expansion was made from is not part of it.
				g := *got.Clusters[i]
				g.inputs = inputKeys{}
				if !reflect.DeepEqual(&g, want.Clusters[i]) {
					t.Errorf("%s differs from a full expansion:\n%+v\nwant\n%+v", want.Clusters[i].Name, got.Clusters[i], want.Clusters[i])
				}
			}
			if !reflect.DeepEqual(gotProblems, wantProblems) {
				t.Errorf("problems %v, want %v", gotProblems, wantProblems)
			}
			touched := map[string]bool{}
			for _, n := range tc.touched {
				touched[n] = true
			}
			var wantRemoved []string
			for _, c := range prev.Clusters {
				if got.Cluster(c.Name) == nil {
					wantRemoved = append(wantRemoved, c.Name)
				}
			}
			for _, c := range got.Clusters {
				if same := prev.Cluster(c.Name) == c; same == touched[c.Name] {
					t.Errorf("%s: reused %v, want %v", c.Name, same, !touched[c.Name])
				}
			}
			// Changes names exactly the clusters not reused, and those gone.
			expanded, removed, ok := got.Changes()
			if !ok || !slices.Equal(expanded, tc.touched) || !slices.Equal(removed, wantRemoved) {
				t.Errorf("Changes() = %v, %v, %v; want %v, %v, true", expanded, removed, ok, tc.touched, wantRemoved)
			}
		})
	}
}

// TestFieldDiffSkipsAlikeObjects: objects written alike in another place
// report no change; a changed field does; an empty and a missing label
// map, alike as JSON, report none either.
func TestFieldDiffSkipsAlikeObjects(t *testing.T) {
	a := testCluster("c", 3, 2)
	moved := testCluster("c", 3, 2)
	moved.Source.Path = "elsewhere/c.yaml"
	scaled := testCluster("c", 3, 4)
	nolabels := testCluster("c", 3, 2)
	nolabels.Metadata.Labels = nil
	if !sameObject(a, moved) || sameObject(a, scaled) {
		t.Errorf("sameObject: moved %v (want true), scaled %v (want false)", sameObject(a, moved), sameObject(a, scaled))
	}
	class := testClass("v1.29.4")
	for _, tc := range []struct {
		name string
		b    *v1alpha1.Cluster
		want int
	}{{"moved", moved, 0}, {"scaled", scaled, 1}, {"labels nil", nolabels, 0}} {
		d := newFleetDiff(testFleet(class, a), testFleet(class, tc.b))
		if got := len(d.of("c")); got != tc.want {
			t.Errorf("%s: %d changes %v, want %d", tc.name, got, d.of("c"), tc.want)
		}
	}
}
