package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// classRevision identifies a class's content: what its clusters' machines
// are made of. It covers the version, the control-plane and worker
// templates, the variables' defaults and the patches; not the rollout
// waves, the strategies nor kubernetesVersions, which change no machine.
// A change to any of them is a new rollout of the class.
func classRevision(cc *v1alpha1.ClusterClass) string {
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
	b, err := json.Marshal(content)
	if err != nil {
		// Values come from YAML and always encode; keep a stable answer.
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:5])
}
