package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const brokenBase = `clusters/c1.yaml:18:7: spec.topology.controlPlane.replicas: "many" is not a control-plane machine count`

// previewBrokenBase is the preview of a pull request that fixes a base
// that does not validate: head has two clusters, base none that validate.
func previewBrokenBase(baseErrs ...error) *PreviewReport {
	head := testFleet(testClass("v1.29.4"), testCluster("c1", 1, 2), testCluster("c2", 3, 1))
	if len(baseErrs) == 0 {
		baseErrs = []error{errors.New(brokenBase)}
	}
	r := PreviewOf(PreviewInput{Head: head, BaseErrs: baseErrs})
	r.Base, r.Head = "main (abc1234)", "fix (def5678)"
	return r
}

// A base that does not validate is compared as an empty fleet: every
// output says so first, with base's errors, so that nobody reads the
// clusters listed as added as clusters the change adds.
func TestPreviewBaseDoesNotValidate(t *testing.T) {
	r := previewBrokenBase()
	if !r.BaseInvalid() || r.ComparedWith != CompareEmpty || len(r.BaseErrors) != 1 || r.BaseErrors[0] != brokenBase {
		t.Fatalf("comparedWith %q, baseErrors %q: want %q and base's error", r.ComparedWith, r.BaseErrors, CompareEmpty)
	}
	if r.Totals.Added != 2 || len(r.Errors) != 0 {
		t.Fatalf("totals %+v, errors %q: want head's 2 clusters as added, no error", r.Totals, r.Errors)
	}

	var text bytes.Buffer
	if err := RenderText(&text, r); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	warning := "warning: base main (abc1234) does not validate, so head is compared against an empty fleet: every cluster of head is listed as added, whether or not this change adds it."
	if !strings.HasPrefix(out, "Comparing main (abc1234) with fix (def5678).\n\n"+warning+"\n") {
		t.Errorf("text does not start with the warning:\n%s", out)
	}
	lacks(t, "text", out,
		"  base's 1 error:\n    "+brokenBase+"\n",
		"Plan against an empty fleet (base does not validate): 2 clusters added",
		"No observed state, and base does not validate: assumed no machine runs.",
		"in place of the last revision that validated, not of base",
	)
	if strings.Contains(out, "\nPlan: ") || strings.Contains(out, "At once, in no wave") {
		t.Errorf("text reads as a plan against base:\n%s", out)
	}

	var md bytes.Buffer
	if err := RenderMarkdown(&md, r, 0); err != nil {
		t.Fatal(err)
	}
	out = md.String()
	top := "### gitfleet plan: `main (abc1234)` → `fix (def5678)`\n\n> [!WARNING]\n" +
		"> **Base `main (abc1234)` does not validate, so head is compared against an empty fleet: every cluster of head is listed as added, whether or not this change adds it.**\n"
	if !strings.HasPrefix(out, top) {
		t.Errorf("markdown does not start with the warning:\n%s", out)
	}
	lacks(t, "markdown", out,
		"> Base's 1 error:\n>\n> - `"+brokenBase+"`\n\n",
		"Plan against an empty fleet (base does not validate): 2 clusters added",
		"_No observed state, and base does not validate: assumed no machine runs._",
	)
	if w, table := strings.Index(out, "[!WARNING]"), strings.Index(out, "| + |"); table < 0 || w > table {
		t.Errorf("the warning does not come before the table:\n%s", out)
	}

	var js bytes.Buffer
	if err := RenderJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var back struct {
		ComparedWith string   `json:"comparedWith"`
		BaseErrors   []string `json:"baseErrors"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.ComparedWith != "empty fleet" || !cmp.Equal(back.BaseErrors, []string{brokenBase}) {
		t.Errorf("json comparedWith %q, baseErrors %q:\n%s", back.ComparedWith, back.BaseErrors, js.String())
	}

	// A good base: compared with base, no base errors, as before.
	good := Preview(testFleet(testClass("v1.29.4"), testCluster("c1", 1, 2)), testFleet(testClass("v1.29.4"), testCluster("c1", 1, 2)), nil, nil)
	if good.BaseInvalid() || good.ComparedWith != CompareBase || good.BaseErrors != nil {
		t.Errorf("good base: comparedWith %q, baseErrors %q", good.ComparedWith, good.BaseErrors)
	}
}

// Base's errors are listed up to maxBaseErrors in the text and the
// Markdown, with a count of the rest; JSON has them all.
func TestPreviewBaseErrorsAreCounted(t *testing.T) {
	var errs []error
	for i := range maxBaseErrors + 5 {
		errs = append(errs, fmt.Errorf("clusters/c%d.yaml:3:1: kind: wrong", i))
	}
	r := previewBrokenBase(errs...)
	if len(r.BaseErrors) != maxBaseErrors+5 {
		t.Fatalf("%d base errors, want %d", len(r.BaseErrors), maxBaseErrors+5)
	}
	var text, md bytes.Buffer
	if err := RenderText(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := RenderMarkdown(&md, r, 0); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "markdown": md.String()} {
		if !strings.Contains(out, "base's 15 errors") && !strings.Contains(out, "Base's 15 errors") {
			t.Errorf("%s does not count base's errors:\n%s", name, out)
		}
		if !strings.Contains(out, "clusters/c9.yaml") || strings.Contains(out, "clusters/c10.yaml") || !strings.Contains(out, "...and 5 more") {
			t.Errorf("%s does not list 10 of base's errors and count 5 more:\n%s", name, out)
		}
	}
}

// Both revisions broken: head's errors, and the daemon keeps the last
// revision that validated, not base.
func TestPreviewBaseAndHeadDoNotValidate(t *testing.T) {
	r := PreviewOf(PreviewInput{BaseErrs: []error{errors.New(brokenBase)}, HeadErrs: []error{errors.New("clusters/c2.yaml:4:3: kind: wrong")}})
	var text bytes.Buffer
	if err := RenderText(&text, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"warning: base does not validate", "error: clusters/c2.yaml:4:3: kind: wrong",
		"the daemon keeps running the last revision that validated (base does not either)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}

// In place of a base that does not validate, head is compared with the
// revision the daemon runs (the status branch's last applied commit):
// what merging changes is shown, and every output says against what.
func TestPreviewBaseComparedWithTheAppliedRevision(t *testing.T) {
	applied := testFleet(testClass("v1.29.4"), testCluster("c1", 1, 2))
	head := testFleet(testClass("v1.29.4"), testCluster("c1", 1, 2), testCluster("c2", 3, 1))
	const commit = "4e1f2a3b5c6d7e8f90a1b2c3d4e5f60718293a4b"
	r := PreviewOf(PreviewInput{Base: applied, Head: head, BaseErrs: []error{errors.New(brokenBase)}, Applied: commit})
	r.Base, r.Head = "main (abc1234)", "fix (def5678)"
	if !r.BaseInvalid() || r.ComparedWith != CompareApplied || r.Applied != commit || len(r.BaseErrors) != 1 {
		t.Fatalf("comparedWith %q, applied %q, baseErrors %q", r.ComparedWith, r.Applied, r.BaseErrors)
	}
	if r.Totals.Added != 1 || r.Unchanged != 1 {
		t.Fatalf("totals %+v, unchanged %d: want c2 added and c1 unchanged", r.Totals, r.Unchanged)
	}

	var text bytes.Buffer
	if err := RenderText(&text, r); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	lacks(t, "text", out,
		"warning: base main (abc1234) does not validate, so head is compared with the revision the daemon runs: 4e1f2a3, the last it applied (the status branch).\n"+
			"  The daemon does not run base: it keeps 4e1f2a3 in force until a revision validates, and merging makes it apply head in place of that: what this plan shows.\n"+
			"  base's 1 error:\n    "+brokenBase+"\n",
		"Plan against the last applied revision 4e1f2a3 (base does not validate): 1 cluster added, 0 changed, 0 removed",
		"No observed state: assumed every cluster runs exactly as 4e1f2a3 describes.",
		"Merging: the daemon applies head at its next poll or webhook, in place of 4e1f2a3.",
	)

	var md bytes.Buffer
	if err := RenderMarkdown(&md, r, 0); err != nil {
		t.Fatal(err)
	}
	if want := "> **Base `main (abc1234)` does not validate, so head is compared with the revision the daemon runs: `4e1f2a3`, the last it applied (the status branch).**\n"; !strings.Contains(md.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, md.String())
	}

	var js bytes.Buffer
	if err := RenderJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var back struct {
		ComparedWith string `json:"comparedWith"`
		Applied      string `json:"applied"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.ComparedWith != "last applied revision" || back.Applied != commit {
		t.Errorf("json comparedWith %q, applied %q (%v)", back.ComparedWith, back.Applied, err)
	}

	// Head broken too: refused, and the daemon keeps the applied revision.
	r = PreviewOf(PreviewInput{Base: applied, Head: applied, BaseErrs: []error{errors.New(brokenBase)}, Applied: commit,
		HeadErrs: []error{errors.New("clusters/c2.yaml:4:3: kind: wrong")}})
	text.Reset()
	if err := RenderText(&text, r); err != nil {
		t.Fatal(err)
	}
	if want := "the daemon keeps running 4e1f2a3 (base does not validate either)"; !strings.Contains(text.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, text.String())
	}
}

// lacks fails t for each of wants that out (the output called name) lacks.
func lacks(t *testing.T, name, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("%s lacks %q:\n%s", name, want, out)
		}
	}
}
