package sources_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/sources"
)

func kustomizeRepo(t *testing.T) *gittest.Repo {
	work := gittest.NewRepo(t)
	work.Commit("base and two overlays", map[string]string{
		"classes/standard.yaml":             classYAML,
		"base/kustomization.yaml":           "resources: [cluster.yaml]\n",
		"base/cluster.yaml":                 cluster("edge"),
		"overlays/prod/kustomization.yaml":  "resources: [../../base]\nnamePrefix: prod-\nlabels:\n- pairs: {env: prod}\n",
		"overlays/stage/kustomization.yaml": "resources: [../../base]\nnamePrefix: stage-\n",
	})
	return work
}

func TestKustomizationsAreRenderedAndNameTheirSources(t *testing.T) {
	ctx := context.Background()
	work := kustomizeRepo(t)
	r := open(t, work.Dir)
	files, err := r.Files(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := paths(files), []string{"classes/standard.yaml", "base/cluster.yaml", "base/cluster.yaml"}; !slices.Equal(got, want) {
		t.Fatalf("Files = %v, want %v (each overlay's rendering named after its source)", got, want)
	}
	rendered := string(files[1].Data) + string(files[2].Data)
	for _, want := range []string{"name: prod-edge", "env: prod", "name: stage-edge"} {
		if !strings.Contains(rendered, want) {
			t.Errorf("rendered output lacks %q:\n%s", want, rendered)
		}
	}
	if strings.Contains(rendered, "config.kubernetes.io/origin") {
		t.Errorf("origin annotations leaked into the objects:\n%s", rendered)
	}
	rev, err := r.Revision(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if rev.Rejected() || len(rev.Fleet.Clusters) != 2 {
		t.Fatalf("revision: err %v, fleet %+v", rev.Err, rev.Fleet)
	}

	work.Commit("bad version in the base", map[string]string{"base/cluster.yaml": "# the edge clusters\n\n" + strings.Replace(cluster("edge"), "v1.30.2", "v1.30", 1)})
	rev, err = r.Revision(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	// Line 10 of the source file, not line 8 of kustomize's output.
	if !rev.Rejected() || len(rev.Errors) == 0 || !strings.HasPrefix(rev.Errors[0].Error(), "base/cluster.yaml:10:14: spec.topology.version:") {
		t.Errorf("errors = %v, want base/cluster.yaml:10:14: spec.topology.version", rev.Errors)
	}
}

// TestKustomizeRefusesRemoteOutsideAndPlugins: what a kustomization may
// not do is refused once, at the file, line, column and field that does
// it (the path was said twice, with no line).
func TestKustomizeRefusesRemoteOutsideAndPlugins(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		files map[string]string
		want  string
	}{
		"remote base": {map[string]string{"app/kustomization.yaml": "# the app\nresources:\n- https://github.com/example/fleet//base?ref=v1\n"},
			`app/kustomization.yaml:3:3: resources: remote base "https://github.com/example/fleet//base?ref=v1" refused`},
		"outside": {map[string]string{"app/kustomization.yaml": "resources: [../../../etc]\n"},
			`app/kustomization.yaml:1:13: resources: "../../../etc" is outside the repository`},
		"exec plugin": {map[string]string{
			"app/kustomization.yaml": "generators: [gen.yaml]\n",
			"app/gen.yaml":           "apiVersion: example.com/v1\nkind: Gen\nmetadata:\n  name: g\n  annotations:\n    config.kubernetes.io/function: |\n      exec:\n        path: ./gen.sh\n",
		}, "app/kustomization.yaml:1:14: app/gen.yaml is an exec or container plugin (config.kubernetes.io/function), which gitfleet does not run"},
		"helm": {map[string]string{"app/kustomization.yaml": "namespace: x\nhelmCharts:\n- name: x\n"},
			"app/kustomization.yaml:2:1: helmCharts: Helm runs a program"},
		"missing": {map[string]string{"app/kustomization.yaml": "resources:\n  - ../classes/standard.yaml\n  - nope.yaml\n"},
			`app/kustomization.yaml:3:5: resources: "nope.yaml" does not exist at this revision: fix the path, or commit the file`},
		// The line that names it whole, not one that names a longer path.
		"missing, a longer one listed first": {map[string]string{"app/kustomization.yaml": "resources: [../classes/standard.yaml]\nbases:\n  - ../class\n"},
			`app/kustomization.yaml:3:5: bases: "../class" does not exist at this revision`},
		"not YAML": {map[string]string{"app/kustomization.yaml": "resources:\n- a.yaml\n- [\n"},
			"app/kustomization.yaml:3: not valid YAML: did not find expected node content"},
	} {
		t.Run(name, func(t *testing.T) {
			work := gittest.NewRepo(t)
			tc.files["classes/standard.yaml"] = classYAML
			work.Commit(name, tc.files)
			rev, err := open(t, work.Dir).Revision(ctx, "main")
			if err != nil {
				t.Fatal(err)
			}
			if !rev.Rejected() || len(rev.Errors) != 1 || !strings.HasPrefix(rev.Errors[0].Error(), tc.want) {
				t.Errorf("errors = %v, want one: %s", rev.Errors, tc.want)
			}
		})
	}
}

func TestValidateRevAndDir(t *testing.T) {
	ctx := context.Background()
	work := kustomizeRepo(t)
	tagged := work.Head()
	work.Git("tag", "good")
	work.Commit("break a cluster", map[string]string{"base/cluster.yaml": strings.Replace(cluster("edge"), "name: standard", "name: missing", 1)})

	fleet, errs, err := sources.ValidateRev(ctx, work.Dir, "good", sources.ValidateOptions{})
	if err != nil || len(errs) != 0 || len(fleet.Clusters) != 2 {
		t.Errorf("ValidateRev(good %s) = %v clusters, %v, %v", tagged[:8], fleet, errs, err)
	}
	_, errs, err = sources.ValidateRev(ctx, work.Dir, "main", sources.ValidateOptions{})
	if err != nil || len(errs) == 0 || errs[0].Path != "base/cluster.yaml" {
		t.Errorf("ValidateRev(main) errors = %v, %v; want base/cluster.yaml", errs, err)
	}
	if _, _, err := sources.ValidateRev(ctx, work.Dir, "nope", sources.ValidateOptions{}); err == nil {
		t.Error("ValidateRev(nope) succeeded")
	}

	// The working tree, uncommitted edits included.
	work.Write(map[string]string{"base/cluster.yaml": cluster("edge")})
	fleet, errs, err = sources.ValidateDir(ctx, work.Dir, sources.ValidateOptions{})
	if err != nil || len(errs) != 0 || len(fleet.Clusters) != 2 {
		t.Errorf("ValidateDir after fixing = %v, %v, %v", fleet, errs, err)
	}
}

// TestKustomizedErrorInALaterDocument: an error in the second document of
// a file a kustomization renders is placed at that document's line, not
// at the same field of the first document (both have metadata.name), also
// when the kustomization prefixes the names.
func TestKustomizedErrorInALaterDocument(t *testing.T) {
	c := clusterAndBadHealthCheck()
	for _, kustomization := range []string{"resources: [c.yaml]\n", "namePrefix: eu-\nresources: [c.yaml]\n"} {
		work := gittest.NewRepo(t)
		work.Commit("fleet", map[string]string{"classes/standard.yaml": classYAML, "app/kustomization.yaml": kustomization, "app/c.yaml": c})
		if at, want := namesAt(t, work.Dir), []string{"app/c.yaml:13:9"}; !slices.Equal(at, want) {
			t.Errorf("with %q: metadata.name errors at %v, want %v", kustomization, at, want)
		}
	}
}

// TestKustomizedErrorInASharedBase: a base two overlays render (one making
// the Cluster longer with a patch) has two outputs; an error in either
// overlay's MachineHealthCheck is placed at the base's MachineHealthCheck,
// not at the Cluster's field of the same name.
func TestKustomizedErrorInASharedBase(t *testing.T) {
	c := clusterAndBadHealthCheck()
	long := `namePrefix: a-
resources: [../../base]
patches:
- target: {kind: Cluster}
  patch: |
    - op: add
      path: /metadata/labels
      value: {l1: x, l2: x, l3: x, l4: x, l5: x, l6: x, l7: x, l8: x, l9: x, l10: x, l11: x, l12: x}
`
	work := gittest.NewRepo(t)
	work.Commit("fleet", map[string]string{"classes/standard.yaml": classYAML, "base/kustomization.yaml": "resources: [c.yaml]\n", "base/c.yaml": c,
		"overlays/a/kustomization.yaml": long, "overlays/b/kustomization.yaml": "namePrefix: b-\nresources: [../../base]\n"})
	if at, want := namesAt(t, work.Dir), []string{"base/c.yaml:13:9", "base/c.yaml:13:9"}; !slices.Equal(at, want) {
		t.Errorf("metadata.name errors at %v, want %v", at, want)
	}
}

// clusterAndBadHealthCheck is a file of a Cluster a and, on its line 13, a
// MachineHealthCheck whose metadata.name (A-Workers) is not a DNS name.
func clusterAndBadHealthCheck() string {
	return cluster("a") + `---
apiVersion: gitfleet.io/v1alpha1
kind: MachineHealthCheck
metadata:
  name: A-Workers
spec:
  clusterName: a
  selector:
    matchLabels:
      gitfleet.io/deployment: md-0
`
}

// namesAt are where the errors of main's revision in the repository at dir
// place a metadata.name, as path:line:col.
func namesAt(t *testing.T, dir string) []string {
	t.Helper()
	rev, err := open(t, dir).Revision(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	var at []string
	for _, e := range rev.Errors {
		if e.Field == "metadata.name" {
			at = append(at, fmt.Sprintf("%s:%d:%d", e.Path, e.Line, e.Col))
		}
	}
	return at
}

// TestKustomizedValueIsPlacedWhereItIsWritten: a value an overlay's patch
// sets is not in the base's file; its error was placed at the base's line
// of the field, which holds another value. It is placed at the patch that
// writes it — a patch file, an inline JSON 6902 or strategic merge patch —
// and, where no patch writes it as it is, at no line of the base, saying
// that the kustomization's rendering sets it.
func TestKustomizedValueIsPlacedWhereItIsWritten(t *testing.T) {
	const msg = `spec.topology.version: "v1.31" is not a Kubernetes version like v1.31.2`
	for name, tc := range map[string]struct {
		overlay map[string]string
		want    string
	}{
		"patch file": {map[string]string{
			"overlays/prod/kustomization.yaml": "resources: [../../base]\npatches:\n- path: version.yaml\n",
			"overlays/prod/version.yaml":       "apiVersion: gitfleet.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: edge\nspec:\n  topology:\n    version: v1.31\n",
		}, "overlays/prod/version.yaml:7:14: " + msg + " (a kustomize patch sets it on base/cluster.yaml)"},
		"inline JSON 6902": {map[string]string{
			"overlays/prod/kustomization.yaml": "resources: [../../base]\npatches:\n- target: {kind: Cluster}\n  patch: |\n    - op: replace\n      path: /spec/topology/version\n      value: v1.31\n",
		}, "overlays/prod/kustomization.yaml:7:14: " + msg + " (a kustomize patch sets it on base/cluster.yaml)"},
		"inline strategic merge, the parent added": {map[string]string{
			"overlays/prod/kustomization.yaml": "resources: [../../base]\npatches:\n- patch: |-\n    apiVersion: gitfleet.io/v1alpha1\n    kind: Cluster\n    metadata: {name: edge}\n    spec: {topology: {version: v1.31}}\n",
		}, "overlays/prod/kustomization.yaml:7:32: " + msg + " (a kustomize patch sets it on base/cluster.yaml)"},
		"another overlay renders the base as written": {map[string]string{
			"overlays/a/kustomization.yaml": "resources: [../../base]\nnamePrefix: a-\n",
			"overlays/b/kustomization.yaml": "resources: [../../base]\nnamePrefix: b-\npatches:\n- target: {kind: Cluster}\n  patch: |\n    - op: replace\n      path: /spec/topology/version\n      value: v1.31\n",
		}, "overlays/b/kustomization.yaml:8:14: " + msg + " (a kustomize patch sets it on base/cluster.yaml)"},
		"no patch writes it": {map[string]string{
			"overlays/prod/kustomization.yaml": "resources: [../../base]\nreplacements:\n- source: {kind: Cluster, fieldPath: metadata.labels.env}\n  targets:\n  - select: {kind: Cluster}\n    fieldPaths: [spec.topology.version]\n",
		}, `base/cluster.yaml: spec.topology.version: "v1.31" is not a Kubernetes version like v1.31.2 (kustomize's rendering of overlays/prod/kustomization.yaml sets the value; it is not written in this file)`},
	} {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{
				"classes/standard.yaml":   classYAML,
				"base/kustomization.yaml": "resources: [cluster.yaml]\n",
				"base/cluster.yaml":       strings.Replace(cluster("edge"), "metadata:\n", "metadata:\n  labels: {env: v1.31}\n", 1),
			}
			maps.Copy(files, tc.overlay)
			work := gittest.NewRepo(t)
			work.Commit(name, files)
			rev, err := open(t, work.Dir).Revision(context.Background(), "main")
			if err != nil {
				t.Fatal(err)
			}
			if !rev.Rejected() || len(rev.Errors) != 1 || rev.Errors[0].Error() != tc.want {
				t.Errorf("errors = %v\nwant one: %s", rev.Errors, tc.want)
			}
		})
	}
}
