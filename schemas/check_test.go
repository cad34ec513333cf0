package schemas

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckSortsAndKeepsSources(t *testing.T) {
	files := generatedFleet(t, 5)
	// Reverse the file order: Check's lists are sorted by name regardless.
	for i, j := 0, len(files)-1; i < j; i, j = i+1, j-1 {
		files[i], files[j] = files[j], files[i]
	}
	f, errs := Load(files)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var got []string
	for _, c := range f.Clusters {
		got = append(got, c.Metadata.Name+" "+c.Source.String())
	}
	want := []string{
		"c-00000 clusters/gen/c-00000.yaml:2", "c-00001 clusters/gen/c-00001.yaml:2", "c-00002 clusters/gen/c-00002.yaml:2",
		"c-00003 clusters/gen/c-00003.yaml:2", "c-00004 clusters/gen/c-00004.yaml:2",
		"dev-1 clusters/dev-1.yaml:1", "prod-1 clusters/prod-1.yaml:1",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("clusters (-want +got):\n%s", d)
	}
}

// TestCheckWithPolicies: Check applies the policy files to objects that
// kept their raw value (ParseFile), as a caller that did not apply them
// while parsing needs.
func TestCheckWithPolicies(t *testing.T) {
	class := inmemoryClassC(t)
	clusters, errs := ParseFile(File{Path: "clusters/a.yaml", Data: []byte(header + `kind: Cluster
metadata: {name: a, labels: {env: prod, team: x}}
spec:
  topology:
    classRef: {name: c}
    controlPlane: {replicas: 1}
`)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	policies := []File{
		{Path: "policies/prod.cue", Data: []byte(`Cluster: {
	metadata: labels?: env?: string
	if metadata.labels.env != _|_ if metadata.labels.env == "prod" {
		spec: topology: controlPlane: replicas: 3 | 5
	}
}
`)},
		{Path: "policies/teams.cue", Data: []byte(`#Teams: "payments" | "search"
Cluster: metadata: labels: team: #Teams @help("is not a team of this fleet: use payments or search")
Clustr: {}
`)},
	}
	_, errs = Check(append(class, clusters...), policies)
	want := []string{
		`clusters/a.yaml:3:41: metadata.labels.team: violates policy policies/teams.cue:2: "x" is not a team of this fleet: use payments or search`,
		`clusters/a.yaml:7:20: spec.topology.controlPlane.replicas: violates policy policies/prod.cue:4: 1 does not satisfy 3 | 5`,
		`policies/teams.cue:3:1: "Clustr" is not a kind; did you mean "Cluster"?`,
	}
	if d := cmp.Diff(want, errLines(errs)); d != "" {
		t.Errorf("errors (-want +got):\n%s", d)
	}
}

// inmemoryClassC is a ClusterClass c of inmemory machines with one worker
// class w, for tests of clusters against policies.
func inmemoryClassC(t *testing.T) []Object {
	t.Helper()
	class, errs := ParseFile(File{Path: "classes/c.yaml", Data: []byte(header + `kind: ClusterClass
metadata: {name: c}
spec:
  controlPlane: {machineTemplate: {provider: inmemory}}
  workers: {machineDeployments: [{class: w, template: {provider: inmemory}}]}
`)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return class
}

// TestPolicyNamesTheConstraintBroken: with two constraints on one field in
// one policy file, a violation names the line and help of the one the
// value breaks, not the first one found (which the value may meet).
func TestPolicyNamesTheConstraintBroken(t *testing.T) {
	class := inmemoryClassC(t)
	clusters, _ := ParseFile(File{Path: "clusters/a.yaml", Data: []byte(header + `kind: Cluster
metadata: {name: a, labels: {env: prod}}
spec:
  topology:
    classRef: {name: c}
    controlPlane: {replicas: 3}
    version: v1.31.2
`)})
	for _, c := range []struct{ policy, want string }{
		{`Cluster: {
	metadata: labels?: env?: string
	if metadata.labels.env != _|_ if metadata.labels.env == "prod" {
		spec: topology: controlPlane: replicas: 3 | 5 @help("must be 3 or 5")
	}
}
Cluster: spec: topology: controlPlane: replicas: <= 2 @help("at most 2 in this lab")
`, `clusters/a.yaml:7:20: spec.topology.controlPlane.replicas: violates policy policies/p.cue:7: 3 at most 2 in this lab`},
		{`Cluster: {
	metadata: labels?: env?: string
	if metadata.labels.env != _|_ if metadata.labels.env == "prod" {
		spec: topology: controlPlane: replicas: 3 | 5 @help("must be 3 or 5")
	}
}
Cluster: spec: topology: controlPlane: replicas: <= 2
`, `clusters/a.yaml:7:20: spec.topology.controlPlane.replicas: violates policy policies/p.cue:7: 3 does not satisfy <=2`},
		{`Cluster: spec: topology: version: =~"^v1[.]30[.]" @help("runs 1.30 only")
Cluster: spec: topology: version: string
`, `clusters/a.yaml:8:5: spec.topology.version: violates policy policies/p.cue:1: "v1.31.2" runs 1.30 only`},
	} {
		_, errs := Check(append(class, clusters...), []File{{Path: "policies/p.cue", Data: []byte(c.policy)}})
		if d := cmp.Diff([]string{c.want}, errLines(errs)); d != "" {
			t.Errorf("policy\n%s\nerrors (-want +got):\n%s", c.policy, d)
		}
	}
}

// TestPolicyReadingAnUnsetField: a policy whose condition reads a field an
// object leaves out cannot be decided for it; the error names the
// reference and how to guard it (it said only "undefined field: version").
func TestPolicyReadingAnUnsetField(t *testing.T) {
	objs, _ := ParseFile(File{Path: "clusters/a.yaml", Data: []byte(header + `kind: Cluster
metadata: {name: a}
spec:
  topology:
    classRef: {name: c}
`)})
	class := inmemoryClassC(t)
	policy := File{Path: "policies/old.cue", Data: []byte(`Cluster: {
	spec: topology: classRef: name: string
	if spec.topology.version == "v1.30.6" {
		metadata: labels: env: "old"
	}
}
`)}
	_, errs := Check(append(class, objs...), []File{policy})
	want := []string{`clusters/a.yaml:1:1: violates policy policies/old.cue:3: it reads spec.topology.version, which this Cluster does not set: guard the reference, as in if spec.topology.version != _|_ if spec.topology.version == …`}
	if d := cmp.Diff(want, errLines(errs)); d != "" {
		t.Errorf("errors (-want +got):\n%s", d)
	}
}

// TestPolicyCycleIsPlaced: CUE reports a structural cycle with the field
// but no position; the error is placed at the field, which it names (it
// said only "policies/p.cue: not a valid policy: structural cycle"), also
// for a hidden field of a file with a package clause.
func TestPolicyCycleIsPlaced(t *testing.T) {
	const fix = ": not a valid policy: structural cycle: the value refers back to a field that holds it, so it would contain itself without end; refer to a field outside it, or remove the reference"
	for policy, want := range map[string]string{
		"Cluster: spec: a: b: Cluster.spec.a\n":                           "policies/p.cue:1:19: Cluster.spec.a.b" + fix,
		"#Net: {\n\tpods: #Net\n}\nCluster: spec: clusterNetwork: #Net\n": "policies/p.cue:2:2: #Net.pods" + fix,
		"Cluster: metadata: l: [1, l]\n":                                  "policies/p.cue:1:27: Cluster.metadata.l[1]" + fix,
		"package policies\n\n_#A: {a: _#A}\nCluster: spec: x: _#A\n":      "policies/p.cue:3:7: _#A.a" + fix,
	} {
		_, errs := CompilePolicies([]File{{Path: "policies/p.cue", Data: []byte(policy)}})
		if d := cmp.Diff([]string{want}, errLines(errs)); d != "" {
			t.Errorf("policy\n%s\nerrors (-want +got):\n%s", policy, d)
		}
	}
}

// TestPatchedTemplatesAreChecked: a patch writing a field the provider's
// spec lacks, or a variable value the spec refuses, is caught before any
// machine is made, at the set entry's line, naming the patch, the clusters,
// the field and what the provider allows. Clusters whose values are fine
// are not named.
func TestPatchedTemplatesAreChecked(t *testing.T) {
	class, errs := ParseFile(File{Path: "classes/c.yaml", Data: []byte(header + `kind: ClusterClass
metadata: {name: c}
spec:
  controlPlane: {machineTemplate: {provider: inmemory}}
  workers: {machineDeployments: [{class: w, template: {provider: inmemory}}]}
  variables:
    - {name: delay, default: 1s}
    - {name: failures}
  patches:
    - name: slow
      definitions:
        - selector: {matchResources: {machineDeploymentClass: {names: [w]}}}
          jsonPatches:
            - {op: add, path: /spec/provisioningDelai, valueFrom: {variable: delay}}
    - name: flaky
      definitions:
        - selector: {matchResources: {controlPlane: true, machineDeploymentClass: {names: [w]}}}
          jsonPatches:
            - {op: add, path: /spec/failureRate, valueFrom: {variable: failures}}
`)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	objs := class
	objs = append(objs, clustersOfC(t, "failures", map[string]string{"a": "0.5", "b": "2", "c": "3", "d": "0"}, "    workers: {machineDeployments: [{class: w, name: md}]}\n")...)
	_, errs = Check(objs, nil)
	want := []string{
		`classes/c.yaml:15:25: spec.patches[0].definitions[0].jsonPatches[0].path: patch "slow" sets spec.provisioningDelai for clusters a, b, c and 1 more, but provider inmemory's spec has no field "provisioningDelai" (did you mean "provisioningDelay"?); it allows: failureRate, provisioningDelay, provisioningDelayMax`,
		`classes/c.yaml:20:15: spec.patches[1].definitions[0].jsonPatches[0]: patch "flaky" sets spec.failureRate to 2 (variable failures) for cluster b, which provider inmemory's spec refuses: is not a failure rate between 0 and 1`,
		`classes/c.yaml:20:15: spec.patches[1].definitions[0].jsonPatches[0]: patch "flaky" sets spec.failureRate to 3 (variable failures) for cluster c, which provider inmemory's spec refuses: is not a failure rate between 0 and 1`,
	}
	if d := cmp.Diff(want, errLines(errs)); d != "" {
		t.Errorf("errors (-want +got):\n%s", d)
	}
}

// TestPatchedTemplatesOfClustersAlike: a checker patches and checks a
// template once for the clusters whose patches read the same values
// (patch.InputKey) and names each of them: 600 clusters over three
// checkers, four values of which two are refused.
func TestPatchedTemplatesOfClustersAlike(t *testing.T) {
	class, errs := ParseFile(File{Path: "classes/c.yaml", Data: []byte(header + `kind: ClusterClass
metadata: {name: c}
spec:
  controlPlane: {machineTemplate: {provider: inmemory}}
  workers: {machineDeployments: [{class: w, template: {provider: inmemory}}]}
  variables:
    - {name: failures}
  patches:
    - name: flaky
      definitions:
        - selector: {matchResources: {machineDeploymentClass: {names: [w]}}}
          jsonPatches:
            - {op: add, path: /spec/failureRate, valueFrom: {variable: failures}}
            - {op: add, path: /spec/provisioningDelai, value: 1s}
`)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	values := map[string]string{}
	for i := range 600 {
		values[fmt.Sprintf("c%03d", i)] = []string{"0.5", "2", "3", "0"}[i%4]
	}
	_, errs = Check(append(class, clustersOfC(t, "failures", values, "    workers: {machineDeployments: [{class: w, name: md}]}\n")...), nil)
	want := []string{
		`classes/c.yaml:14:15: spec.patches[0].definitions[0].jsonPatches[0]: patch "flaky" sets spec.failureRate to 2 (variable failures) for clusters c001, c005, c009 and 147 more, which provider inmemory's spec refuses: is not a failure rate between 0 and 1`,
		`classes/c.yaml:14:15: spec.patches[0].definitions[0].jsonPatches[0]: patch "flaky" sets spec.failureRate to 3 (variable failures) for clusters c002, c006, c010 and 147 more, which provider inmemory's spec refuses: is not a failure rate between 0 and 1`,
		`classes/c.yaml:15:25: spec.patches[0].definitions[0].jsonPatches[1].path: patch "flaky" sets spec.provisioningDelai for clusters c000, c001, c002 and 597 more, but provider inmemory's spec has no field "provisioningDelai" (did you mean "provisioningDelay"?); it allows: failureRate, provisioningDelay, provisioningDelayMax`,
	}
	if d := cmp.Diff(want, errLines(errs)); d != "" {
		t.Errorf("errors (-want +got):\n%s", d)
	}
}

// TestPatchedHeartbeatIsBounded: a heartbeat interval under
// wire.MinHeartbeatInterval written by a patch is refused like one written
// in the class, naming the cluster whose variable asks for it.
func TestPatchedHeartbeatIsBounded(t *testing.T) {
	objs, errs := ParseFile(File{Path: "classes/c.yaml", Data: []byte(header + `kind: ClusterClass
metadata: {name: c}
spec:
  controlPlane: {machineTemplate: {provider: local}}
  variables:
    - {name: beat, default: 2s}
  patches:
    - name: beat
      definitions:
        - selector: {matchResources: {controlPlane: true}}
          jsonPatches:
            - {op: add, path: /spec/heartbeatInterval, valueFrom: {variable: beat}}
`)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	objs = append(objs, clustersOfC(t, "beat", map[string]string{"a": "10ms", "b": "100ms", "c": "1s"}, "")...)
	_, errs = Check(objs, nil)
	want := []string{
		`classes/c.yaml:13:15: spec.patches[0].definitions[0].jsonPatches[0]: patch "beat" sets spec.heartbeatInterval to "10ms" (variable beat) for cluster a, which provider local's spec refuses: is shorter than 100ms: every machine sends the leader a heartbeat each interval; use 100ms or more (2s when unset)`,
	}
	if d := cmp.Diff(want, errLines(errs)); d != "" {
		t.Errorf("errors (-want +got):\n%s", d)
	}
}

// clustersOfC parses a cluster of class c for each name, setting variable
// to its value; topology adds lines to each cluster's topology.
func clustersOfC(t *testing.T, variable string, values map[string]string, topology string) []Object {
	t.Helper()
	var objs []Object
	for name, value := range values {
		c, errs := ParseFile(File{Path: "clusters/" + name + ".yaml", Data: []byte(header + `kind: Cluster
metadata: {name: ` + name + `}
spec:
  topology:
    classRef: {name: c}
` + topology + `    variables: [{name: ` + variable + `, value: ` + value + `}]
`)})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		objs = append(objs, c...)
	}
	return objs
}

// TestVariableVerdictsAreNotMixed: check's verdicts are remembered by
// constraint and typed value, so clusters setting the same value get the
// same answer, each at its own line, and an integer, a float and a string
// that print alike, or one value under two constraints, are told apart.
func TestVariableVerdictsAreNotMixed(t *testing.T) {
	class, _ := ParseFile(File{Path: "classes/c.yaml", Data: []byte(header + `kind: ClusterClass
metadata: {name: c}
spec:
  controlPlane: {machineTemplate: {provider: inmemory}}
  workers: {machineDeployments: [{class: w, template: {provider: inmemory}}]}
  variables:
    - {name: n, constraint: "int & >=1"}
    - {name: f, constraint: "number"}
    - {name: s, constraint: "string"}
`)})
	objs := class
	values := []string{`1`, `1.5`, `1`, `1.5`, `"1"`, `{a: [1, "x"]}`}
	for i, v := range values {
		cl, errs := ParseFile(File{Path: fmt.Sprintf("clusters/c%d.yaml", i), Data: []byte(header + fmt.Sprintf(`kind: Cluster
metadata: {name: c%d}
spec:
  topology:
    classRef: {name: c}
    controlPlane: {replicas: 1}
    variables:
      - {name: n, value: %s}
      - {name: f, value: %s}
      - {name: s, value: %s}
`, i, v, v, v))})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		objs = append(objs, cl...)
	}
	_, errs := Check(objs, nil)
	var got []string
	for _, e := range errs {
		got = append(got, fmt.Sprintf("%s:%d %s", e.Path, e.Line, e.Field))
	}
	want := []string{
		"clusters/c0.yaml:11 spec.topology.variables[2].value",
		"clusters/c1.yaml:9 spec.topology.variables[0].value",
		"clusters/c1.yaml:11 spec.topology.variables[2].value",
		"clusters/c2.yaml:11 spec.topology.variables[2].value",
		"clusters/c3.yaml:9 spec.topology.variables[0].value",
		"clusters/c3.yaml:11 spec.topology.variables[2].value",
		"clusters/c4.yaml:9 spec.topology.variables[0].value",
		"clusters/c4.yaml:10 spec.topology.variables[1].value",
		"clusters/c5.yaml:9 spec.topology.variables[0].value",
		"clusters/c5.yaml:10 spec.topology.variables[1].value",
		"clusters/c5.yaml:11 spec.topology.variables[2].value",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("errors (-want +got):\n%s\nall:\n%v", d, errs)
	}
}

// recordingKnown knows nothing and records the clusters that pass.
type recordingKnown struct {
	mu     sync.Mutex
	passed []string
}

func (k *recordingKnown) Good(cluster, class string) bool { return false }

func (k *recordingKnown) Add(cluster, class string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cluster != "" {
		k.passed = append(k.passed, cluster+" "+class)
	}
}

// TestCheckKnownTellsEachClusterByItsOwnKey: files read out of name order
// (sorting puts the clusters in name order); the verdict recorded for each
// cluster is under its own object's key, and the cluster that fails its
// checks gets none.
func TestCheckKnownTellsEachClusterByItsOwnKey(t *testing.T) {
	var objs []Object
	parse := func(path, doc, key string) {
		t.Helper()
		os, errs := ParseFile(File{Path: path, Data: []byte(header + doc)})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		for i := range os {
			os[i].Key = key
		}
		objs = append(objs, os...)
	}
	parse("classes/c.yaml", `kind: ClusterClass
metadata: {name: c}
spec:
  controlPlane: {machineTemplate: {provider: inmemory}}
  workers: {machineDeployments: [{class: w, template: {provider: inmemory}}]}
`, "key-class")
	cluster := `kind: Cluster
metadata: {name: %s}
spec:
  topology:
    classRef: {name: c}
    controlPlane: {replicas: 1}
%s`
	parse("clusters/1.yaml", fmt.Sprintf(cluster, "zeta", "    variables: [{name: undeclared, value: 1}]\n"), "key-zeta")
	parse("clusters/2.yaml", fmt.Sprintf(cluster, "alpha", ""), "key-alpha")
	parse("clusters/3.yaml", fmt.Sprintf(cluster, "mid", ""), "key-mid")
	known := &recordingKnown{}
	fleet, errs := CheckKnown(objs, nil, known)
	if len(errs) != 1 || errs[0].Path != "clusters/1.yaml" {
		t.Fatalf("want one error, in zeta's file; got %v", errs)
	}
	var names []string
	for _, c := range fleet.Clusters {
		names = append(names, c.Metadata.Name)
	}
	if d := cmp.Diff([]string{"alpha", "mid", "zeta"}, names); d != "" {
		t.Errorf("clusters (-want +got):\n%s", d)
	}
	slices.Sort(known.passed)
	if d := cmp.Diff([]string{"key-alpha key-class", "key-mid key-class"}, known.passed); d != "" {
		t.Errorf("clusters known to pass (-want +got):\n%s", d)
	}
}

// TestCheckIndexedIsCheck: objects replaced in place, as a validation of
// an edited file replaces them, are checked with the index of the last
// checks when it fits (same slice, same kinds and names) and give what
// CheckKnown gives from nothing: a cluster turned invalid and back, a
// cluster renamed (the index is made again), a name used twice (an index
// with duplicates is not kept). With a known that remembers verdicts, as
// a daemon's validations do, the index also remembers which clusters
// passed: a class edited so that clusters that passed fail, and back, is
// checked as from nothing.
func TestCheckIndexedIsCheck(t *testing.T) {
	for _, remember := range []bool{false, true} {
		t.Run(fmt.Sprintf("known=%v", remember), func(t *testing.T) { checkIndexedIsCheck(t, remember) })
	}
}

func checkIndexedIsCheck(t *testing.T, remember bool) {
	parse := func(path, doc string) Object {
		t.Helper()
		os, errs := ParseFile(File{Path: path, Data: []byte(header + doc)})
		if len(errs) > 0 || len(os) != 1 {
			t.Fatalf("%s: %d objects, %v", path, len(os), errs)
		}
		if remember {
			os[0].Key = path + "\x00" + doc // a content key, as sources sets
		}
		return os[0]
	}
	class := `kind: ClusterClass
metadata: {name: c}
spec:
  controlPlane: {machineTemplate: {provider: inmemory}}
  workers: {machineDeployments: [{class: w, template: {provider: inmemory}}]}
`
	requiring := class + "  variables: [{name: undeclared, constraint: int, required: true}]\n"
	cluster := func(name, extra string) string {
		return fmt.Sprintf(`kind: Cluster
metadata: {name: %s}
spec:
  topology:
    classRef: {name: c}
    controlPlane: {replicas: 1}
%s`, name, extra)
	}
	var known KnownGood
	fresh := func() KnownGood { return nil }
	if remember {
		known = &rememberingKnown{good: map[[2]string]bool{}}
		fresh = func() KnownGood { return &rememberingKnown{good: map[[2]string]bool{}} }
	}
	objs := []Object{parse("classes/c.yaml", class), parse("clusters/a.yaml", cluster("a", "")),
		parse("clusters/b.yaml", cluster("b", "")), parse("clusters/d.yaml", cluster("d", "")),
		parse("checks/hc.yaml", "kind: MachineHealthCheck\nmetadata: {name: hc}\nspec: {clusterName: b}\n")}
	_, _, idx := CheckIndexed(objs, nil, known, nil)
	for i, step := range []struct {
		what string
		at   int
		obj  Object
		kept bool // the index of the step before fits
	}{
		{"b gets an undeclared variable", 2, parse("clusters/b.yaml", cluster("b", "    variables: [{name: undeclared, value: 1}]\n")), true},
		{"the class requires the variable only b sets", 0, parse("classes/c.yaml", requiring), true},
		{"the class requires it no more", 0, parse("classes/c.yaml", class), true},
		{"b is fixed", 2, parse("clusters/b.yaml", cluster("b", "")), true},
		{"the class requires it again", 0, parse("classes/c.yaml", requiring), true},
		{"and no more", 0, parse("classes/c.yaml", class), true},
		{"d is renamed e", 3, parse("clusters/d.yaml", cluster("e", "")), false},
		{"e is renamed a: a name twice", 3, parse("clusters/d.yaml", cluster("a", "")), false},
		{"a again, the index had duplicates", 3, parse("clusters/d.yaml", cluster("a", "    variables: [{name: undeclared, value: 2}]\n")), false},
		{"a is renamed d", 3, parse("clusters/d.yaml", cluster("d", "")), false},
		{"d changes", 3, parse("clusters/d.yaml", strings.Replace(cluster("d", ""), "replicas: 1", "replicas: 3", 1)), true},
	} {
		objs[step.at] = step.obj
		fleet, errs, next := CheckIndexed(objs, nil, known, idx)
		if (next == idx) != step.kept {
			t.Errorf("step %d (%s): index kept %v, want %v", i, step.what, next == idx, step.kept)
		}
		wantFleet, wantErrs := CheckKnown(objs, nil, fresh())
		if d := cmp.Diff(wantFleet, fleet); d != "" {
			t.Errorf("step %d (%s): fleet (-fresh +indexed):\n%s", i, step.what, d)
		}
		if d := cmp.Diff(wantErrs, errs); d != "" {
			t.Errorf("step %d (%s): errors (-fresh +indexed):\n%s", i, step.what, d)
		}
		idx = next
	}
}

// rememberingKnown remembers the verdicts it is told, as a daemon's
// validation cache does.
type rememberingKnown struct {
	mu   sync.Mutex
	good map[[2]string]bool
}

func (k *rememberingKnown) Good(cluster, class string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.good[[2]string{cluster, class}]
}

func (k *rememberingKnown) Add(cluster, class string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.good[[2]string{cluster, class}] = true
}

// TestBeatCheckReadsPatchedInterval: a Ready Unknown timeout is held to
// the heartbeat interval each cluster's machines get once the class's
// patches are applied. The class writes 10s, which its timeout of 15 does
// not cover, but its patch writes each cluster's beat variable (default
// 5s) over it: the clusters that keep 5s or ask for less pass; those that
// ask for 8s or 9s are refused at the class's timeout, once per interval,
// naming them, the patch, the variable and the fix; a cluster's own check
// and a MachineHealthCheck are held to its patched interval too. Before,
// all three read the 10s as written: the class was refused for every
// cluster, and the 8s and 9s clusters' machines, checked after 15s, were
// not. A second check with the clusters that passed remembered says the
// same.
func TestBeatCheckReadsPatchedInterval(t *testing.T) {
	objs, errs := ParseFile(File{Path: "classes/c.yaml", Data: []byte(header + `kind: ClusterClass
metadata: {name: c}
spec:
  controlPlane:
    machineTemplate: {provider: local, spec: {heartbeatInterval: 10s}}
    healthCheck:
      checks:
        unhealthyNodeConditions: [{type: Ready, status: Unknown, timeoutSeconds: 15}]
  variables:
    - {name: beat, default: 5s}
  patches:
    - name: beat
      definitions:
        - selector: {matchResources: {controlPlane: true}}
          jsonPatches:
            - {op: add, path: /spec/heartbeatInterval, valueFrom: {variable: beat}}
`)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	objs = append(objs, clustersOfC(t, "beat", map[string]string{"a": "5s", "b": "8s", "c": "8s", "d": "9s", "e": "1s"}, "")...)
	own, errs := ParseFile(File{Path: "clusters/f.yaml", Data: []byte(header + `kind: Cluster
metadata: {name: f}
spec:
  topology:
    classRef: {name: c}
    controlPlane:
      healthCheck:
        checks:
          unhealthyNodeConditions: [{type: Ready, status: Unknown, timeoutSeconds: 9}]
---
` + header + `kind: MachineHealthCheck
metadata: {name: e-cp}
spec:
  clusterName: e
  selector: {matchLabels: {gitfleet.io/control-plane: "true"}}
  checks:
    unhealthyNodeConditions: [{type: Ready, status: Unknown, timeoutSeconds: 1}]
`)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for i := range own {
		own[i].Key = "own"
	}
	objs = append(objs, own...)
	for i := range objs {
		if objs[i].Key == "" {
			objs[i].Key = objs[i].Name
		}
	}
	want := []string{
		`classes/c.yaml:9:66: spec.controlPlane.healthCheck.checks.unhealthyNodeConditions[0].timeoutSeconds: 15 is shorter than two heartbeats of the control plane of cluster d (one every 9s, set by patch "beat" from variable beat): its machines would be found silent between heartbeats and replaced over and over; use 18 or more, or a shorter beat`,
		`classes/c.yaml:9:66: spec.controlPlane.healthCheck.checks.unhealthyNodeConditions[0].timeoutSeconds: 15 is shorter than two heartbeats of the control plane of clusters b, c (one every 8s, set by patch "beat" from variable beat): its machines would be found silent between heartbeats and replaced over and over; use 16 or more, or a shorter beat`,
		`clusters/f.yaml:10:68: spec.topology.controlPlane.healthCheck.checks.unhealthyNodeConditions[0].timeoutSeconds: 9 is shorter than two heartbeats of the control plane (one every 5s, set by patch "beat" from variable beat): its machines would be found silent between heartbeats and replaced over and over; use 10 or more, or a shorter beat`,
		`clusters/f.yaml:19:62: spec.checks.unhealthyNodeConditions[0].timeoutSeconds: 1 is shorter than two heartbeats of the control plane of cluster e (one every 1s, set by patch "beat" from variable beat): its machines would be found silent between heartbeats and replaced over and over; use 2 or more, or a shorter beat`,
	}
	known := &rememberingKnown{good: map[[2]string]bool{}}
	for _, run := range []string{"first", "second, with the clusters that passed remembered"} {
		_, errs = CheckKnown(objs, nil, known)
		if d := cmp.Diff(want, errLines(errs)); d != "" {
			t.Errorf("%s check: errors (-want +got):\n%s", run, d)
		}
	}
}

// TestSilentCheckReadsPatchedProvider: a Ready Unknown condition may not
// check machines of a provider that sends no heartbeats, and that is the
// provider a class's patches give each cluster's machines, not the one the
// class writes. Here the control plane is written local, but a patch gives
// it each cluster's provider variable: the clusters that ask for inmemory
// are refused at the class's check (once, naming them, the patch, the
// variable and the fix), at a cluster's own check and at a
// MachineHealthCheck; those that keep local pass. The worker class is
// written inmemory, but a patch gives every cluster's workers local: its
// check is not refused. Before, the three checks of inmemory machines
// passed and the worker class was refused for a provider no machine got. A
// second check with the clusters that passed remembered says the same.
func TestSilentCheckReadsPatchedProvider(t *testing.T) {
	objs, errs := ParseFile(File{Path: "classes/c.yaml", Data: []byte(header + `kind: ClusterClass
metadata: {name: c}
spec:
  controlPlane:
    machineTemplate: {provider: local}
    healthCheck:
      checks:
        unhealthyNodeConditions: [{type: Ready, status: Unknown, timeoutSeconds: 30}]
  workers:
    machineDeployments:
      - class: w
        template: {provider: inmemory}
        healthCheck:
          checks:
            unhealthyNodeConditions: [{type: Ready, status: Unknown, timeoutSeconds: 40}]
  variables:
    - {name: provider, default: local}
  patches:
    - name: cp-provider
      definitions:
        - selector: {matchResources: {controlPlane: true}}
          jsonPatches:
            - {op: replace, path: /provider, valueFrom: {variable: provider}}
    - name: worker-provider
      definitions:
        - selector: {matchResources: {machineDeploymentClass: {names: [w]}}}
          jsonPatches:
            - {op: replace, path: /provider, value: local}
`)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	workers := "    workers: {machineDeployments: [{class: w, name: md-0}]}\n"
	objs = append(objs, clustersOfC(t, "provider", map[string]string{"a": "inmemory", "b": "inmemory", "c": "local", "d": "local"}, workers)...)
	own, errs := ParseFile(File{Path: "clusters/f.yaml", Data: []byte(header + `kind: Cluster
metadata: {name: f}
spec:
  topology:
    classRef: {name: c}
    controlPlane:
      healthCheck:
        checks:
          unhealthyNodeConditions: [{type: Ready, status: Unknown, timeoutSeconds: 20}]
    variables: [{name: provider, value: inmemory}]
---
` + header + `kind: MachineHealthCheck
metadata: {name: a-cp}
spec:
  clusterName: a
  selector: {matchLabels: {gitfleet.io/control-plane: "true"}}
  checks:
    unhealthyNodeConditions: [{type: Ready, status: Unknown, timeoutSeconds: 50}]
`)})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for i := range own {
		own[i].Key = "own"
	}
	objs = append(objs, own...)
	for i := range objs {
		if objs[i].Key == "" {
			objs[i].Key = objs[i].Name
		}
	}
	want := []string{
		`classes/c.yaml:9:35: spec.controlPlane.healthCheck.checks.unhealthyNodeConditions[0]: checks the control plane of clusters a, b, whose machines provider inmemory makes (set by patch "cp-provider" from variable provider), which sends no heartbeats: their Ready condition would turn Unknown after 30s and they would be replaced over and over; remove the Ready Unknown condition, or set variable provider to a provider that sends heartbeats`,
		`clusters/f.yaml:10:37: spec.topology.controlPlane.healthCheck.checks.unhealthyNodeConditions[0]: checks the control plane, whose machines provider inmemory makes (set by patch "cp-provider" from variable provider), which sends no heartbeats: their Ready condition would turn Unknown after 20s and they would be replaced over and over; remove the Ready Unknown condition, or set variable provider to a provider that sends heartbeats`,
		`clusters/f.yaml:20:31: spec.checks.unhealthyNodeConditions[0]: selects machines of the control plane of cluster a, made by provider inmemory (set by patch "cp-provider" from variable provider), which sends no heartbeats: their Ready condition would turn Unknown after 50s and they would be replaced over and over; remove the Ready Unknown condition, or narrow the selector to machines that send heartbeats, or set variable provider to a provider that sends heartbeats`,
	}
	known := &rememberingKnown{good: map[[2]string]bool{}}
	for _, run := range []string{"first", "second, with the clusters that passed remembered"} {
		_, errs = CheckKnown(objs, nil, known)
		if d := cmp.Diff(want, errLines(errs)); d != "" {
			t.Errorf("%s check: errors (-want +got):\n%s", run, d)
		}
	}
}
