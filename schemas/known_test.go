package schemas

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/fixtures"
)

// TestParseKnownGoodDecodesWhatParseFileDoes: for every file of the init
// fleet and of a generated one, the objects decoded without the checks are
// the objects ParseFile returns — kinds, names, lines, typed values (ints
// stay int64) and raw values — so a warm cache changes no plan.
func TestParseKnownGoodDecodesWhatParseFileDoes(t *testing.T) {
	files := generatedFleet(t, 30)
	n := 0
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".yaml") {
			continue
		}
		want, errs := ParseFile(f)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", f.Path, errs)
		}
		got, errs := ParseKnownGood(f)
		if len(errs) > 0 {
			t.Errorf("%s: ParseKnownGood errors %v", f.Path, errs)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: ParseKnownGood differs from ParseFile (-want +got):\n%s", f.Path, d)
		}
		n += len(got)
	}
	if n < 30 {
		t.Errorf("only %d objects compared", n)
	}
}

// TestParseKnownGoodFallsBack: content that does not even decode is given
// to ParseFile, whose errors come back, whatever the caller believed.
func TestParseKnownGoodFallsBack(t *testing.T) {
	for name, data := range map[string]string{
		"syntax":  "kind: Cluster\n  bad: [\n",
		"no kind": "apiVersion: gitfleet.io/v1alpha1\nmetadata: {name: x}\n",
		"list":    "- a\n- b\n",
	} {
		f := File{Path: "clusters/x.yaml", Data: []byte(data)}
		_, want := ParseFile(f)
		_, got := ParseKnownGood(f)
		if len(want) == 0 || cmp.Diff(want, got) != "" {
			t.Errorf("%s: ParseKnownGood errors %v, ParseFile's %v", name, got, want)
		}
	}
}

// TestCheckSkipsPolicyKnownGood: an object the options call known good is
// not evaluated (its violation is not reported); the others are, and the
// clean ones are reported good.
func TestCheckSkipsPolicyKnownGood(t *testing.T) {
	files := map[string][]byte{}
	if err := fs.WalkDir(fixtures.Init(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files[p], err = fs.ReadFile(fixtures.Init(), p)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// prod-1 breaks the init policy (a prod control plane of 3 or 5).
	files["clusters/prod-1.yaml"] = []byte(strings.Replace(string(files["clusters/prod-1.yaml"]), "replicas: 3", "replicas: 1", 1))
	var objs []Object
	var pols []File
	for p, data := range files {
		if strings.HasSuffix(p, ".cue") {
			pols = append(pols, File{Path: p, Data: data})
			continue
		}
		o, errs := ParseFile(File{Path: p, Data: data})
		if len(errs) > 0 {
			t.Fatalf("%s: %v", p, errs)
		}
		objs = append(objs, o...)
	}
	var good []string
	_, errs := CheckWith(objs, pols, CheckOptions{
		PolicyKnownGood: func(o *Object) bool { return false },
		PolicyGood:      func(o *Object) { good = append(good, o.Name) },
	})
	if len(errs) != 1 || errs[0].Path != "clusters/prod-1.yaml" {
		t.Fatalf("errors = %v, want prod-1's policy violation", errs)
	}
	if !strings.Contains(strings.Join(good, " "), "dev-1") || strings.Contains(strings.Join(good, " "), "prod-1") {
		t.Errorf("reported good: %v, want dev-1 and not prod-1", good)
	}
	_, errs = CheckWith(objs, pols, CheckOptions{PolicyKnownGood: func(o *Object) bool { return o.Name == "prod-1" }})
	if len(errs) != 0 {
		t.Errorf("prod-1 known good: errors %v, want none", errs)
	}
}
