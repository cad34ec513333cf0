package planner

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPure fails when planner imports anything but the standard library,
// the fleet API types, the wire constants, the patch engine with what it
// uses (sprig's template functions, of which the engine takes the hermetic
// set, and YAML), internal/layered (a map type of the standard library
// alone) and internal/valuekey (the patch engine's keys of values, the
// standard library alone): no NATS, git or providers.
func TestPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"github.com/gitfleet/gitfleet/planner":           true,
		"github.com/gitfleet/gitfleet/schemas/v1alpha1":  true,
		"github.com/gitfleet/gitfleet/schemas/wire":      true,
		"github.com/gitfleet/gitfleet/schemas/patch":     true,
		"github.com/gitfleet/gitfleet/internal/layered":  true,
		"github.com/gitfleet/gitfleet/internal/valuekey": true,
		"gopkg.in/yaml.v3":                               true,
	}
	// sprig/v3 and the modules it imports.
	sprig := []string{"github.com/Masterminds/", "dario.cat/mergo", "github.com/google/uuid", "github.com/huandu/xstrings",
		"github.com/mitchellh/copystructure", "github.com/mitchellh/reflectwalk", "github.com/shopspring/decimal",
		"github.com/spf13/cast", "golang.org/x/crypto/"}
	for _, p := range strings.Fields(string(out)) {
		if !allowed[p] && !slices.ContainsFunc(sprig, func(prefix string) bool { return strings.HasPrefix(p, prefix) }) {
			t.Errorf("planner depends on %s; it must stay pure (standard library, schemas/v1alpha1, schemas/wire, schemas/patch, internal/layered, internal/valuekey)", p)
		}
	}
}
