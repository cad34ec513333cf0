package planner

import (
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// TestPreviewClusterNetwork: a new spec.clusterNetwork reaches no machine
// that runs — kubeadm takes it only when a cluster's first control-plane
// machine initialises it — so the planner replaces none, and the preview
// says so, and that it reaches a control plane made again from none; it
// is a change all the same (Reaches), as the daemon's desired state of the
// cluster is not what it was. A cluster with no control plane yet is made
// with it. Before, the preview read "No changes".
func TestPreviewClusterNetwork(t *testing.T) {
	fleet := func(pods string) *v1alpha1.Fleet {
		return testFleet(testClass("v1.30.2"), testCluster("c1", 1, 2, func(c *v1alpha1.Cluster) {
			c.Spec.ClusterNetwork = &v1alpha1.ClusterNetwork{Pods: &v1alpha1.NetworkRanges{CIDRBlocks: []string{pods}}}
		}))
	}
	base, head := fleet("10.244.0.0/16"), fleet("10.245.0.0/16")
	s := newSim(t, base)
	s.quiet = true
	s.run(100)
	r := Preview(base, head, nil, s.observed())
	if len(r.Clusters) != 0 || len(r.Untouched) != 1 || !r.Reaches() {
		t.Fatalf("clusters %+v, untouched %+v, reaches %v: want c1 unchanged with a new network, a change", r.Clusters, r.Untouched, r.Reaches())
	}
	text, md := renderTextAndMarkdown(t, r)
	for _, want := range []string{
		"No machine changes: 1 cluster unchanged, 1 of them getting a new clusterNetwork that no running machine takes.",
		"no machine of it changes and none is replaced: kubeadm takes spec.clusterNetwork only when a cluster's first control-plane machine initialises it (kubeadm init), and c1's control plane is made",
		"New spec.clusterNetwork, which no running machine takes (only a control plane made again from none): c1.",
	} {
		if !strings.Contains(text, want) || !strings.Contains(md, want) {
			t.Errorf("text or Markdown lacks %q:\n%s\n---\n%s", want, text, md)
		}
	}
	from := len(s.applied)
	s.setFleet(head)
	s.run(100)
	checkPreviewIsWhatHappens(t, r, s.applied[from:])

	// No machine of it yet: its first control plane is made with it.
	r = Preview(base, head, nil, []ObservedMachine{})
	if text, _ := renderTextAndMarkdown(t, r); len(r.Clusters) != 1 ||
		!strings.Contains(text, "    network: its first control-plane machine, made from now on, initialises it with the new spec.clusterNetwork (kubeadm init)\n") {
		t.Errorf("want c1 made, with its new network:\n%s", text)
	}
}
