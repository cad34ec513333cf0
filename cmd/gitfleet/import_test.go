package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestImportCAPIThenValidate: gitfleet import capi writes fleet files and
// its report, and gitfleet validate accepts them as written; run twice into
// the same folder it refuses to overwrite them; "import" of anything but
// capi is a usage error.
func TestImportCAPIThenValidate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "fleet")
	src := filepath.Join("..", "..", "capi", "testdata", "v1beta2")
	code, stdout, stderr := runCmd(t, "import", "capi", "--provider", "inmemory", "-o", out, src)
	if code != 0 {
		t.Fatalf("import exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"clusterclass.yaml:10: ClusterClass/quick-start spec.controlPlane.templateRef: dropped:",
		"wrote classes/quick-start.yaml", "wrote clusters/development.yaml", "fields dropped",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
	if code, stdout, stderr := runCmd(t, "validate", out); code != 0 {
		t.Fatalf("validate of the import: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := runCmd(t, "import", "capi", "--provider", "inmemory", "-o", out, src); code == 0 || !strings.Contains(stderr, "exists already") {
		t.Errorf("a second import into the same folder: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCmd(t, "import", "flux", src); code != 1 || !strings.Contains(stderr, "gitfleet import capi") {
		t.Errorf("import flux: exit %d, %s", code, stderr)
	}
}
