package schemas

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"cuelang.org/go/cue"
	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

const header = "apiVersion: gitfleet.io/v1alpha1\n"

// errLines formats errors one per line, for comparison.
func errLines(es Errors) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Error())
	}
	return out
}

func TestParseFileMultiDocumentAnchorsAndComments(t *testing.T) {
	src := `# two health checks sharing settings through an anchor
` + header + `kind: MachineHealthCheck
metadata: {name: a}
spec: &common
  clusterName: dev-1   # trailing comment
  checks:
    nodeStartupTimeoutSeconds: 600
  remediation:
    triggerIf:
      unhealthyLessThanOrEqualTo: 40%
---
---
# an empty document above is skipped
` + header + `kind: MachineHealthCheck
metadata: {name: b}
spec:
  <<: *common
  clusterName: prod-1
`
	objs, errs := ParseFile(File{Path: "hc.yaml", Data: []byte(src)})
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	if len(objs) != 2 {
		t.Fatalf("got %d objects, want 2", len(objs))
	}
	b := objs[1].Value.(*v1alpha1.MachineHealthCheck)
	if b.Spec.ClusterName != "prod-1" || *b.Spec.Checks.NodeStartupTimeoutSeconds != 600 || b.Spec.Remediation.TriggerIf.UnhealthyLessThanOrEqualTo.String() != "40%" {
		t.Errorf("merged spec = %+v", b.Spec)
	}
	if objs[1].Source != (v1alpha1.Source{Path: "hc.yaml", Line: 15}) {
		t.Errorf("second document source = %v, want hc.yaml:15", objs[1].Source)
	}
	if got, _ := objs[0].Lines.At("spec.checks.nodeStartupTimeoutSeconds"); got != (Pos{8, 5}) {
		t.Errorf("Lines[spec.checks.nodeStartupTimeoutSeconds] = %v, want 8:5", got)
	}
}

func TestParseFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"not yaml", "kind: Cluster\n  bad: [\n", []string{"f.yaml:2: not valid YAML: mapping values are not allowed in this context"}},
		{"plain text", "These are my notes.\n", []string{`f.yaml:1:1: not a fleet document: found "These are my notes." where a YAML mapping with apiVersion and kind was expected`}},
		{"binary", "\x00\x01\x02", []string{"f.yaml:1:1: not valid YAML: a control character (U+0000) YAML does not allow: remove it"}},
		// NEL is allowed; the column counts characters, not bytes.
		{"control character after NEL", "a: \u0085b\nc: é\x01\n", []string{"f.yaml:2:5: not valid YAML: a control character (U+0001) YAML does not allow: remove it"}},
		// A non-breaking space inside a quoted value is no cause.
		{"nbsp in a value", "note: \"10\u00a0GB\"\nlabels: {a: b\n", []string{"f.yaml:1: not valid YAML: did not find expected ',' or '}'"}},
		{"duplicate key", header + "kind: MachineHealthCheck\nmetadata: {name: a}\nspec: {clusterName: x}\nspec: {clusterName: y}\n",
			[]string{`f.yaml:5:1: spec: duplicate key "spec": remove one`}},
		{"alias cycle", "a: &a [*a]\n", []string{
			"f.yaml:1:1: document has no kind: add kind: one of ClusterClass, Cluster, MachineDeployment, MachineHealthCheck, FleetConfig",
			"f.yaml:1:8: a[0][0]: alias *a refers to itself",
		}},
		// An application's tags, on a value and on a mapping, are refused
		// (the value was read as written, tag dropped); YAML's own are not.
		{"application tags", header + "kind: MachineDeployment\nmetadata: {name: !!str a}\nspec:\n  clusterName: !vault secret/x\n  template: !Ref {provider: local}\n", []string{
			"f.yaml:5:16: spec.clusterName: YAML tag !vault is not resolved: gitfleet reads values as written, so write the literal value here; secrets never go in Git (no fleet field takes one: docs/security.md)",
			"f.yaml:6:13: spec.template: YAML tag !Ref is not resolved: gitfleet reads values as written, so write the literal value here; secrets never go in Git (no fleet field takes one: docs/security.md)",
		}},
		// On a key too, in every form a key takes: the tag would be
		// dropped and the key read as written.
		{"application tags on keys", header + "kind: MachineDeployment\nmetadata: {name: a}\nspec:\n  clusterName: x\n  !vault replicas: 2\n  ? !foo template\n  : {!Ref provider: local}\n", []string{
			"f.yaml:6:3: spec.replicas: YAML tag !vault on the key is not resolved: gitfleet reads keys as written, so remove the tag and write the plain key replicas",
			"f.yaml:7:5: spec.template: YAML tag !foo on the key is not resolved: gitfleet reads keys as written, so remove the tag and write the plain key template",
			"f.yaml:8:6: spec.template.provider: YAML tag !Ref on the key is not resolved: gitfleet reads keys as written, so remove the tag and write the plain key provider",
		}},
		{"no apiVersion", "kind: Cluster\nmetadata: {name: a}\n", []string{"f.yaml:1:1: document has no apiVersion: add apiVersion: gitfleet.io/v1alpha1"}},
		{"kind not a string", header + "kind: [Cluster]\n", []string{`f.yaml:2:1: kind: unknown kind a list; gitfleet reads ClusterClass, Cluster, MachineDeployment, MachineHealthCheck, FleetConfig`}},
		{"every error of a document", header + "kind: MachineHealthCheck\nmetadata: {name: A}\nspec:\n  clusterName: x\n  checks: {nodeStartupTimeoutSeconds: soon}\n  remediation: {triggerIf: {unhealthyLessThanOrEqualTo: -1}}\n  extra: 1\n", []string{
			`f.yaml:3:12: metadata.name: "A" is not a DNS-1123 name: use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters`,
			`f.yaml:6:12: spec.checks.nodeStartupTimeoutSeconds: "soon" is not a number of seconds like 600 (10 minutes; 0 turns the check off)`,
			`f.yaml:7:29: spec.remediation.triggerIf.unhealthyLessThanOrEqualTo: -1 is neither a count nor a percentage like "40%"`,
			`f.yaml:8:3: spec.extra: unknown field "extra"; allowed here: checks, clusterName, remediation, selector`,
		}},
		{"node conditions", header + "kind: MachineHealthCheck\nmetadata: {name: a}\nspec:\n  clusterName: x\n  checks:\n    unhealthyNodeConditions:\n      - {type: Ready, status: False, timeoutSeconds: 60}\n      - {type: MemoryPressure, status: Unknown, timeoutSeconds: 60}\n", []string{
			`f.yaml:8:23: spec.checks.unhealthyNodeConditions[0].status: False is not a status of the Ready condition gitfleet checks: use Unknown (no heartbeat) or "False" (the machine says it is not healthy), quoted`,
			`f.yaml:9:10: spec.checks.unhealthyNodeConditions[1].type: "MemoryPressure" is not a condition gitfleet's machines report: use Ready (status Unknown: heartbeats stopped; False: the machine says it is not healthy)`,
		}},
		{"Cluster API fields with another name here", header + "kind: Cluster\nmetadata: {name: a}\nspec:\n  topology:\n    classRef: {name: c}\n    classNamespace: default\n    workers:\n      machineDeployments:\n        - {class: w, name: md, machineHealthCheck: {enable: true}}\n", []string{
			`f.yaml:7:5: spec.topology.classNamespace: unknown field "classNamespace": gitfleet has no namespaces: remove it`,
			`f.yaml:10:32: spec.topology.workers.machineDeployments[0].machineHealthCheck: unknown field "machineHealthCheck": Cluster API v1beta2 and gitfleet write healthCheck (enabled, checks, remediation)`,
		}},
		{"Cluster API v1beta1 names", header + "kind: MachineHealthCheck\nmetadata: {name: a}\nspec:\n  clusterName: x\n  nodeStartupTimeout: 10m\n  maxUnhealthy: 40%\n", []string{
			`f.yaml:6:3: spec.nodeStartupTimeout: unknown field "nodeStartupTimeout": Cluster API v1beta2 and gitfleet write spec.checks.nodeStartupTimeoutSeconds, a number of seconds (10m is 600)`,
			`f.yaml:7:3: spec.maxUnhealthy: unknown field "maxUnhealthy": Cluster API v1beta2 and gitfleet write spec.remediation.triggerIf.unhealthyLessThanOrEqualTo`,
		}},
		{"required field", header + "kind: MachineHealthCheck\nmetadata: {name: a}\nspec: {}\n", []string{"f.yaml:4:1: spec.clusterName: is required"}},
		{"missing spec and metadata", header + "kind: MachineDeployment\n", []string{"f.yaml:1:1: metadata: is required", "f.yaml:1:1: spec: is required"}},
		{"quoted number", header + "kind: MachineDeployment\nmetadata: {name: a}\nspec: {clusterName: x, replicas: \"3\", template: {provider: local}}\n",
			[]string{`f.yaml:4:24: spec.replicas: "3" is a string, not a number: remove the quotes`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := ParseFile(File{Path: "f.yaml", Data: []byte(tc.src)})
			if d := cmp.Diff(tc.want, errLines(errs)); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseFileAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d]\n", i, i, i-1)
	}
	_, errs := ParseFile(File{Path: "bomb.yaml", Data: []byte(b.String())})
	if len(errs) == 0 || !strings.Contains(errs.Error(), "more than") {
		t.Fatalf("want a too-many-values error, got %v", errs)
	}
}

// TestParseFileConcurrent: the sources package calls ParseFile from many
// goroutines (-race checks the pooled contexts).
func TestParseFileConcurrent(t *testing.T) {
	var files []File
	for _, f := range generatedFleet(t, 60) {
		if strings.HasSuffix(f.Path, ".yaml") && f.Path != ConfigFile {
			files = append(files, f)
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < len(files); i += 4 {
				if _, errs := ParseFile(files[i]); len(errs) > 0 {
					t.Errorf("%s: %v", files[i].Path, errs)
				}
			}
		})
	}
	wg.Wait()
}

func TestProviderSpecs(t *testing.T) {
	md := func(provider, spec string) File {
		return File{Path: "md.yaml", Data: []byte(header + "kind: MachineDeployment\nmetadata: {name: extra}\nspec:\n  clusterName: dev-1\n  template:\n    provider: " + provider + "\n    spec: " + spec + "\n")}
	}
	for _, tc := range []struct {
		provider, spec string
		want           []string
	}{
		{"local", "{cpus: 2, memory: 512Mi, heartbeatInterval: 1s, startupDelay: 100ms}", nil},
		{"inmemory", "{provisioningDelay: 10ms, provisioningDelayMax: 1s, failureRate: 0.1}", nil},
		{"inmemory", "{failureRate: 2}", []string{"md.yaml:8:12: spec.template.spec.failureRate: 2 is not a failure rate between 0 and 1"}},
		{"inmemory", "{cpus: 2}", []string{`md.yaml:8:12: spec.template.spec.cpus: unknown field "cpus"; allowed here: failureRate, provisioningDelay, provisioningDelayMax`}},
		{"local", "{heartbeatInterval: 100ms}", nil},
		{"local", "{heartbeatInterval: 99ms}", []string{`md.yaml:8:12: spec.template.spec.heartbeatInterval: "99ms" is shorter than 100ms: every machine sends the leader a heartbeat each interval; use 100ms or more (2s when unset)`}},
		{"inmemory", "{heartbeatInterval: 1ns}", []string{`md.yaml:8:12: spec.template.spec.heartbeatInterval: unknown field "heartbeatInterval"; allowed here: failureRate, provisioningDelay, provisioningDelayMax`}},
		{"docker", "{heartbeatInterval: 1ns}", []string{`md.yaml:8:12: spec.template.spec.heartbeatInterval: "1ns" is shorter than 100ms: every machine sends the leader a heartbeat each interval; use 100ms or more (2s when unset)`}},
		{"local", "{cpus: 0}", []string{"md.yaml:8:12: spec.template.spec.cpus: 0 is not a CPU count >= 1"}},
		{"lokal", "{}", []string{`md.yaml:7:5: spec.template.provider: unknown provider "lokal"; did you mean "local"? (known providers: docker, inmemory, local)`}},
	} {
		_, errs := ParseFile(md(tc.provider, tc.spec))
		if d := cmp.Diff(tc.want, errLines(errs)); d != "" {
			t.Errorf("%s %s (-want +got):\n%s", tc.provider, tc.spec, d)
		}
	}
}

// TestSilentProviders holds the providers read as sending no heartbeats
// from the schema's syntax to what the compiled schema's attributes say,
// and to the one the schema declares today.
func TestSilentProviders(t *testing.T) {
	c, err := compileSchema()
	if err != nil {
		t.Fatal(err)
	}
	compiled := map[string]bool{}
	it, err := c.root.LookupPath(cue.ParsePath("#providers")).Fields(cue.Definitions(false))
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
		if a := it.Value().Attribute("heartbeats"); a.Err() == nil {
			if v, err := a.String(0); err == nil && v == "none" {
				compiled[it.Selector().Unquoted()] = true
			}
		}
	}
	if d := cmp.Diff(compiled, silentProviders()); d != "" {
		t.Errorf("silent providers, compiled (-) and read from the syntax (+):\n%s", d)
	}
	if d := cmp.Diff(map[string]bool{"inmemory": true}, compiled); d != "" {
		t.Errorf("silent providers (-want +got):\n%s", d)
	}
	for p, want := range map[string]bool{"inmemory": false, "local": true, "docker": true} {
		if got := SendsHeartbeats(p); got != want {
			t.Errorf("SendsHeartbeats(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestRolloutWaves(t *testing.T) {
	src := header + `kind: ClusterClass
metadata: {name: c}
spec:
  controlPlane: {machineTemplate: {provider: inmemory}}
  rollout:
    waves:
      - {name: a, selector: {}, maxConcurrent: 0}
      - {name: a, selector: {}, maxConcurrent: "0%"}
`
	_, errs := ParseFile(File{Path: "c.yaml", Data: []byte(src)})
	want := []string{
		`c.yaml:8:33: spec.rollout.waves[0].maxConcurrent: 0 would never start a cluster of this wave: use at least 1 (or "10%")`,
		`c.yaml:9:10: spec.rollout.waves[1].name: duplicate wave "a": rename one`,
		`c.yaml:9:33: spec.rollout.waves[1].maxConcurrent: 0% would never start a cluster of this wave: use at least 1 (or "10%")`,
	}
	if d := cmp.Diff(want, errLines(errs)); d != "" {
		t.Errorf("errors (-want +got):\n%s", d)
	}
}

func TestScalars(t *testing.T) {
	d, err := splitYAML("s.yaml", []byte("a: 0x1F\nb: 1_000\nc: 1.5e3\nd: .inf\ne: True\nf: ~\ng: '3'\nh: -7\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := d[0].value.(map[string]any)
	want := map[string]any{"a": int64(31), "b": int64(1000), "c": 1500.0, "d": ".inf", "e": true, "f": nil, "g": "3", "h": int64(-7)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scalars (-want +got):\n%s", diff)
	}
}
