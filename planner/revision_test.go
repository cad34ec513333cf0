package planner

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// richClass sets every field of a ClusterClass (TestRichClassSetsEveryField
// holds it to that).
const richClass = `{
  "apiVersion": "gitfleet.io/v1alpha1", "kind": "ClusterClass",
  "metadata": {"name": "standard", "labels": {"team": "a"}, "annotations": {"note": "a"}},
  "spec": {
    "version": "v1.30.2",
    "kubernetesVersions": ["v1.29.4", "v1.30.2"],
    "controlPlane": {
      "metadata": {"labels": {"role": "cp"}, "annotations": {"cp": "yes"}},
      "machineTemplate": {"provider": "inmemory", "spec": {"cpus": 2}},
      "healthCheck": {
        "checks": {"nodeStartupTimeoutSeconds": 300,
          "unhealthyNodeConditions": [{"type": "Ready", "status": "Unknown", "timeoutSeconds": 30}]},
        "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": "40%", "unhealthyInRange": "[1-3]"}, "maxInFlight": 1}
      }
    },
    "workers": {"machineDeployments": [{
      "class": "default",
      "metadata": {"labels": {"role": "worker"}, "annotations": {"w": "yes"}},
      "template": {"provider": "inmemory", "spec": {"cpus": 4}},
      "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}},
        "after": "2026-01-01T00:00:00Z"},
      "deletion": {"order": "Newest"},
      "minReadySeconds": 10,
      "machineNaming": {"template": "{{ .machineSet.name }}-{{ .random }}"},
      "healthCheck": {
        "checks": {"nodeStartupTimeoutSeconds": 600,
          "unhealthyNodeConditions": [{"type": "Ready", "status": "False", "timeoutSeconds": 60}]},
        "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": 2, "unhealthyInRange": "[1-2]"}, "maxInFlight": "50%"}
      }
    }]},
    "variables": [{"name": "cpus", "required": true, "constraint": "int & >=1",
      "schema": {"openAPIV3Schema": {"type": "integer", "default": 4}}, "default": 4}],
    "patches": [{"name": "cpus", "description": "workers' cpus", "enabledIf": "{{ true }}",
      "definitions": [{
        "selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "InMemoryMachineTemplate",
          "matchResources": {"controlPlane": true, "machineDeploymentClass": {"names": ["default"]}}},
        "jsonPatches": [{"op": "add", "path": "/spec/cpus", "value": 3, "valueFrom": {"variable": "cpus", "template": "{{ .cpus }}"}}]
      }]}],
    "rollout": {
      "waves": [{"name": "canary", "selector": {"matchLabels": {"tier": "canary"},
        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}, "maxConcurrent": "50%"}],
      "maxFailures": 2
    }
  }
}`

// leftOut are the fields (JSON paths, [] for any index) classRevision
// leaves out: they change no machine.
var leftOut = regexp.MustCompile(`^(spec\.rollout\..*|spec\.patches\[\]\.description|metadata\.(labels|annotations)\..*)$`)

// TestClassRevisionCoversTheClass changes each value of a class that sets
// every field, one at a time: the class revision changes with each,
// unless the field is one classRevision leaves out, which changes no
// machine.
func TestClassRevisionCoversTheClass(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal([]byte(richClass), &doc); err != nil {
		t.Fatal(err)
	}
	rev := func(doc any) string {
		t.Helper()
		b, _ := json.Marshal(doc)
		var cc v1alpha1.ClusterClass
		if err := json.Unmarshal(b, &cc); err != nil {
			t.Fatalf("%v in %s", err, b)
		}
		return classRevision(&cc)
	}
	base := rev(doc)
	n := 0
	for _, leaf := range leaves(doc, "") {
		if leaf.path == "apiVersion" || leaf.path == "kind" {
			continue
		}
		n++
		old := leaf.set(mutated(leaf.get()))
		changed := rev(doc) != base
		leaf.set(old)
		generic := regexp.MustCompile(`\[\d+\]`).ReplaceAllString(leaf.path, "[]")
		switch {
		case leftOut.MatchString(generic) && changed:
			t.Errorf("%s changes no machine, yet changes the class revision", leaf.path)
		case !leftOut.MatchString(generic) && !changed:
			t.Errorf("%s does not change the class revision", leaf.path)
		}
	}
	if n < 40 {
		t.Errorf("only %d values changed; richClass lost some", n)
	}
}

// TestRichClassSetsEveryField: every field of ClusterClass's spec (and its
// name) is set in richClass, so that TestClassRevisionCoversTheClass tries
// a field the spec gains.
func TestRichClassSetsEveryField(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal([]byte(richClass), &doc); err != nil {
		t.Fatal(err)
	}
	var missing []string
	unset(reflect.TypeFor[v1alpha1.ClusterClassSpec](), doc["spec"], "spec", &missing)
	if len(missing) > 0 {
		t.Errorf("richClass leaves unset: %s; set them", strings.Join(missing, ", "))
	}
}

// unset lists the fields of type typ that value v, decoded from JSON,
// does not set.
func unset(typ reflect.Type, v any, path string, missing *[]string) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if v == nil {
		*missing = append(*missing, path)
		return
	}
	if typ == reflect.TypeFor[time.Time]() || typ == reflect.TypeFor[v1alpha1.IntOrPercent]() {
		return
	}
	switch typ.Kind() {
	case reflect.Struct:
		m, _ := v.(map[string]any)
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-" || !f.IsExported():
			case f.Anonymous && name == "":
				unset(f.Type, v, path, missing)
			default:
				unset(f.Type, m[name], path+"."+name, missing)
			}
		}
	case reflect.Slice:
		if s, _ := v.([]any); len(s) > 0 {
			unset(typ.Elem(), s[0], path+"[0]", missing)
		} else {
			*missing = append(*missing, path)
		}
	case reflect.Map:
		if m, _ := v.(map[string]any); len(m) == 0 {
			*missing = append(*missing, path)
		}
	}
}

type leaf struct {
	path string
	get  func() any
	set  func(any) any // returns the value it replaced
}

// leaves lists every scalar of a decoded JSON document, in path order.
func leaves(v any, path string) []leaf {
	var out []leaf
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if sub := leaves(v[k], p); sub != nil {
				out = append(out, sub...)
				continue
			}
			out = append(out, leaf{path: p, get: func() any { return v[k] },
				set: func(n any) any { o := v[k]; v[k] = n; return o }})
		}
	case []any:
		for i := range v {
			p := fmt.Sprintf("%s[%d]", path, i)
			if sub := leaves(v[i], p); sub != nil {
				out = append(out, sub...)
				continue
			}
			out = append(out, leaf{path: p, get: func() any { return v[i] },
				set: func(n any) any { o := v[i]; v[i] = n; return o }})
		}
	default:
		return nil
	}
	return out
}

// mutated is another value of v's kind that still decodes into the
// field: a later time, a larger percentage, another string, number or
// truth.
func mutated(v any) any {
	switch v := v.(type) {
	case string:
		if at, err := time.Parse(time.RFC3339, v); err == nil {
			return at.Add(time.Second).Format(time.RFC3339)
		}
		if n, ok := strings.CutSuffix(v, "%"); ok {
			if p, err := strconv.Atoi(n); err == nil {
				return strconv.Itoa(p+1) + "%"
			}
		}
		return v + "x"
	case float64:
		return v + 1
	case bool:
		return !v
	}
	return v
}

// TestLegacyRevisionIsTheOldOne pins the revision gitfleet computed before
// the class revision covered the whole class (what the records it wrote
// say), of threeWaves' class; the class revision itself differs.
func TestLegacyRevisionIsTheOldOne(t *testing.T) {
	cc := threeWaves().Classes[0]
	if got := legacyRevision(cc); got != "5862f73fd4" {
		t.Errorf("legacyRevision = %s, want 5862f73fd4 (as computed before)", got)
	}
	if classRevision(cc) == legacyRevision(cc) {
		t.Error("the class revision is the legacy one")
	}
}
