package planner

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPure fails when planner imports anything but the standard library,
// the fleet API types and the wire constants: no NATS, git or providers.
func TestPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"github.com/gitfleet/gitfleet/planner":          true,
		"github.com/gitfleet/gitfleet/schemas/v1alpha1": true,
		"github.com/gitfleet/gitfleet/schemas/wire":     true,
	}
	for _, p := range strings.Fields(string(out)) {
		if !allowed[p] {
			t.Errorf("planner depends on %s; it must stay pure (standard library, schemas/v1alpha1, schemas/wire)", p)
		}
	}
}
