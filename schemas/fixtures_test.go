package schemas

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/fixtures"
)

var update = flag.Bool("update", false, "rewrite the expected.txt of every broken fixture")

const brokenDir = "../fixtures/broken"

// TestBrokenFixtures: every broken fleet yields exactly its expected errors.
func TestBrokenFixtures(t *testing.T) {
	entries, err := os.ReadDir(brokenDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			dir := filepath.Join(brokenDir, e.Name())
			fleet, err := fixtures.Overlay(os.DirFS(dir))
			if err != nil {
				t.Fatal(err)
			}
			_, errs := Load(filesOf(fleet))
			got := errs.Error() + "\n"
			if len(errs) == 0 {
				t.Fatalf("a broken fleet validated cleanly")
			}
			golden := filepath.Join(dir, fixtures.ExpectedFile)
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if d := cmp.Diff(string(want), got); d != "" {
				t.Errorf("errors differ from %s (-want +got):\n%s", golden, d)
			}
		})
	}
	if n < 20 {
		t.Errorf("only %d broken fixtures", n)
	}
}

func TestInitFleetIsValid(t *testing.T) {
	fleet, err := fixtures.Overlay(os.DirFS(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	f, errs := Load(filesOf(fleet))
	if len(errs) > 0 {
		t.Fatalf("the init fleet has errors:\n%v", errs)
	}
	var names []string
	for _, c := range f.Clusters {
		names = append(names, c.Metadata.Name+"@"+c.Source.String())
	}
	if want := []string{"dev-1@clusters/dev-1.yaml:1", "prod-1@clusters/prod-1.yaml:1"}; !slices.Equal(names, want) {
		t.Errorf("clusters = %v, want %v", names, want)
	}
	if len(f.Classes) != 1 || len(f.HealthChecks) != 1 || f.Config.Spec.StatusBranch != "gitfleet/status" {
		t.Errorf("fleet = %d classes, %d health checks, config %+v", len(f.Classes), len(f.HealthChecks), f.Config.Spec)
	}
	prod := f.Cluster("prod-1")
	if v := prod.Spec.Topology.Variables[0].Value; v != int64(4) {
		t.Errorf("variable value = %#v, want int64 4", v)
	}
}

// TestLoadSkipsWhatIsNotAFleetDocument: Load gets every file of a revision
// from the sources package, so it skips the same files ReadDir does.
func TestLoadSkipsWhatIsNotAFleetDocument(t *testing.T) {
	fleet, err := fixtures.Overlay(os.DirFS(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	fleet["gitfleet.yaml"] = []byte(header + "kind: FleetConfig\n") // no spec.paths: the whole tree
	fleet[".github/workflows/ci.yaml"] = []byte("on: push\n")
	fleet["clusters/kustomization.yaml"] = []byte("resources: [dev-1.yaml]\n")
	fleet["README.md"] = []byte("# fleet\n")
	if _, errs := Load(filesOf(fleet)); len(errs) > 0 {
		t.Fatalf("errors:\n%v", errs)
	}
}

// TestReadDirAndLoadTakeUpperCaseExtensions: a cluster in prod-1.YAML (or
// .Yml) is read like one in prod-1.yaml; it was skipped, and the cluster
// silently did not exist.
func TestReadDirAndLoadTakeUpperCaseExtensions(t *testing.T) {
	fleet, err := fixtures.Overlay(os.DirFS(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for p, data := range fleet {
		p = strings.Replace(p, "prod-1.yaml", "prod-1.YAML", 1)
		p = strings.Replace(p, "dev-1.yaml", "dev-1.Yml", 1)
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, errs := Load(files)
	if len(errs) > 0 {
		t.Fatalf("errors:\n%v", errs)
	}
	var names []string
	for _, c := range f.Clusters {
		names = append(names, c.Metadata.Name+"@"+c.Source.Path)
	}
	if want := []string{"dev-1@clusters/dev-1.Yml", "prod-1@clusters/prod-1.YAML"}; !slices.Equal(names, want) {
		t.Errorf("clusters = %v, want %v", names, want)
	}
}

func TestConfigFieldError(t *testing.T) {
	cfg := File{Path: ConfigFile, Data: []byte(header + "kind: FleetConfig\nspec:\n  paths:\n    - a\n    - b\n")}
	if got := ConfigFieldError(cfg, "spec.paths[1]", "no").Error(); got != "gitfleet.yaml:6:7: spec.paths[1]: no" {
		t.Errorf("got %q", got)
	}
	if got := ConfigFieldError(File{Path: ConfigFile, Data: []byte("{")}, "spec.paths[1]", "no").Error(); got != "gitfleet.yaml: spec.paths[1]: no" {
		t.Errorf("unparsable config: got %q", got)
	}
}

func filesOf(m map[string][]byte) []File {
	var files []File
	for p, data := range m {
		files = append(files, File{Path: p, Data: data})
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files
}
