package capi_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/capi"
	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/sources"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

// TestImportGolden converts Cluster API's quick start, as v1beta1 and as
// v1beta2 writes it, for the inmemory provider: the report (every field
// dropped or changed, at its line) and the files made are golden, and the
// files pass gitfleet validate, planner rules included, with no edit.
func TestImportGolden(t *testing.T) {
	for _, version := range []string{"v1beta1", "v1beta2"} {
		t.Run(version, func(t *testing.T) {
			inputs, err := capi.ReadInputs([]string{filepath.Join("testdata", version)})
			if err != nil {
				t.Fatal(err)
			}
			res, err := capi.Import(inputs, capi.Options{Provider: "inmemory"})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			b.WriteString("# report\n")
			for _, f := range res.Findings {
				b.WriteString(f.String() + "\n")
			}
			dir := t.TempDir()
			written, err := capi.Write(dir, res)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range written {
				b.WriteString("# " + name + "\n")
				b.Write(res.Files[name])
			}
			golden := filepath.Join("testdata", version+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./capi -update)", err)
			}
			if d := cmp.Diff(string(want), b.String()); d != "" {
				t.Errorf("%s differs (-want +got):\n%s", golden, d)
			}

			fleet, errs, err := sources.ValidateDir(context.Background(), dir, sources.ValidateOptions{})
			if err != nil || len(errs) > 0 {
				t.Fatalf("the converted fleet does not validate: %v %v", err, errs)
			}
			if _, problems := planner.Expand(fleet); len(problems) > 0 {
				t.Fatalf("the planner finds problems in the converted fleet: %v", problems)
			}
			if len(fleet.Clusters) != 1 || len(fleet.Classes) != 1 {
				t.Errorf("converted %d clusters and %d classes, want 1 of each", len(fleet.Clusters), len(fleet.Classes))
			}
		})
	}
}

// TestImportRefusals: an unknown provider, and a file that exists already
// (nothing is overwritten, nothing written).
func TestImportRefusals(t *testing.T) {
	inputs, err := capi.ReadInputs([]string{"testdata/v1beta2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := capi.Import(inputs, capi.Options{Provider: "vsphere"}); err == nil || !strings.Contains(err.Error(), `unknown provider "vsphere": use one of`) {
		t.Errorf("unknown provider: %v", err)
	}
	res, err := capi.Import(inputs, capi.Options{Provider: "inmemory"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "clusters"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "clusters", "development.yaml"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := capi.Write(dir, res); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("Write over an existing file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "classes", "quick-start.yaml")); err == nil {
		t.Error("Write wrote the class although it refused the cluster")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "clusters", "development.yaml")); string(b) != "mine\n" {
		t.Errorf("the existing file was changed: %q", b)
	}
}
