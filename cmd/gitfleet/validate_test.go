package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/fixtures"
)

const brokenDir = "../../fixtures/broken"

// TestValidateBrokenFleets introduces each mistake of fixtures/broken into
// a fleet made by init: validate exits 1 and prints exactly the expected
// lines, each naming the file and line.
func TestValidateBrokenFleets(t *testing.T) {
	entries, err := os.ReadDir(brokenDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		t.Run(e.Name(), func(t *testing.T) {
			caseDir := filepath.Join(brokenDir, e.Name())
			files, noBase, err := fixtures.CaseFiles(os.DirFS(caseDir))
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "fleet")
			if noBase {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			} else if code, _, stderr := runCmd(t, "init", dir); code != 0 {
				t.Fatalf("init: %s", stderr)
			}
			for p, data := range files {
				dst := filepath.Join(dir, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(dst, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(filepath.Join(caseDir, fixtures.ExpectedFile))
			if err != nil {
				t.Fatal(err)
			}
			// The second run finds the verdicts of the first (and of the
			// init fleet's files, from other cases) in the cache; the
			// third has none: all three must say the same.
			for _, cache := range []string{"first", "second", "off"} {
				if cache == "off" {
					t.Setenv("GITFLEET_CACHE", "off")
				}
				code, stdout, stderr := runCmd(t, "validate", dir)
				if code != 1 {
					t.Fatalf("validate (%s cache) exit %d, want 1\n%s%s", cache, code, stdout, stderr)
				}
				if stdout != string(want) {
					t.Errorf("validate (%s cache) printed\n%s\nwant\n%s", cache, stdout, want)
				}
			}
			code, stdout, stderr := runCmd(t, "validate", dir)
			if code != 1 {
				t.Fatalf("validate exit %d, want 1\n%s%s", code, stdout, stderr)
			}
			for p := range files {
				// A required variable added to the class is missing in the
				// clusters: the error is theirs, not the class's.
				if !noBase && e.Name() != "required-variable" && !strings.Contains(stdout, p+":") {
					t.Errorf("no error names the changed file %s", p)
				}
			}
		})
	}
}

func TestValidateJSON(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fleet")
	if code, _, stderr := runCmd(t, "init", dir); code != 0 {
		t.Fatal(stderr)
	}
	bad := "apiVersion: gitfleet.io/v1alpha1\nkind: Cluster\nmetadata: {name: x}\nspec:\n  topology: {classRef: {name: nope}}\n"
	if err := os.WriteFile(filepath.Join(dir, "clusters", "x.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := runCmd(t, "validate", "--format", "json", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	var out struct {
		OK     bool
		Errors []struct {
			Path    string
			Line    int
			Field   string
			Message string
		}
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if out.OK || len(out.Errors) != 1 || out.Errors[0].Path != "clusters/x.yaml" || out.Errors[0].Line != 5 || out.Errors[0].Field != "spec.topology.classRef.name" {
		t.Errorf("json = %+v", out)
	}
}

func TestValidateSkipsGitAndOtherFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fleet")
	if code, _, stderr := runCmd(t, "init", dir); code != 0 {
		t.Fatal(stderr)
	}
	// Not fleet documents: a README, a YAML file outside spec.paths, a
	// kustomization.
	for p, s := range map[string]string{
		"README.md":                      "# my fleet\n",
		"ci/pipeline.yaml":               "steps: [build]\n",
		"clusters/kustomization.yaml":    "resources: [dev-1.yaml]\n",
		".github/workflows/validate.yml": "on: push\n",
	} {
		dst := filepath.Join(dir, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if err := os.WriteFile(dst, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, stdout, stderr := runCmd(t, "validate", dir); code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
}

func TestValidateFlags(t *testing.T) {
	if code, _, stderr := runCmd(t, "validate", "--format", "xml", t.TempDir()); code != 1 || !strings.Contains(stderr, "use text or json") {
		t.Errorf("--format xml: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runCmd(t, "validate", filepath.Join(t.TempDir(), "missing")); code != 1 || !strings.Contains(stderr, "no such file") {
		t.Errorf("missing dir: exit %d, %q", code, stderr)
	}
}
