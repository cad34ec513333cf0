package schemas

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/fixtures"
)

// cluster is a Cluster document named c whose spec is the given lines.
func cluster(spec string) string {
	return header + "kind: Cluster\nmetadata:\n  name: c\nspec:\n" + spec
}

// TestWrongKindMessages: a value of a kind its place does not take is
// told in YAML's words with its fix, at its key, never as CUE's dump of
// the schema ("conflicting values {paused?:bool,...} and null").
func TestWrongKindMessages(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"empty spec", header + "kind: Cluster\nmetadata:\n  name: c\nspec:\n", []string{
			`clusters/c.yaml:5:1: spec: is empty, but a map of fields is expected: write its fields under it, indented (topology: ...)`,
		}},
		{"empty metadata", header + "kind: Cluster\nmetadata:\nspec:\n  topology:\n    classRef: {name: standard}\n", []string{
			`clusters/c.yaml:3:1: metadata: is empty, but a map of fields is expected: write its fields under it, indented (name: ...)`,
		}},
		{"empty workers", cluster("  topology:\n    classRef: {name: standard}\n    workers:\n"), []string{
			`clusters/c.yaml:8:5: spec.topology.workers: is empty, but a map of fields is expected: write its fields under it, indented (machineDeployments: ...), or remove the line`,
		}},
		{"empty controlPlane", cluster("  topology:\n    classRef: {name: standard}\n    controlPlane:\n"), []string{
			`clusters/c.yaml:8:5: spec.topology.controlPlane: is empty, but a map of fields is expected: write its fields under it, indented (one of metadata, replicas, healthCheck), or remove the line`,
		}},
		{"list written as a map", cluster("  topology:\n    classRef: {name: standard}\n    workers:\n      machineDeployments:\n        class: default-worker\n        name: md-0\n        replicas: 2\n"), []string{
			`clusters/c.yaml:9:7: spec.topology.workers.machineDeployments: is a map, but a list is expected: start each item with "- "`,
		}},
		{"colon forgotten", cluster("  topology:\n    classRef: {name: standard}\n    controlPlane:\n      replicas 1\n"), []string{
			`clusters/c.yaml:8:5: spec.topology.controlPlane: is the string "replicas 1", but a map of fields is expected: write "replicas: 1", with a colon and a space after replicas`,
		}},
		{"space after the colon forgotten", cluster("  topology:\n    classRef: {name: standard}\n    controlPlane:\n      replicas:1\n"), []string{
			`clusters/c.yaml:8:5: spec.topology.controlPlane: is the string "replicas:1", but a map of fields is expected: write "replicas: 1", with a space after the colon`,
		}},
		{"string for a map of one field", cluster("  topology:\n    classRef: standard\n"), []string{
			`clusters/c.yaml:7:5: spec.topology.classRef: is the string "standard", but a map of fields is expected: write classRef: {name: standard}`,
		}},
		{"scalar for a list", cluster("  clusterNetwork:\n    services:\n      cidrBlocks: 10.96.0.0/12\n  topology:\n    classRef: {name: standard}\n"), []string{
			`clusters/c.yaml:8:7: spec.clusterNetwork.services.cidrBlocks: is a single value, but a list is expected: write [10.96.0.0/12]`,
		}},
		{"number tagged as a string", cluster("  topology:\n    classRef: {name: standard}\n    controlPlane:\n      replicas: !!str 3\n"), []string{
			`clusters/c.yaml:9:7: spec.topology.controlPlane.replicas: !!str 3 is a string, not a number: remove the !!str tag`,
		}},
		{"decimal numbers for whole ones", cluster("  topology:\n    classRef: {name: standard}\n    workers:\n      machineDeployments:\n        - {class: w, name: md-0, replicas: 2.0}\n        - {class: w, name: md-1, replicas: 1e3}\n        - {class: w, name: md-2, replicas: 2.5}\n"), []string{
			`clusters/c.yaml:10:34: spec.topology.workers.machineDeployments[0].replicas: is the number 2.0, but a whole number is expected: write 2`,
			`clusters/c.yaml:11:34: spec.topology.workers.machineDeployments[1].replicas: is the number 1e3, but a whole number is expected: write 1000`,
			`clusters/c.yaml:12:34: spec.topology.workers.machineDeployments[2].replicas: is the number 2.5, but a whole number is expected`,
		}},
		{"empty scalars and list items", header + "kind: Cluster\nmetadata:\n  name:\nspec:\n  clusterNetwork:\n    pods:\n      cidrBlocks:\n    services:\n      cidrBlocks:\n        -\n  topology:\n    classRef: {name: standard}\n    workers:\n      machineDeployments:\n        -\n", []string{
			`clusters/c.yaml:4:3: metadata.name: is empty, but a string is expected: write a value after "name:"`,
			`clusters/c.yaml:8:7: spec.clusterNetwork.pods.cidrBlocks: is empty, but a list is expected: write its items under it, each starting with "- "`,
			`clusters/c.yaml:11:10: spec.clusterNetwork.services.cidrBlocks[0]: is empty: write a value after "- "`,
			`clusters/c.yaml:16:10: spec.topology.workers.machineDeployments[0]: is empty, but a map of fields is expected: write its fields under it, indented (class: ..., name: ...)`,
		}},
		{"maps and lists for scalars", header + "kind: Cluster\nmetadata:\n  name: c\n  labels:\n    env: {a: b}\n    tier: [x]\nspec:\n  topology:\n    classRef: [standard]\n    version: [v1.31.2]\n    controlPlane:\n      - replicas: 1\n    workers:\n      machineDeployments:\n        - class: w\n          name: md-0\n          replicas:\n            count: 2\n          failureDomain: 3\n", []string{
			`clusters/c.yaml:6:5: metadata.labels.env: is a map, but a string is expected: write a single value after "env:"`,
			`clusters/c.yaml:7:5: metadata.labels.tier: is a list, but a string is expected: write tier: x`,
			`clusters/c.yaml:10:5: spec.topology.classRef: is a list, but a map of fields is expected: write classRef: {name: standard}`,
			`clusters/c.yaml:11:5: spec.topology.version: is a list, but a string is expected: write version: v1.31.2`,
			`clusters/c.yaml:12:5: spec.topology.controlPlane: is a list, but a map of fields is expected: remove the "- " in front of its fields`,
			`clusters/c.yaml:18:11: spec.topology.workers.machineDeployments[0].replicas: is a map, but a whole number is expected: write a single value after "replicas:", or indent the lines under it less`,
			`clusters/c.yaml:20:11: spec.topology.workers.machineDeployments[0].failureDomain: is the number 3, but a string is expected: write "3", in quotes`,
		}},
		{"MachineDeployment", header + "kind: MachineDeployment\nmetadata: {name: md}\nspec:\n  clusterName: c\n  template:\n    provider: local\n    spec: big\n", []string{
			`clusters/c.yaml:8:5: spec.template.spec: is the string "big", but a map of fields is expected: write its fields under it, indented (one of cpus, memory, heartbeatInterval, startupDelay)`,
		}},
		{"MachineHealthCheck", header + "kind: MachineHealthCheck\nmetadata: {name: hc}\nspec:\n  clusterName: c\n  checks:\n    unhealthyNodeConditions: {type: Ready, status: Unknown, timeoutSeconds: 30}\n  selector:\n    matchLabels: [a]\n", []string{
			`clusters/c.yaml:7:5: spec.checks.unhealthyNodeConditions: is a map, but a list is expected: start each item with "- "`,
			`clusters/c.yaml:9:5: spec.selector.matchLabels: is a list, but a map is expected: write its fields under it, indented (key: value)`,
		}},
		{"ClusterClass", header + "kind: ClusterClass\nmetadata: {name: cc}\nspec:\n  controlPlane:\n    machineTemplate: local\n  workers:\n    machineDeployments:\n      - class: w\n        template:\n          provider: local\n          spec:\n            cpus: 2.0\n            memory: [1Gi]\n  variables: x\n", []string{
			`clusters/c.yaml:6:5: spec.controlPlane.machineTemplate: is the string "local", but a map of fields is expected: write machineTemplate: {provider: local}`,
			`clusters/c.yaml:13:13: spec.workers.machineDeployments[0].template.spec.cpus: is the number 2.0, but a whole number is expected: write 2`,
			`clusters/c.yaml:14:13: spec.workers.machineDeployments[0].template.spec.memory: is a list, but a string is expected: write memory: 1Gi`,
			`clusters/c.yaml:15:3: spec.variables: is a single value, but a list is expected: write [x]`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := ParseFile(File{Path: "clusters/c.yaml", Data: []byte(tc.src)})
			if d := cmp.Diff(tc.want, errLines(errs)); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
		})
	}
}

// TestWrongKindKeepsHelp: a scalar of another kind where the schema's
// @help words the place's values keeps that text (it says what the
// place takes: a count, a status, a quoted version), as do numbers
// written as strings.
func TestWrongKindKeepsHelp(t *testing.T) {
	src := cluster("  paused: \"yes\"\n  topology:\n    classRef: {name: standard}\n    version: 1.30\n    workers:\n      machineDeployments:\n        - class: w\n          name: md-0\n          replicas: '3'\n          rollout: {strategy: {rollingUpdate: {maxSurge: 2.5}}}\n        - {class: w, name: md-1, replicas: many}\n")
	want := []string{
		`clusters/c.yaml:6:3: spec.paused: "yes" is not true or false`,
		`clusters/c.yaml:9:5: spec.topology.version: 1.30 is a number, not a version: quote it and write the full version, like "v1.31.2"`,
		`clusters/c.yaml:14:11: spec.topology.workers.machineDeployments[0].replicas: "3" is a string, not a number: remove the quotes`,
		`clusters/c.yaml:15:48: spec.topology.workers.machineDeployments[0].rollout.strategy.rollingUpdate.maxSurge: 2.5 is neither a count nor a percentage like "25%"`,
		`clusters/c.yaml:16:34: spec.topology.workers.machineDeployments[1].replicas: "many" is not a machine count from 0 to 10,000`,
	}
	_, errs := ParseFile(File{Path: "clusters/c.yaml", Data: []byte(src)})
	if d := cmp.Diff(want, errLines(errs)); d != "" {
		t.Errorf("errors (-want +got):\n%s", d)
	}
}

// TestNoSchemaDumpForAnyKind: every value of every document of the
// example fleet replaced by a value of each kind (nothing, a map, a list,
// a string, whole and decimal numbers, a boolean) is refused without CUE's
// wording of the conflict, whose "conflicting values" shows the schema's
// definition.
func TestNoSchemaDumpForAnyKind(t *testing.T) {
	fleet, err := fixtures.Overlay(os.DirFS(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	replacements := []string{"null", "{x: 1}", "[x]", "some text", "7", "2.5", "true"}
	places := 0
	for _, f := range filesOf(fleet) {
		if !strings.HasSuffix(f.Path, ".yaml") {
			continue
		}
		dec := yaml.NewDecoder(strings.NewReader(string(f.Data)))
		for {
			var root yaml.Node
			if dec.Decode(&root) != nil {
				break
			}
			for _, n := range valuePlaces(&root) {
				places++
				saved := *n
				for _, r := range replacements {
					var repl yaml.Node
					if err := yaml.Unmarshal([]byte(r), &repl); err != nil {
						t.Fatal(err)
					}
					*n = *repl.Content[0]
					doc, err := yaml.Marshal(&root)
					if err != nil {
						t.Fatal(err)
					}
					_, errs := ParseFile(File{Path: f.Path, Data: doc})
					for _, e := range errs {
						if strings.Contains(e.Message, "conflicting values") || strings.Contains(e.Message, "mismatched types") {
							t.Errorf("%s with %s: %v", f.Path, r, e)
						}
					}
				}
				*n = saved
			}
		}
	}
	if places < 100 {
		t.Errorf("only %d places", places)
	}
}

// valuePlaces is every value node under n: each mapping value and
// sequence item.
func valuePlaces(n *yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			out = append(out, valuePlaces(c)...)
		}
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			if n.Content[i-1].Value == "apiVersion" || n.Content[i-1].Value == "kind" {
				continue // not a fleet document then: nothing of the schema
			}
			out = append(out, n.Content[i])
			out = append(out, valuePlaces(n.Content[i])...)
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			out = append(out, c)
			out = append(out, valuePlaces(c)...)
		}
	}
	return out
}
