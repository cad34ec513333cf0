package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestTofuFleet: the configuration has a block per changed cluster whose
// counts add up to the replacements, and the state one instance of each,
// at the version the plan changes, each with its own ID.
func TestTofuFleet(t *testing.T) {
	dir := t.TempDir()
	if err := tofuFleet(dir, 7, 52, "1.10.10"); err != nil {
		t.Fatal(err)
	}
	tf, err := os.ReadFile(filepath.Join(dir, "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	counts := regexp.MustCompile(`count += (\d+)`).FindAllSubmatch(tf, -1)
	sum := 0
	for _, c := range counts {
		n, _ := strconv.Atoi(string(c[1]))
		if n != 7 && n != 8 {
			t.Errorf("a block of %d instances: 52 in 7 blocks are 7 or 8 each", n)
		}
		sum += n
	}
	if len(counts) != 7 || sum != 52 {
		t.Errorf("%d blocks of %d instances, want 7 of 52", len(counts), sum)
	}
	data, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	var state struct {
		Version   int    `json:"version"`
		Tofu      string `json:"terraform_version"`
		Resources []struct {
			Name      string `json:"name"`
			Instances []struct {
				IndexKey   int `json:"index_key"`
				Attributes struct {
					ID       string `json:"id"`
					Triggers struct {
						Value []string `json:"value"`
					} `json:"triggers_replace"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(data, &state); err != nil {
		t.Fatal(err)
	}
	if state.Version != 4 || state.Tofu != "1.10.10" || len(state.Resources) != 7 {
		t.Fatalf("state version %d by %q with %d resources", state.Version, state.Tofu, len(state.Resources))
	}
	ids := map[string]bool{}
	for b, r := range state.Resources {
		if want := []byte("\"" + r.Name + "\""); !regexp.MustCompile(regexp.QuoteMeta(string(want))).Match(tf) {
			t.Errorf("state resource %s is not in main.tf", r.Name)
		}
		for i, in := range r.Instances {
			if in.IndexKey != i || len(in.Attributes.Triggers.Value) != 1 || in.Attributes.Triggers.Value[0] != tofuFrom {
				t.Errorf("resource %d instance %d: %+v", b, i, in)
			}
			ids[in.Attributes.ID] = true
		}
	}
	if len(ids) != 52 {
		t.Errorf("%d distinct IDs, want 52", len(ids))
	}
	if err := tofuFleet(dir, 5, 4, "1.10.10"); err == nil {
		t.Error("4 resources in 5 blocks: no error")
	}
}

// TestTofuPlansTheFleet runs OpenTofu (make bin/tofu; skipped without it)
// on a small fleet: the state is read as written and every instance is
// replaced.
func TestTofuPlansTheFleet(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin", "tofu"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skip("no bin/tofu (make bin/tofu)")
	}
	w := &whole{tofu: bin, dir: t.TempDir(), runs: 1, procs: Procs{}}
	if err := w.measureTofu(3, 3, 10); err != nil {
		t.Fatal(err)
	}
	p := w.procs[ProcKey{cmdTofu, 3, ""}]
	if p.Err != "" || p.Wall <= 0 || p.Resources != 10 {
		t.Errorf("tofu plan figure %+v", p)
	}
	// A state at the head's version plans nothing: the check before the
	// timing would fail.
	dir := filepath.Join(w.dir, "tofu-3")
	cmd := exec.Command(bin, append(tofuPlanArgs[:len(tofuPlanArgs)-1:len(tofuPlanArgs)-1], tofuVar+"="+tofuFrom)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), tofuEnv...)
	if err := cmd.Run(); err != nil {
		t.Errorf("tofu plan at the state's own version: %v (want exit 0, no changes)", err)
	}
}

// TestTofuRowWithoutTofu: OpenTofu not built, or failing, leaves the cold
// plan's goal unjudged (—) and says so in its row, whatever gitfleet's
// figure.
func TestTofuRowWithoutTofu(t *testing.T) {
	plan := Proc{Wall: 200e6, MaxRSS: 90 << 10}
	for _, c := range []struct {
		name   string
		procs  Procs
		figure string
	}{
		{"not built", Procs{{cmdPlan, tofuSize, cacheCold}: plan}, notRun},
		{"failing", Procs{{cmdPlan, tofuSize, cacheCold}: plan, {cmdTofu, tofuSize, ""}: {Err: "tofu init: exit status 1"}}, "failed: tofu init: exit status 1"},
	} {
		var tofuRow, planRow *Row
		rs := rows(Benchmarks{}, c.procs)
		for i := range rs {
			switch {
			case rs[i].Size == clusters(tofuSize) && rs[i].What == "`gitfleet plan` of a class bump, cold cache":
				planRow = &rs[i]
			case rs[i].What == "OpenTofu's `tofu plan` of as many replacements (`terraform_data`)":
				tofuRow = &rs[i]
			}
		}
		if tofuRow == nil || planRow == nil {
			t.Fatalf("%s: rows missing: %+v", c.name, rs)
		}
		if tofuRow.Figure != c.figure || planRow.Met != none {
			t.Errorf("%s: OpenTofu's row %q, the cold plan's met? %q; want %q and %q", c.name, tofuRow.Figure, planRow.Met, c.figure, none)
		}
	}
}
