package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// planLine finds `gitfleet plan ...` up to its redirection in a CI file.
var planLine = regexp.MustCompile(`gitfleet plan ([^>\n]*)>`)

// The pull request templates under deploy/ci are valid YAML, run a plan
// command this binary accepts (run here against a real repository, with the
// base and head the CI would give), and find their own comment again by a
// marker that the comment they post starts with.
func TestCITemplatesRunARealPlan(t *testing.T) {
	dir := fleetRepo(t)
	branch(t, dir, "bump", map[string][2]string{"classes/standard.yaml": {"version: v1.31.2", "version: v1.32.0"}})
	base := strings.TrimSpace(gitCLI(t, dir, "rev-parse", "main"))
	for _, name := range []string{"github-actions-plan.yaml", "gitlab-ci-plan.yaml"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "ci", name))
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := yaml.Unmarshal(data, &doc); err != nil {
				t.Fatalf("%s is not YAML: %v", name, err)
			}
			m := planLine.FindStringSubmatch(string(data))
			if m == nil {
				t.Fatalf("%s runs no gitfleet plan", name)
			}
			var args []string
			for _, a := range strings.Fields(m[1]) {
				a = strings.Trim(a, `"`)
				switch a {
				case "$BASE":
					a = base
				case "$HEAD", "HEAD":
					a = "bump"
				case ".":
					a = dir
				}
				args = append(args, a)
			}
			code, stdout, stderr := runCmd(t, append([]string{"plan"}, args...)...)
			if code != 0 {
				t.Fatalf("gitfleet plan %s: exit %d: %s", strings.Join(args, " "), code, stderr)
			}
			for _, want := range []string{"### gitfleet plan", "```diff\n- class standard: spec.version: v1.31.2\n+ class standard: spec.version: v1.32.0\n```", "Merging: "} {
				if !strings.Contains(stdout, want) {
					t.Errorf("the comment lacks %q:\n%s", want, stdout)
				}
			}
			if n := strings.Count(string(data), "<!-- gitfleet-plan -->"); n != 1 || !strings.Contains(string(data), "marker") {
				t.Errorf("%s does not mark its comment once (%d) to update it on the next push", name, n)
			}
		})
	}
}
