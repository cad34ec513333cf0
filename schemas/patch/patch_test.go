package patch_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/patch"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite testdata/engine.golden")

const header = "apiVersion: gitfleet.io/v1alpha1\n"

// class is a ClusterClass whose worker class w has a template with some
// fields (the test adds a list the provider's schema does not have), the
// control plane's an empty spec, and the given variables and patches.
func class(variables, patches string) string {
	return header + `kind: ClusterClass
metadata: {name: standard}
spec:
  version: v1.31.2
  controlPlane: {machineTemplate: {provider: inmemory}}
  workers:
    machineDeployments:
      - class: w
        template:
          provider: local
          spec: {cpus: 2, memory: 2Gi}
  variables:
` + variables + `
  patches:
` + patches
}

const cluster = header + `kind: Cluster
metadata: {name: dev-1}
spec:
  clusterNetwork: {serviceDomain: cluster.local, pods: {cidrBlocks: [10.244.0.0/16]}}
  topology:
    classRef: {name: standard}
    version: v1.32.0
    controlPlane: {replicas: 3}
    workers:
      machineDeployments:
        - {class: w, name: md-0, replicas: 4}
    variables:
      - {name: cpus, value: 8}
      - {name: pss, value: {enforce: restricted, audit: [baseline, restricted]}}
      - {name: proxy, value: true}
      - {name: security, value: {enforce: privileged, exemptions: [{user: ci}]}}
`

const variables = `    - {name: cpus}
    - {name: pss}
    - {name: proxy}
    - {name: unset}
    - name: security
      schema:
        openAPIV3Schema:
          type: object
          properties:
            enforce: {type: string, default: baseline}
            audit: {type: string, default: restricted}
            exemptions: {type: array, items: {type: object, properties: {reason: {type: string, default: none}}}}
    - name: region
      schema:
        openAPIV3Schema: {type: string, default: eu-1}`

// worker wraps JSON patches (YAML list items) in a patch for worker class w.
func worker(name, extra, ops string) string {
	return `    - name: ` + name + `
` + extra + `      definitions:
        - selector: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: LocalMachineTemplate, matchResources: {machineDeploymentClass: {names: [w]}}}
          jsonPatches:
` + ops
}

// parsedClass is class(variables, patches), parsed.
func parsedClass(t *testing.T, patches string) *v1alpha1.ClusterClass {
	t.Helper()
	objs, errs := schemas.ParseFile(schemas.File{Path: "classes/standard.yaml", Data: []byte(class(variables, patches))})
	if len(errs) > 0 {
		t.Fatalf("class: %v", errs)
	}
	return objs[0].Value.(*v1alpha1.ClusterClass)
}

// TestEngineGolden applies one class patch at a time to the worker template
// of dev-1's md-0 (and, for the control-plane case, to the control plane's)
// and writes the template, what was applied and what failed, one case
// after another, to testdata/engine.golden.
func TestEngineGolden(t *testing.T) {
	cases := []struct {
		name, patches string
		controlPlane  bool
	}{
		{"add a field, and objects on the way", worker("p", "", `            - {op: add, path: /spec/gpu/model, value: a100}
            - {op: add, path: /spec/cpus, valueFrom: {variable: cpus}}
`), false},
		{"replace an existing field", worker("p", "", `            - {op: replace, path: /spec/memory, value: 8Gi}
`), false},
		{"replace a missing field fails", worker("p", "", `            - {op: replace, path: /spec/swap, value: 1Gi}
`), false},
		{"remove a field", worker("p", "", `            - {op: remove, path: /spec/memory}
`), false},
		{"remove a missing field fails", worker("p", "", `            - {op: remove, path: /spec/swap}
`), false},
		{"list: insert at an index, append, replace, remove", worker("p", "", `            - {op: add, path: /spec/disks/0, value: {size: 5Gi}}
            - {op: add, path: /spec/disks/-, value: {size: 50Gi}}
            - {op: replace, path: /spec/disks/1/size, value: 15Gi}
            - {op: remove, path: /spec/disks/2}
`), false},
		{"a list index out of range fails", worker("p", "", `            - {op: replace, path: /spec/disks/7, value: {size: 1Gi}}
`), false},
		{"replace the provider", worker("p", "", `            - {op: replace, path: /provider, value: inmemory}
`), false},
		{"object variables read by path", worker("p", "", `            - {op: add, path: /spec/pss, valueFrom: {variable: pss.enforce}}
            - {op: add, path: /spec/audit, valueFrom: {variable: "pss.audit[1]"}}
`), false},
		{"an unset variable leaves its field alone", worker("p", "", `            - {op: add, path: /spec/x, valueFrom: {variable: unset}}
`), false},
		{"builtin variables", worker("p", "", `            - {op: add, path: /spec/name, valueFrom: {variable: builtin.cluster.name}}
            - {op: add, path: /spec/version, valueFrom: {variable: builtin.machineDeployment.version}}
            - {op: add, path: /spec/pool, valueFrom: {variable: builtin.machineDeployment.topologyName}}
            - {op: add, path: /spec/replicas, valueFrom: {variable: builtin.machineDeployment.replicas}}
            - {op: add, path: /spec/domain, valueFrom: {variable: builtin.cluster.network.serviceDomain}}
`), false},
		{"templates with sprig functions; their output is YAML", worker("p", "", `            - {op: add, path: /spec/memory, valueFrom: {template: "{{ mul .cpus 2 }}Gi"}}
            - {op: add, path: /spec/cpus, valueFrom: {template: "{{ add .cpus 1 }}"}}
            - {op: add, path: /spec/label, valueFrom: {template: "{{ .builtin.cluster.name | upper }}-{{ .pss.enforce | default \"none\" }}"}}
            - {op: add, path: /spec/extra, valueFrom: {template: "{sizes: [{{ .cpus }}, 16]}"}}
`), false},
		{"a template that fails to execute", worker("p", "", `            - {op: add, path: /spec/x, valueFrom: {template: "{{ .pss.enforce.deeper }}"}}
`), false},
		{"enabledIf true", worker("p", `      enabledIf: "{{ .proxy }}"
`, `            - {op: add, path: /spec/proxy, value: on}
`), false},
		{"enabledIf false", worker("p", `      enabledIf: "{{ if .unset }}true{{ end }}"
`, `            - {op: add, path: /spec/proxy, value: on}
`), false},
		{"a selector for workers leaves the control plane alone", worker("p", "", `            - {op: add, path: /spec/x, value: 1}
`), true},
		{"the control plane's builtins", `    - name: cp
      definitions:
        - selector: {matchResources: {controlPlane: true}}
          jsonPatches:
            - {op: add, path: /spec/version, valueFrom: {variable: builtin.controlPlane.version}}
            - {op: add, path: /spec/replicas, valueFrom: {variable: builtin.controlPlane.replicas}}
`, true},
		{"openAPIV3Schema defaults: the variable's own, and its properties' at every depth", worker("p", "", `            - {op: add, path: /spec/security, valueFrom: {variable: security}}
            - {op: add, path: /spec/region, valueFrom: {variable: region}}
`), false},
		{"patches apply in order", worker("first", "", `            - {op: add, path: /spec/cpus, value: 3}
`) + worker("second", "", `            - {op: replace, path: /spec/cpus, value: 5}
`), false},
	}
	var out strings.Builder
	var untouched []string
	for _, tc := range cases {
		objs, errs := schemas.ParseFile(schemas.File{Path: "classes/standard.yaml", Data: []byte(class(variables, tc.patches))})
		if len(errs) > 0 {
			t.Fatalf("%s: class: %v", tc.name, errs)
		}
		cc := objs[0].Value.(*v1alpha1.ClusterClass)
		cc.Spec.Workers.MachineDeployments[0].Template.Spec["disks"] = []any{map[string]any{"size": "10Gi"}, map[string]any{"size": "20Gi"}}
		objs, errs = schemas.ParseFile(schemas.File{Path: "clusters/dev-1.yaml", Data: []byte(cluster)})
		if len(errs) > 0 {
			t.Fatalf("%s: cluster: %v", tc.name, errs)
		}
		c := objs[0].Value.(*v1alpha1.Cluster)
		target := patch.Target{MachineDeployment: &c.Spec.Topology.Workers.MachineDeployments[0]}
		tpl := cc.Spec.Workers.MachineDeployments[0].Template
		if tc.controlPlane {
			target, tpl = patch.Target{ControlPlane: true}, cc.Spec.ControlPlane.MachineTemplate
		}
		got, applied, failed := patch.Apply(cc, tpl, target, patch.Variables(cc, c, target))
		// Callers skip Apply where Touches says nothing applies: it must
		// then change and report nothing.
		if !patch.Touches(cc, target) {
			untouched = append(untouched, tc.name)
			if len(applied) > 0 || len(failed) > 0 || !cmp.Equal(got, tpl) {
				t.Errorf("%s: Touches is false, but Apply changed the template or failed: %v %v", tc.name, applied, failed)
			}
		}
		js, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "== %s\ntemplate: %s\n", tc.name, js)
		for _, a := range applied {
			from := ""
			switch {
			case a.Variable != "":
				from = " from variable " + a.Variable
			case a.Template != "":
				from = fmt.Sprintf(" from template %q", a.Template)
			}
			v, _ := json.Marshal(a.Value)
			fmt.Fprintf(&out, "applied %s: %s = %s%s\n", a.Field(), a.Path, v, from)
		}
		for _, e := range failed {
			fmt.Fprintf(&out, "failed %s: %v\n", e.Field, e.Err)
		}
	}
	if want := []string{"a selector for workers leaves the control plane alone"}; !cmp.Equal(untouched, want) {
		t.Errorf("cases Touches says nothing applies to: %q, want %q", untouched, want)
	}
	const golden = "testdata/engine.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./schemas/patch -update)", err)
	}
	if d := cmp.Diff(string(want), out.String()); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", golden, d)
	}
}

func TestParsePointer(t *testing.T) {
	for path, want := range map[string]string{
		"/spec/cpus":                 "spec.cpus",
		"/spec/disks/0/size":         "spec.disks[0].size",
		"/spec/disks/-":              "spec.disks[-]",
		"/spec/a~1b/c~0d":            "spec.a/b.c~d",
		"/spec/~01":                  "spec.~1", // ~0 then 1: RFC 6901 unescapes ~1 first
		"/spec/~2":                   `error: "/spec/~2" is not a JSON pointer: ~2 is no escape; write ~0 for ~ and ~1 for /`,
		"/spec/cpus~":                `error: "/spec/cpus~" is not a JSON pointer: the ~ that ends "cpus~" escapes nothing; write ~0 for ~ and ~1 for /`,
		"/spec/a~/b":                 `error: "/spec/a~/b" is not a JSON pointer: the ~ that ends "a~" escapes nothing; write ~0 for ~ and ~1 for /`,
		"/provider":                  "provider",
		"spec/cpus":                  `error: "spec/cpus" is not a JSON pointer: start it with /, like /spec/cpus`,
		"/metadata/labels":           `error: "/metadata/labels" is not in a machine template: gitfleet patches {provider, spec}, so write /spec/<field> (Cluster API's /spec/template/spec/<field> is /spec/<field> here) or /provider`,
		"/spec/template/spec/memory": `error: "/spec/template/spec/memory" is Cluster API's path into an infrastructure template: gitfleet patches the machine template {provider, spec}, so write /spec/memory`,
	} {
		p, err := patch.ParsePointer(path)
		got := ""
		if err != nil {
			got = "error: " + err.Error()
		} else {
			got = p.Dotted()
		}
		if got != want {
			t.Errorf("ParsePointer(%q) = %s, want %s", path, got, want)
		}
	}
}

// Templates render what sprig renders, but a template that asks for more
// than patch.MaxRender bytes or lists longer than patch.MaxList is an
// error naming the function, and costs no more memory than the bound: a
// gigabyte asked is not made.
func TestTemplatesAreBounded(t *testing.T) {
	for _, c := range []struct{ tpl, want string }{
		{`{{ seq 5 }}|{{ seq 5 1 }}|{{ seq 1 2 9 }}|{{ seq 9 -2 1 }}|{{ seq 1 2 -9 }}`, "1 2 3 4 5|5 4 3 2 1|1 3 5 7 9|9 7 5 3 1|"},
		{`{{ until 3 }}{{ until -2 }}{{ untilStep 0 10 3 }}`, "[0 1 2][0 -1][0 3 6 9]"},
		{`{{ repeat 3 "ab" }}|{{ indent 2 "a\nb" }}|{{ nindent 1 "c" }}`, "ababab|  a\n  b|\n c"},
		{`{{ len (until 10000) }}`, "10000"},
	} {
		if got, err := patch.Render(c.tpl, nil); err != nil || got != c.want {
			t.Errorf("%s = %q, %v; want %q", c.tpl, got, err, c.want)
		}
	}
	for _, c := range []struct{ tpl, want string }{
		{`{{ repeat 1000000000 "x" }}`, "repeat 1000000000: more than the 1048576 bytes"},
		{`{{ repeat -1 "x" }}`, "repeat: negative count -1"},
		{`{{ until 100000000 }}`, "until: a list of 100000000 numbers"},
		{`{{ until -100000000 }}`, "until: a list of 100000000 numbers"},
		{`{{ untilStep -9223372036854775808 9223372036854775807 1 }}`, "untilStep: a list of 18446744073709551615 numbers"},
		{`{{ seq 10001 }}`, "seq: a list of 10001 numbers"},
		{`{{ seq 1 1 20000 }}`, "seq: a list of 20000 numbers"},
		{`{{ indent 100000000 "x" }}`, "indent 100000000: more than"},
		{`{{ nindent 600000 "a\nb" }}`, "nindent 600000: more than"},
		{`{{ range until 10000 }}{{ repeat 200 "x" }}{{ end }}`, "the template renders more than 1048576 bytes"},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := patch.Render(c.tpl, nil)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v; want one saying %q", c.tpl, err, c.want)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 8*patch.MaxRender {
			t.Errorf("%s allocated %d bytes before it was refused", c.tpl, grew)
		}
	}
}

// TestBuiltinOnlyWhenRead: the builtin variables are built only for a
// class whose patches can read them (a builtin path, any template,
// enabledIf), and leaving them out changes no patched template.
func TestBuiltinOnlyWhenRead(t *testing.T) {
	for _, tc := range []struct {
		name, patches string
		builtin       bool
	}{
		{"a class variable by name", worker("p", "", `            - {op: add, path: /spec/cpus, valueFrom: {variable: cpus}}
            - {op: add, path: /spec/pss, valueFrom: {variable: pss.enforce}}
`), false},
		{"literal values", worker("p", "", `            - {op: add, path: /spec/gpu, value: a100}
`), false},
		{"a builtin path", worker("p", "", `            - {op: add, path: /spec/cpus, valueFrom: {variable: cpus}}
            - {op: add, path: /spec/name, valueFrom: {variable: builtin.cluster.name}}
`), true},
		{"a template", worker("p", "", `            - {op: add, path: /spec/memory, valueFrom: {template: "{{ .cpus }}Gi"}}
`), true},
		{"enabledIf", worker("p", "      enabledIf: '{{ .proxy }}'\n", `            - {op: add, path: /spec/gpu, value: a100}
`), true},
	} {
		cc := parsedClass(t, tc.patches)
		objs, errs := schemas.ParseFile(schemas.File{Path: "clusters/dev-1.yaml", Data: []byte(cluster)})
		if len(errs) > 0 {
			t.Fatalf("%s: cluster: %v", tc.name, errs)
		}
		c := objs[0].Value.(*v1alpha1.Cluster)
		target := patch.Target{MachineDeployment: &c.Spec.Topology.Workers.MachineDeployments[0]}
		vars := patch.Variables(cc, c, target)
		if _, ok := vars["builtin"]; ok != tc.builtin {
			t.Errorf("%s: builtin variables built: %v, want %v", tc.name, ok, tc.builtin)
		}
		if tc.builtin {
			continue
		}
		tpl := cc.Spec.Workers.MachineDeployments[0].Template
		got, applied, failed := patch.Apply(cc, tpl, target, vars)
		with := map[string]any{"builtin": map[string]any{"cluster": map[string]any{"name": "dev-1"}}}
		for k, v := range vars {
			with[k] = v
		}
		want, wantApplied, wantFailed := patch.Apply(cc, tpl, target, with)
		if d := cmp.Diff(want, got); d != "" || len(applied) != len(wantApplied) || len(failed) != len(wantFailed) || len(applied) == 0 {
			t.Errorf("%s: without builtin the patched template differs (-with +without):\n%s\napplied %v, want %v", tc.name, d, applied, wantApplied)
		}
	}
}

// TestClassVariablesTakesDeclaredOnly: a cluster's value replaces the
// class's default of a variable the class declares, and one it does not
// declare is left out; the same for a class of a few variables (looked up
// in its list) and one of many (in a map).
func TestClassVariablesTakesDeclaredOnly(t *testing.T) {
	for _, n := range []int{3, 40} {
		cc := &v1alpha1.ClusterClass{}
		for i := range n {
			cc.Spec.Variables = append(cc.Spec.Variables, v1alpha1.ClassVariable{Name: fmt.Sprintf("v%d", i), Default: "default"})
		}
		c := &v1alpha1.Cluster{}
		c.Spec.Topology.Variables = []v1alpha1.ClusterVariable{{Name: "v1", Value: "set"}, {Name: "undeclared", Value: "x"}}
		got := patch.ClassVariables(cc, c)
		want := map[string]any{}
		for i := range n {
			want[fmt.Sprintf("v%d", i)] = "default"
		}
		want["v1"] = "set"
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%d variables (-want +got):\n%s", n, d)
		}
	}
}

// TestInputKeyDecidesApply: clusters whose keys are equal get equal
// patched templates, errors and applied patches, over values of every type
// YAML gives and pairs a careless key would confuse (8 and "8", lists
// that join to the same text, a map's keys against its values); a cluster
// written again the same way gets the same key; and a class whose patches
// may read the builtin variables, which name the cluster, has none.
func TestInputKeyDecidesApply(t *testing.T) {
	cc := parsedClass(t, worker("p", "", `            - {op: add, path: /spec/cpus, valueFrom: {variable: cpus}}
            - {op: add, path: /spec/pss, valueFrom: {variable: pss}}
            - {op: add, path: /spec/disks/0, valueFrom: {variable: cpus}}
`))
	values := []any{nil, true, false, "true", 8, int64(8), uint64(8), 8.0, 8.5, "8", "", "a:1",
		[]any{"as", "c"}, []any{"a", "sc"}, []any{}, []any{nil}, []any{[]any{}},
		map[string]any{"a": "s"}, map[string]any{"as": ""}, map[string]any{"a": map[string]any{}}, map[string]any{}}
	type made struct {
		key     string
		out     string
		applied int
		errs    string
	}
	var all []made
	for i, cpus := range values {
		for _, pss := range []any{"restricted", []any{"ab", "c"}} {
			for _, order := range []bool{false, true} {
				vs := []v1alpha1.ClusterVariable{{Name: "cpus", Value: cpus}, {Name: "pss", Value: pss}}
				if order {
					vs[0], vs[1] = vs[1], vs[0]
				}
				c := &v1alpha1.Cluster{}
				c.Spec.Topology.Variables = vs
				md := v1alpha1.MachineDeploymentTopology{Class: "w", Name: fmt.Sprintf("md-%d", i)}
				target := patch.Target{MachineDeployment: &md}
				key, ok := patch.InputKey(cc, c, target)
				if !ok {
					t.Fatalf("cpus %#v: no key", cpus)
				}
				again := &v1alpha1.Cluster{}
				again.Spec.Topology.Variables = append([]v1alpha1.ClusterVariable(nil), vs...)
				if k, _ := patch.InputKey(cc, again, target); k != key {
					t.Errorf("cpus %#v: the same cluster written again has key %q, not %q", cpus, k, key)
				}
				out, applied, failed := patch.Apply(cc, cc.Spec.Workers.MachineDeployments[0].Template, target, patch.Variables(cc, c, target))
				spec, err := json.Marshal(out)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, made{key, string(spec), len(applied), fmt.Sprint(failed)})
			}
		}
	}
	distinct := map[string]bool{}
	for i, a := range all {
		distinct[a.key] = true
		for _, b := range all[:i] {
			if a.key == b.key && (a.out != b.out || a.applied != b.applied || a.errs != b.errs) {
				t.Errorf("key %q for two clusters patched apart:\n%s %d %s\n%s %d %s", a.key, a.out, a.applied, a.errs, b.out, b.applied, b.errs)
			}
		}
	}
	// Each value and order is its own key: the variables as written.
	if len(distinct) != len(all) {
		t.Errorf("%d keys for %d clusters written apart", len(distinct), len(all))
	}

	for _, tc := range []struct {
		name, patches string
		keyed         bool
	}{
		{"a builtin path", worker("p", "", `            - {op: add, path: /spec/name, valueFrom: {variable: builtin.cluster.name}}
`), false},
		{"a template", worker("p", "", `            - {op: add, path: /spec/memory, valueFrom: {template: "{{ .cpus }}Gi"}}
`), false},
		{"a literal", worker("p", "", `            - {op: add, path: /spec/gpu, value: a100}
`), true},
	} {
		cc := parsedClass(t, tc.patches)
		c := &v1alpha1.Cluster{}
		md := v1alpha1.MachineDeploymentTopology{Class: "w", Name: "md-0"}
		if _, ok := patch.InputKey(cc, c, patch.Target{MachineDeployment: &md}); ok != tc.keyed {
			t.Errorf("%s: keyed %v, want %v", tc.name, ok, tc.keyed)
		}
		// The control plane, which no patch touches, is the class's
		// template whatever the cluster.
		if k, ok := patch.InputKey(cc, c, patch.Target{ControlPlane: true}); !ok || k == "" {
			t.Errorf("%s: control plane keyed %v, %q", tc.name, ok, k)
		}
	}
}
