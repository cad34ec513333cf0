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

// TestDecodeKnownGivesTheSameObjects: the objects decoded again from what
// ParseKnownGoodDocs kept of each document (its JSON, lines, kind and
// name), as the CLI's object cache does, are the objects parsing the file
// gives (prod-1.yaml holds two documents), less the raw values the cache's
// callers drop, with DecodeKnownCopy too; and a file with errors keeps
// nothing.
func TestDecodeKnownGivesTheSameObjects(t *testing.T) {
	files := generatedFleet(t, 30)
	n := 0
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".yaml") {
			continue
		}
		want, docs, errs := ParseKnownGoodDocs(f)
		if len(errs) > 0 || len(docs) != len(want) {
			t.Fatalf("%s: %d docs for %d objects, errors %v", f.Path, len(docs), len(want), errs)
		}
		for i := range want {
			want[i].Raw = nil
		}
		got, ok := DecodeKnown(f.Path, docs)
		if !ok {
			t.Fatalf("%s: DecodeKnown refused its own docs", f.Path)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: decoded again, the objects differ (-parsed +decoded):\n%s", f.Path, d)
		}
		if copied, ok := DecodeKnownCopy(f.Path, docs); !ok || cmp.Diff(want, copied) != "" {
			t.Errorf("%s: DecodeKnownCopy's objects differ (-parsed +decoded):\n%s", f.Path, cmp.Diff(want, copied))
		}
		// The same from a full parse, as a cold run keeps them.
		checked, cdocs, errs := ParseFileCheckedDocs(f, nil)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", f.Path, errs)
		}
		if again, ok := DecodeKnown(f.Path, cdocs); !ok || cmp.Diff(checked, again) != "" {
			t.Errorf("%s: decoded from a full parse's docs, the objects differ (-parsed +decoded):\n%s", f.Path, cmp.Diff(checked, again))
		}
		n += len(got)
	}
	if n < 31 {
		t.Errorf("only %d objects compared", n)
	}
	bad := File{Path: "clusters/x.yaml", Data: []byte("kind: Cluster\n  bad: [\n")}
	if _, docs, errs := ParseKnownGoodDocs(bad); docs != nil || len(errs) == 0 {
		t.Errorf("a file that does not parse kept %d docs (errors %v)", len(docs), errs)
	}
	invalid := File{Path: "clusters/x.yaml", Data: []byte("apiVersion: gitfleet.io/v1alpha1\nkind: Cluster\nmetadata: {name: x}\nspec: {}\n")}
	if _, docs, errs := ParseFileCheckedDocs(invalid, nil); docs != nil || len(errs) == 0 {
		t.Errorf("a file with errors kept %d docs (errors %v)", len(docs), errs)
	}
	if _, ok := DecodeKnown("clusters/x.yaml", []KnownDoc{{Kind: "Cluster", Name: "x", Line: 1, Encoded: "{"}}); ok {
		t.Error("DecodeKnown took bytes that do not decode")
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

// TestParseFileCheckedIsCheck: policies applied while a file is parsed
// report what Check reports when it applies them afterwards, and the
// objects keep no raw value.
func TestParseFileCheckedIsCheck(t *testing.T) {
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
	var pols []File
	for p, data := range files {
		if strings.HasSuffix(p, ".cue") {
			pols = append(pols, File{Path: p, Data: data})
		}
	}
	good, errs := CompilePolicies(pols)
	if len(errs) > 0 || len(good) != 1 {
		t.Fatalf("policies: %v, %d good", errs, len(good))
	}
	var after, before Errors
	var parsed, checked []Object
	for p, data := range files {
		if strings.HasSuffix(p, ".cue") {
			continue
		}
		o, es := ParseFileChecked(File{Path: p, Data: data}, good)
		for _, x := range o {
			if x.Raw != nil {
				t.Errorf("%s: Raw kept", p)
			}
		}
		parsed, before = append(parsed, o...), append(before, es...)
		o, es = ParseFile(File{Path: p, Data: data})
		if len(es) > 0 {
			t.Fatalf("%s: %v", p, es)
		}
		checked = append(checked, o...)
	}
	_, cerrs := Check(parsed, nil)
	before = append(before, cerrs...)
	_, after = Check(checked, pols)
	if d := cmp.Diff(sortErrors(after), sortErrors(before)); d != "" || len(after) != 1 {
		t.Errorf("policies while parsing differ from policies in Check (-Check +parsing):\n%s", d)
	}
}
