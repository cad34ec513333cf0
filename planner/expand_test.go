package planner

import (
	"fmt"
	"github.com/gitfleet/gitfleet/schemas/wire"
	"github.com/google/go-cmp/cmp"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

func TestExpandResolvesTemplate(t *testing.T) {
	class := testClass("v1.30.2")
	class.Spec.Variables = []v1alpha1.ClassVariable{{Name: "size", Default: 8}, {Name: "zone"}}
	class.Spec.Patches = []v1alpha1.ClassPatch{workerPatch("size", "default", fromVar("/spec/resources/cpus", "size"), fromVar("/spec/zone", "zone"))}
	withSize := func(size any) *v1alpha1.Fleet {
		c := testCluster("c1", 3, 2)
		if size != nil {
			c.Spec.Topology.Variables = []v1alpha1.ClusterVariable{{Name: "size", Value: size}}
		}
		return testFleet(class, c)
	}
	d, probs := Expand(withSize(nil))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	c := d.Cluster("c1")
	md := c.Deployments[0]
	if got := string(md.Spec); got != `{"cpus":4,"resources":{"cpus":8}}` {
		t.Errorf("spec with class default = %s", got)
	}
	if c.ControlPlane.Replicas != 3 || md.Replicas != 2 || md.Version != "v1.30.2" {
		t.Errorf("replicas/version = %d/%d/%s", c.ControlPlane.Replicas, md.Replicas, md.Version)
	}
	if md.Strategy != (Strategy{Type: v1alpha1.StrategyRollingUpdate, MaxSurge: 1}) {
		t.Errorf("default strategy = %+v, want Cluster API's maxSurge 1 maxUnavailable 0", md.Strategy)
	}
	if md.Labels[v1alpha1.LabelCluster] != "c1" || md.Labels[v1alpha1.LabelDeployment] != "md" || c.ControlPlane.Labels[v1alpha1.LabelControlPlane] == "" {
		t.Errorf("labels = %v / %v", md.Labels, c.ControlPlane.Labels)
	}
	// The class's template must not be changed by the patch.
	if _, ok := class.Spec.Workers.MachineDeployments[0].Template.Spec["resources"]; ok {
		t.Error("Expand changed the class's template")
	}

	d2, _ := Expand(withSize(16))
	if got := string(d2.Cluster("c1").Deployments[0].Spec); got != `{"cpus":4,"resources":{"cpus":16}}` {
		t.Errorf("spec with cluster value = %s", got)
	}
	if d2.Cluster("c1").Deployments[0].TemplateHash == md.TemplateHash {
		t.Error("template hash did not change with the spec")
	}
	if d2.Cluster("c1").ControlPlane.TemplateHash != c.ControlPlane.TemplateHash {
		t.Error("control-plane hash changed though its template did not")
	}
}

// TestClustersAlikeShareTheirTemplate: a class's clusters are expanded on
// every core, each worker patching a template once for the clusters whose
// patches read the same values (patch.InputKey). Each of 400 clusters of
// one class, with a size of their own or one shared with others, or one
// that a patch cannot read, gets its own template and hash, the problem
// names the cluster it is about, and clusters alike share their spec's
// JSON.
func TestClustersAlikeShareTheirTemplate(t *testing.T) {
	class := testClass("v1.30.2")
	class.Spec.Variables = []v1alpha1.ClassVariable{{Name: "size", Default: map[string]any{"n": 1}}}
	class.Spec.Patches = []v1alpha1.ClassPatch{workerPatch("size", "default", fromVar("/spec/n", "size.n"))}
	f := testFleet(class)
	want := map[string]string{}
	var wantProblems []string
	for i := range 400 {
		c := testCluster(fmt.Sprintf("c%03d", i), 3, 2)
		switch {
		case i%7 == 0: // a number, which has no field n
			c.Spec.Topology.Variables = []v1alpha1.ClusterVariable{{Name: "size", Value: 5}}
			want[c.Metadata.Name] = `{"cpus":4}`
			wantProblems = append(wantProblems, c.Metadata.Name)
		case i%5 == 0: // the class's default
			want[c.Metadata.Name] = `{"cpus":4,"n":1}`
		default:
			c.Spec.Topology.Variables = []v1alpha1.ClusterVariable{{Name: "size", Value: map[string]any{"n": i % 3}}}
			want[c.Metadata.Name] = fmt.Sprintf(`{"cpus":4,"n":%d}`, i%3)
		}
		f.Clusters = append(f.Clusters, c)
	}
	d, probs := Expand(f)
	var named []string
	for _, p := range probs {
		if !strings.Contains(p.Error(), "valueFrom.variable") {
			t.Errorf("unexpected problem: %v", p)
			continue
		}
		name := strings.Fields(p.Error()[strings.Index(p.Error(), "for cluster ")+len("for cluster "):])[0]
		named = append(named, strings.TrimSuffix(name, ":"))
	}
	if d := cmp.Diff(wantProblems, named); d != "" {
		t.Errorf("clusters named by the patch's problems (-want +got):\n%s", d)
	}
	hashes := map[string]string{}
	for _, dc := range d.Clusters {
		md := dc.Deployments[0]
		if got := string(md.Spec); got != want[dc.Name] {
			t.Errorf("%s: spec %s, want %s", dc.Name, got, want[dc.Name])
		}
		if h, ok := hashes[string(md.Spec)]; ok && h != md.TemplateHash {
			t.Errorf("%s: hash %s for a spec hashed %s before", dc.Name, md.TemplateHash, h)
		}
		hashes[string(md.Spec)] = md.TemplateHash
	}
	if len(hashes) != 4 {
		t.Errorf("%d template hashes, want 4 (n absent, 0, 1, 2)", len(hashes))
	}
	// c001 and c004 both set n 1, in the same worker's share.
	a, b := d.Cluster("c001").Deployments[0].Spec, d.Cluster("c004").Deployments[0].Spec
	if &a[0] != &b[0] {
		t.Error("clusters alike do not share their template's JSON")
	}
}

func TestTemplateHashChangesExactlyWhenReplaced(t *testing.T) {
	hash := func(mut func(*v1alpha1.Fleet)) string {
		f := testFleet(testClass("v1.30.2"), testCluster("c1", 3, 2))
		mut(f)
		d, probs := Expand(f)
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		return d.Cluster("c1").Deployments[0].TemplateHash
	}
	base := hash(func(*v1alpha1.Fleet) {})
	md := func(f *v1alpha1.Fleet) *v1alpha1.MachineDeploymentTopology {
		return &f.Clusters[0].Spec.Topology.Workers.MachineDeployments[0]
	}
	same := map[string]func(*v1alpha1.Fleet){
		"replicas": func(f *v1alpha1.Fleet) { md(f).Replicas = ptr(7) },
		"labels":   func(f *v1alpha1.Fleet) { f.Clusters[0].Metadata.Labels["team"] = "a" },
		"strategy": func(f *v1alpha1.Fleet) {
			md(f).Rollout = &v1alpha1.MachineRollout{Strategy: &v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.StrategyOnDelete}}
		},
		"machine metadata": func(f *v1alpha1.Fleet) {
			md(f).Metadata = v1alpha1.MachineMetadata{Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}}
		},
	}
	changed := map[string]func(*v1alpha1.Fleet){
		"version":        func(f *v1alpha1.Fleet) { f.Clusters[0].Spec.Topology.Version = "v1.30.3" },
		"provider":       func(f *v1alpha1.Fleet) { f.Classes[0].Spec.Workers.MachineDeployments[0].Template.Provider = "local" },
		"spec":           func(f *v1alpha1.Fleet) { f.Classes[0].Spec.Workers.MachineDeployments[0].Template.Spec["cpus"] = 5 },
		"failure domain": func(f *v1alpha1.Fleet) { md(f).FailureDomain = "zone-a" },
	}
	for name, mut := range same {
		if hash(mut) != base {
			t.Errorf("changing %s changed the template hash", name)
		}
	}
	for name, mut := range changed {
		if hash(mut) == base {
			t.Errorf("changing %s left the template hash alone", name)
		}
	}
}

// TestMachineMetadata: a pool's machines carry the class's metadata, the
// cluster's over it, and gitfleet's own labels over both.
func TestMachineMetadata(t *testing.T) {
	class := testClass("v1.30.2")
	class.Spec.Workers.MachineDeployments[0].Metadata = v1alpha1.MachineMetadata{
		Labels:      map[string]string{"example.com/tier": "batch", "example.com/owner": "class"},
		Annotations: map[string]string{"example.com/note": "from the class"},
	}
	class.Spec.ControlPlane.Metadata = v1alpha1.MachineMetadata{Labels: map[string]string{"example.com/cp": "yes"}}
	cl := testCluster("c1", 1, 2, func(c *v1alpha1.Cluster) {
		c.Spec.Topology.Workers.MachineDeployments[0].Metadata = v1alpha1.MachineMetadata{
			Labels: map[string]string{"example.com/owner": "cluster", v1alpha1.LabelDeployment: "sneaky"},
		}
	})
	d, probs := Expand(testFleet(class, cl))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	dc := d.Cluster("c1")
	wantMD := map[string]string{"example.com/tier": "batch", "example.com/owner": "cluster",
		v1alpha1.LabelCluster: "c1", v1alpha1.LabelDeployment: "md"}
	if diff := cmp.Diff(wantMD, dc.Deployments[0].Labels); diff != "" {
		t.Errorf("worker labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"example.com/note": "from the class"}, dc.Deployments[0].Annotations); diff != "" {
		t.Errorf("worker annotations (-want +got):\n%s", diff)
	}
	wantCP := map[string]string{"example.com/cp": "yes", v1alpha1.LabelCluster: "c1", v1alpha1.LabelControlPlane: "true"}
	if diff := cmp.Diff(wantCP, dc.ControlPlane.Labels); diff != "" {
		t.Errorf("control-plane labels (-want +got):\n%s", diff)
	}
	res := PlanCluster(ClusterInput{Name: "c1", Desired: dc, Now: simStart, NewName: func(c, p string) string { return c + "-" + p + "-x" }})
	for _, s := range res.Steps {
		if s.Machine.Deployment == "md" && (s.Machine.Labels["example.com/owner"] != "cluster" || s.Machine.Annotations["example.com/note"] != "from the class") {
			t.Errorf("create step carries labels %v, annotations %v", s.Machine.Labels, s.Machine.Annotations)
		}
	}
	if len(res.Steps) == 0 {
		t.Error("no create steps")
	}
}

func TestExpandProblems(t *testing.T) {
	class := testClass("v1.30.2")
	class.Spec.Variables = []v1alpha1.ClassVariable{{Name: "region", Required: true}}
	even := testCluster("even", 2, 1)
	even.Spec.Topology.Variables = []v1alpha1.ClusterVariable{{Name: "region", Value: "eu"}, {Name: "colour", Value: "red"}}
	noVar := testCluster("novar", 1, 1)
	f := testFleet(class, even, noVar)
	f.MachineDeployments = []*v1alpha1.MachineDeployment{{
		Metadata: v1alpha1.ObjectMeta{Name: "extra"}, Source: v1alpha1.Source{Path: "clusters/extra.yaml", Line: 3},
		Spec: v1alpha1.MachineDeploymentSpec{ClusterName: "novar", Version: "v1.31.0", Template: v1alpha1.MachineTemplate{Provider: "inmemory"}},
	}}
	d, probs := Expand(f)
	var got []string
	for _, p := range probs {
		got = append(got, p.Error())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"clusters/even.yaml:1: spec.topology.controlPlane.replicas: 2 control-plane machines cannot keep etcd quorum safely; use an odd number",
		`clusters/even.yaml:1: spec.topology.variables[1].name: class standard declares no variable "colour"`,
		`clusters/novar.yaml:1: spec.topology.variables: class standard requires variable "region"`,
		"clusters/extra.yaml:3: spec.version: v1.31.0 is newer than the cluster's control plane (v1.30.2)",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	// A cluster with problems is kept (its machines are not orphans) and gets no steps.
	res := Plan(Input{Desired: d, Now: simStart, NewName: func(c, p string) string { return c + p }})
	if len(res.Steps) != 0 {
		t.Errorf("steps for broken clusters: %+v", res.Steps)
	}
	if res.Clusters[0].Phase != PhaseBlocked {
		t.Errorf("phase = %s, want %s", res.Clusters[0].Phase, PhaseBlocked)
	}
}

func TestUpgradeChain(t *testing.T) {
	tests := []struct {
		from, to string
		listed   []string
		want     string
		err      string
	}{
		{from: "v1.29.4", to: "v1.29.4"},
		{from: "v1.29.4", to: "v1.30.2", want: "v1.30.2"},
		{from: "v1.29.4", to: "v1.31.0", listed: []string{"v1.30.1", "v1.30.5", "v1.28.0"}, want: "v1.30.5 v1.31.0"},
		{from: "v1.28.0", to: "v1.31.0", listed: []string{"v1.29.0", "v1.30.5"}, want: "v1.29.0 v1.30.5 v1.31.0"},
		{from: "v1.29.4", to: "v1.31.0", err: "no v1.30.x is listed to pass through; add one (e.g. v1.30.0) to the class's spec.kubernetesVersions"},
		{from: "v1.30.2", to: "v1.29.4", err: "cannot downgrade from v1.30.2 to v1.29.4"},
		{from: "v1.30.2", to: "v1.30.1", err: "cannot downgrade"},
		{from: "v1.30.2", to: "1.31", err: `"1.31" is not a version like v1.30.2`},
	}
	for _, tt := range tests {
		chain, err := upgradeChain(tt.from, tt.to, tt.listed)
		if err != nil {
			if tt.err == "" || !strings.Contains(err.message, tt.err) {
				t.Errorf("%s -> %s: error %q, want %q", tt.from, tt.to, err.message, tt.err)
			}
			continue
		}
		if tt.err != "" || strings.Join(chain, " ") != tt.want {
			t.Errorf("%s -> %s = %v, want %q (error %q)", tt.from, tt.to, chain, tt.want, tt.err)
		}
	}
}

func TestPlanRefusesSkippedMinor(t *testing.T) {
	s := newSim(t, testFleet(testClass("v1.29.4"), testCluster("c1", 1, 1)))
	s.quiet = true
	s.run(50)
	s.setFleet(testFleet(testClass("v1.31.0"), testCluster("c1", 1, 1)))
	res := Plan(Input{Desired: s.desired, Observed: s.observed(), Now: s.now, NewName: s.newName})
	if len(res.Steps) != 0 {
		t.Errorf("steps for a refused upgrade: %+v", res.Steps)
	}
	c := res.Clusters[0]
	if c.Phase != PhaseBlocked || !c.Has(CondBlocked) || !strings.Contains(c.Conditions[0].Message, "classes/standard.yaml:1: spec.version: cannot upgrade from v1.29.4 to v1.31.0") {
		t.Errorf("status = %+v", c)
	}
	// With a Locator (the daemon's is the revision's sources.Places) the
	// condition names the field's line and column.
	locate := func(src v1alpha1.Source, field string) (int, int, bool) {
		if src.Path == "classes/standard.yaml" && field == "spec.version" {
			return 6, 3, true
		}
		return 0, 0, false
	}
	res = Plan(Input{Desired: s.desired, Observed: s.observed(), Now: s.now, NewName: s.newName, Locate: locate})
	if c := res.Clusters[0]; !strings.Contains(c.Conditions[0].Message, "classes/standard.yaml:6:3: spec.version: cannot upgrade") {
		t.Errorf("placed status = %+v", c)
	}
}

func TestPausedClusterGetsNoSteps(t *testing.T) {
	paused := func(c *v1alpha1.Cluster) { c.Spec.Paused = true }
	s := newSim(t, testFleet(testClass("v1.29.4"), testCluster("c1", 1, 1)))
	s.quiet = true
	s.run(50)
	s.setFleet(testFleet(testClass("v1.30.2"), testCluster("c1", 1, 3, paused)))
	res := Plan(Input{Desired: s.desired, Observed: s.observed(), Now: s.now, NewName: s.newName})
	if len(res.Steps) != 0 || res.Clusters[0].Phase != PhasePaused {
		t.Errorf("paused cluster: steps %+v phase %s", res.Steps, res.Clusters[0].Phase)
	}
}

// TestMachineNaming: a pool's machineNaming template names its machines,
// with the random part NewName gives.
// namedCluster is cluster c1 with one control-plane machine running and a
// pool of workers named by a template.
func namedCluster(t *testing.T, workers int) (*DesiredCluster, ObservedMachine) {
	t.Helper()
	cl := testCluster("c1", 1, workers, func(c *v1alpha1.Cluster) {
		c.Spec.Topology.Workers.MachineDeployments[0].MachineNaming = &v1alpha1.MachineNaming{
			Template: "{{ .machineDeployment.name }}-of-{{ .cluster.name }}-{{ .random }}"}
	})
	d, probs := Expand(testFleet(testClass("v1.30.2"), cl))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	dc := d.Cluster("c1")
	cp := ObservedMachine{Name: "c1-control-plane-a", Cluster: "c1", Role: wire.RoleControlPlane, Provider: dc.ControlPlane.Provider,
		Version: dc.Version, TemplateHash: dc.ControlPlane.TemplateHash, Phase: wire.PhaseRunning, Created: simStart,
		LastHeartbeat: simStart.Add(time.Second), Healthy: true, Labels: dc.ControlPlane.Labels}
	return dc, cp
}

func TestMachineNaming(t *testing.T) {
	dc, cp := namedCluster(t, 2)
	n := 0
	res := PlanCluster(ClusterInput{Name: "c1", Desired: dc, Machines: []ObservedMachine{cp}, Now: simStart.Add(time.Minute),
		NewName: func(c, p string) string { n++; return fmt.Sprintf("%s-%s-r%d", c, p, n) }})
	var got []string
	for _, s := range res.Steps {
		got = append(got, s.Machine.Name)
	}
	want := []string{"md-of-c1-r1", "md-of-c1-r2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("machine names (-want +got):\n%s", diff)
	}
}

// A name drawn for a new machine that a machine of the cluster has, or a
// create of the same plan, is drawn again; when every draw is taken (a
// naming template that keeps too little of the random part), no machine
// is created, the status says why and the cluster is planned again later.
func TestTakenNamesAreDrawnAgain(t *testing.T) {
	dc, cp := namedCluster(t, 3)
	md := dc.Deployments[0]
	worker := ObservedMachine{Name: "md-of-c1-r1", Cluster: "c1", Role: wire.RoleWorker, Deployment: md.Name, Provider: md.Provider,
		Version: dc.Version, TemplateHash: md.TemplateHash, Phase: wire.PhaseRunning, Created: simStart,
		LastHeartbeat: simStart.Add(time.Second), Healthy: true, Labels: md.Labels}
	now := simStart.Add(time.Minute)
	draws := []string{"r1", "r2", "r1", "r2", "r3"} // r1: the worker's; r2: this plan's first create
	res := PlanCluster(ClusterInput{Name: "c1", Desired: dc, Machines: []ObservedMachine{cp, worker}, Now: now,
		NewName: func(c, p string) string { r := draws[0]; draws = draws[1:]; return c + "-" + p + "-" + r }})
	var got []string
	for _, s := range res.Steps {
		got = append(got, s.Machine.Name)
	}
	if diff := cmp.Diff([]string{"md-of-c1-r2", "md-of-c1-r3"}, got); diff != "" {
		t.Errorf("machine names (-want +got):\n%s", diff)
	}

	res = PlanCluster(ClusterInput{Name: "c1", Desired: dc, Machines: []ObservedMachine{cp, worker}, Now: now,
		NewName: func(c, p string) string { return c + "-" + p + "-r1" }})
	if len(res.Steps) != 0 {
		t.Errorf("steps %v; want none when every name drawn is taken", res.Steps)
	}
	if !res.Status.Has(CondBackingOff) || !strings.Contains(fmt.Sprint(res.Status.Conditions), "16 names drawn for a new machine are all taken") {
		t.Errorf("conditions %v; want BackingOff saying the names drawn are taken", res.Status.Conditions)
	}
	if want := now.Add(nameRetry); !res.Wake.Equal(want) {
		t.Errorf("wake %v; want %v", res.Wake, want)
	}
}

// A template that would make tasks larger than the task stream takes —
// written so, or grown by a patch — is a problem at the cluster's pool,
// and the cluster gets no steps (its tasks would be refused forever).
func TestExpandRefusesTemplatesLargerThanATask(t *testing.T) {
	class := testClass("v1.30.2")
	big := strings.Repeat("x", wire.MaxMachineBytes)
	class.Spec.Variables = []v1alpha1.ClassVariable{{Name: "blob", Default: ""}}
	class.Spec.Patches = []v1alpha1.ClassPatch{workerPatch("blob", "default", fromVar("/spec/blob", "blob"))}
	grown := testCluster("grown", 3, 1)
	grown.Spec.Topology.Variables = []v1alpha1.ClusterVariable{{Name: "blob", Value: big}}
	small := testCluster("small", 3, 1)
	small.Spec.Topology.Variables = []v1alpha1.ClusterVariable{{Name: "blob", Value: strings.Repeat("x", 1000)}}
	noted := testCluster("noted", 3, 1)
	noted.Spec.Topology.ControlPlane.Metadata.Annotations = map[string]string{"note": big}
	d, probs := Expand(testFleet(class, grown, small, noted))
	var got []string
	for _, p := range probs {
		got = append(got, p.Error())
	}
	want := []string{
		"clusters/grown.yaml:1: spec.topology.workers.machineDeployments[0]: the machines of pool md would carry 129 KiB of spec, labels and annotations (after the class's patches); at most 128 KiB fit in a task: keep large data out of machine templates",
		"clusters/noted.yaml:1: spec.topology.controlPlane: the machines of the control plane would carry 129 KiB of spec, labels and annotations (after the class's patches); at most 128 KiB fit in a task: keep large data out of machine templates",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	res := Plan(Input{Desired: d, Now: simStart, NewName: func(c, p string) string { return c + p }})
	for _, s := range res.Steps {
		if s.Machine.Cluster != "small" {
			t.Errorf("a step for %s, whose tasks would be too large", s.Machine.Cluster)
		}
	}
	if len(res.Steps) == 0 {
		t.Error("no step for the cluster whose template fits")
	}
}
