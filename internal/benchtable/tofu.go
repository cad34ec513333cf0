package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Issue 14 sets gitfleet plan's cold figure at 1,000 clusters against
// Terraform's plan of as many resources as the class bump replaces
// machines. Terraform itself cannot be built here (the nested modules its
// releases replace in their go.mod are not served by the module proxy);
// OpenTofu, Terraform's fork (the same language and planning engine,
// terraform_data built in, so no provider is downloaded), builds from its
// own module (make bin/tofu). The comparison runs at the size the goal
// names only.

const (
	cmdTofu   = "tofu plan"
	tofuSize  = 1000
	tofuVar   = "k8s_version"
	tofuFrom  = "v1.31.2"
	tofuTo    = "v1.32.0"
	tofuBlock = "resource \"terraform_data\" \"c%05d\" {\n  count            = %d\n  triggers_replace = [var.%s]\n  input            = \"c%05d-${count.index}\"\n}\n"
)

// tofuFleet writes to dir an OpenTofu configuration of blocks
// terraform_data resources whose instances (count per block) number
// replaced in all, each replaced when var.k8s_version changes, and the
// state that tofu apply leaves for it at tofuFrom (version: the tofu that
// will read it). Applying 13,000 instances takes minutes; the state is
// written as apply writes it, and the plan's summary line is checked
// before it is timed.
func tofuFleet(dir string, blocks, replaced int, version string) error {
	if blocks < 1 || replaced < blocks {
		return fmt.Errorf("tofu fleet: %d resources in %d blocks", replaced, blocks)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var tf bytes.Buffer
	fmt.Fprintf(&tf, "variable %q {\n  type    = string\n  default = %q\n}\n\n", tofuVar, tofuFrom)
	type instance struct {
		IndexKey      int            `json:"index_key"`
		SchemaVersion int            `json:"schema_version"`
		Attributes    map[string]any `json:"attributes"`
		Sensitive     []any          `json:"sensitive_attributes"`
	}
	type resource struct {
		Mode      string     `json:"mode"`
		Type      string     `json:"type"`
		Name      string     `json:"name"`
		Provider  string     `json:"provider"`
		Instances []instance `json:"instances"`
	}
	resources := make([]resource, blocks)
	id := 0
	for b := range blocks {
		count := replaced / blocks
		if b < replaced%blocks {
			count++
		}
		fmt.Fprintf(&tf, tofuBlock, b, count, tofuVar, b)
		r := resource{Mode: "managed", Type: "terraform_data", Name: fmt.Sprintf("c%05d", b),
			Provider: `provider["terraform.io/builtin/terraform"]`, Instances: make([]instance, count)}
		for i := range count {
			input := map[string]any{"value": fmt.Sprintf("c%05d-%d", b, i), "type": "string"}
			r.Instances[i] = instance{IndexKey: i, Sensitive: []any{}, Attributes: map[string]any{
				"id":               fmt.Sprintf("%08x-0000-4000-8000-%012x", id, id),
				"input":            input,
				"output":           input,
				"triggers_replace": map[string]any{"value": []string{tofuFrom}, "type": []any{"tuple", []string{"string"}}},
			}}
			id++
		}
		resources[b] = r
	}
	state, err := json.MarshalIndent(map[string]any{
		"version": 4, "terraform_version": version, "serial": 1,
		"lineage": "6f0c3d1e-0000-4000-8000-000000000001", "outputs": map[string]any{},
		"resources": resources, "check_results": nil,
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), tf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "terraform.tfstate"), append(state, '\n'), 0o644)
}

// tofuEnv keeps tofu to the folder: no CLI configuration, no version
// check over the network, output for a machine.
var tofuEnv = []string{"TF_CLI_CONFIG_FILE=/dev/null", "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1"}

// tofuPlanArgs plan the version change: exit status 2, changes present.
var tofuPlanArgs = []string{"plan", "-input=false", "-no-color", "-lock=false", "-detailed-exitcode", "-var", tofuVar + "=" + tofuTo}

// measureTofu times tofu plan of as many replacements as gitfleet plan
// made at n clusters (blocks: the clusters it changed).
func (w *whole) measureTofu(n, blocks, replaced int) error {
	if _, err := os.Stat(w.tofu); err != nil {
		progress("no tofu binary at %s (make bin/tofu): OpenTofu's plan not run", w.tofu)
		return nil
	}
	out, err := tofuCmd(w.tofu, "", "version", "-json").Output()
	if err != nil {
		return fmt.Errorf("tofu version: %w", err)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Version == "" {
		return fmt.Errorf("tofu version -json: %q", out)
	}
	dir := filepath.Join(w.dir, fmt.Sprintf("tofu-%d", n))
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	progress("writing OpenTofu %s's configuration and state of %d terraform_data resources in %s", v.Version, replaced, dir)
	if err := tofuFleet(dir, blocks, replaced, v.Version); err != nil {
		return err
	}
	if out, err := tofuCmd(w.tofu, dir, "init", "-input=false", "-no-color").CombinedOutput(); err != nil {
		return fmt.Errorf("tofu init: %v\n%s", err, out)
	}
	// The plan is checked once, untimed: every instance replaced.
	out, _ = tofuCmd(w.tofu, dir, tofuPlanArgs...).CombinedOutput()
	if want := fmt.Sprintf("Plan: %d to add, 0 to change, %d to destroy.", replaced, replaced); !bytes.Contains(out, []byte(want)) {
		return fmt.Errorf("tofu plan does not say %q:\n%s", want, lastLine(string(out)))
	}
	var runs []sample
	for r := range w.runs {
		runs = append(runs, runOnce(dir, tofuEnv, 2, w.tofu, tofuPlanArgs...))
		progress("%d clusters, OpenTofu's plan of %d replacements, run %d: %s", n, replaced, r+1, runs[r])
	}
	p := summarize(runs)
	p.Resources = replaced
	w.procs[ProcKey{cmdTofu, n, ""}] = p
	return nil
}

func tofuCmd(bin, dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), tofuEnv...)
	return cmd
}

// planTotals are what gitfleet plan -o json counts: the clusters it
// changes and the machines it replaces.
func planTotals(gitfleet, fleet string) (changed, replaced int, err error) {
	cmd := exec.Command(gitfleet, "plan", "--repo", ".", "--base", "main", "--head", bumpBranch, "-o", "json")
	cmd.Dir = fleet
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("gitfleet plan -o json: %w", err)
	}
	var p struct {
		Totals struct {
			Changed          int `json:"changed"`
			MachinesReplaced int `json:"machinesReplaced"`
		} `json:"totals"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		return 0, 0, fmt.Errorf("gitfleet plan -o json: %w: %s", err, strings.TrimSpace(lastLine(string(out))))
	}
	return p.Totals.Changed, p.Totals.MachinesReplaced, nil
}
