package sources_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/fixtures"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/sources"
)

// A revision and the working tree are selected and validated the way
// schemas.Load does (plus kustomize): every fixture fleet, committed with
// git, gets the same errors from ValidateRev, ValidateDir and schemas.Load.
func TestValidateAgreesWithSchemasLoadOnFixtures(t *testing.T) {
	cases, err := filepath.Glob("../fixtures/broken/*")
	if err != nil {
		t.Fatal(err)
	}
	cases = slices.DeleteFunc(cases, func(d string) bool { fi, err := os.Stat(d); return err != nil || !fi.IsDir() })
	if len(cases) < 10 {
		t.Fatalf("found %d broken fixtures; did fixtures/broken move?", len(cases))
	}
	for _, dir := range cases {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			overlay, err := fixtures.Overlay(os.DirFS(dir))
			if err != nil {
				t.Fatal(err)
			}
			var files []schemas.File
			content := map[string]string{}
			for p, data := range overlay {
				files = append(files, schemas.File{Path: p, Data: data})
				content[p] = string(data)
			}
			// In path order, as schemas.ReadDir returns them.
			slices.SortFunc(files, func(a, b schemas.File) int { return strings.Compare(a.Path, b.Path) })
			_, want := schemas.Load(files)
			if len(want) == 0 {
				t.Fatalf("schemas.Load finds no error in a broken fixture")
			}
			work := gittest.NewRepo(t)
			work.Commit("fixture", content)
			_, got, err := sources.ValidateRev(context.Background(), work.Dir, "main", sources.ValidateOptions{})
			if err != nil || got.Error() != want.Error() {
				t.Errorf("schemas.Load:\n%s\nValidateRev (err %v):\n%s", want, err, got)
			}
			_, got, err = sources.ValidateDir(context.Background(), work.Dir, sources.ValidateOptions{})
			if err != nil || got.Error() != want.Error() {
				t.Errorf("schemas.Load:\n%s\nValidateDir (err %v):\n%s", want, err, got)
			}
		})
	}
}
