package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// classRevision identifies a class's content: everything its clusters'
// machines are made, replaced, removed and checked by. It is a hash of
// the class's name (patches may read it: builtin.cluster.topology.class)
// and of its whole spec, but for what changes no machine:
//
//   - spec.rollout (waves, maxFailures): the order a change goes in, not
//     what it changes; a change to it is no new rollout, so raising
//     maxFailures releases a halted rollout where it stands;
//   - each patch's description: words for people;
//   - the class object's own metadata.labels and metadata.annotations
//     (no machine carries them: the machines' are spec.controlPlane's
//     and each worker class's metadata) and where it is written.
//
// Everything else is in, whatever it does: templates, version,
// kubernetesVersions (the versions a chained upgrade passes), variables
// whole (a schema's default is a value patches read), patches,
// machine metadata, strategies, rollout.after, deletion orders,
// minReadySeconds, machineNaming and health checks. A field the spec
// gains is in too, unless it is left out here by name. A change to any of
// them is a new rollout of the class.
func classRevision(cc *v1alpha1.ClusterClass) string {
	spec := cc.Spec
	spec.Rollout = nil
	if len(spec.Patches) > 0 {
		spec.Patches = append([]v1alpha1.ClassPatch(nil), spec.Patches...)
		for i := range spec.Patches {
			spec.Patches[i].Description = ""
		}
	}
	return revisionHash(struct {
		Name string                    `json:"name"`
		Spec v1alpha1.ClusterClassSpec `json:"spec"`
	}{cc.Metadata.Name, spec})
}

// legacyRevision is the class revision gitfleet computed before
// classRevision covered the whole spec: the version, the templates, the
// variables' own defaults and the patches. It only reads the records an
// earlier gitfleet wrote (rollout.go's and upgraded's), so that upgrading
// gitfleet starts no rollout by itself.
func legacyRevision(cc *v1alpha1.ClusterClass) string {
	type variable struct {
		Name    string `json:"name"`
		Default any    `json:"default,omitempty"`
	}
	type worker struct {
		Class    string                   `json:"class"`
		Template v1alpha1.MachineTemplate `json:"template"`
	}
	content := struct {
		Version      string                   `json:"version"`
		ControlPlane v1alpha1.MachineTemplate `json:"controlPlane"`
		Workers      []worker                 `json:"workers,omitempty"`
		Variables    []variable               `json:"variables,omitempty"`
		Patches      []v1alpha1.ClassPatch    `json:"patches,omitempty"`
	}{Version: cc.Spec.Version, ControlPlane: cc.Spec.ControlPlane.MachineTemplate, Patches: cc.Spec.Patches}
	for _, w := range cc.Spec.Workers.MachineDeployments {
		content.Workers = append(content.Workers, worker{Class: w.Class, Template: w.Template})
	}
	for _, v := range cc.Spec.Variables {
		content.Variables = append(content.Variables, variable{Name: v.Name, Default: v.Default})
	}
	return revisionHash(content)
}

// revisionHash is the first 10 hex digits of SHA-256 over v as JSON (map
// keys sorted).
func revisionHash(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Values come from YAML and always encode; keep a stable answer.
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:5])
}
