package schemas

import (
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

// TestCheckWithPolicies is the path the sources package takes: ParseFile per
// file (cached), then Check with the policy files.
func TestCheckWithPolicies(t *testing.T) {
	class, _ := ParseFile(File{Path: "classes/c.yaml", Data: []byte(header + `kind: ClusterClass
metadata: {name: c}
spec:
  controlPlane: {machineTemplate: {provider: inmemory}}
  workers: {machineDeployments: [{class: w, template: {provider: inmemory}}]}
`)})
	clusters, errs := ParseFile(File{Path: "clusters/a.yaml", Data: []byte(header + `kind: Cluster
metadata: {name: a, labels: {env: prod, team: x}}
spec:
  topology:
    class: c
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
		`clusters/a.yaml:7:20: spec.topology.controlPlane.replicas: violates policy policies/prod.cue:4: conflicting values 3 and 1; conflicting values 5 and 1`,
		`policies/teams.cue:3:1: "Clustr" is not a kind; did you mean "Cluster"?`,
	}
	if d := cmp.Diff(want, errLines(errs)); d != "" {
		t.Errorf("errors (-want +got):\n%s", d)
	}
}
