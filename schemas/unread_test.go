package schemas

import (
	"strings"
	"testing"
)

// TestAwaitUnread: a file whose YAML does not parse may define what other
// files name, so a broken class file is one error that says how many
// references wait for it, not one more error a cluster of the class; the
// same for a cluster file a MachineDeployment names. With every file read,
// a reference to nothing is still an error of its own.
func TestAwaitUnread(t *testing.T) {
	edit := func(files []File, path string, f func(string) string) []File {
		out := append([]File(nil), files...)
		for i := range out {
			if out[i].Path == path {
				out[i].Data = []byte(f(string(out[i].Data)))
				return out
			}
		}
		t.Fatalf("no %s", path)
		return nil
	}
	base := generatedFleet(t, 3)
	tab := func(s string) string { return strings.Replace(s, "\n  version:", "\n\tversion:", 1) }

	_, errs := Load(edit(base, "classes/standard.yaml", tab))
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "classes/standard.yaml:") ||
		!strings.Contains(errs[0].Message, "not valid YAML") ||
		!strings.Contains(errs[0].Message, "(5 references to objects not found wait for this file, which may define them: the first, clusters/dev-1.yaml:") {
		t.Errorf("a class file that does not parse: %d errors, want one saying 5 references wait for it:\n%v", len(errs), errs)
	}

	md := File{Path: "clusters/md.yaml", Data: []byte("apiVersion: gitfleet.io/v1alpha1\nkind: MachineDeployment\nmetadata:\n  name: extra\nspec:\n  clusterName: c-00001\n  replicas: 1\n  template:\n    provider: local\n")}
	_, errs = Load(edit(append(base, md), "clusters/gen/c-00001.yaml", func(s string) string { return s + "\n\t- :\n" }))
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "clusters/gen/c-00001.yaml:") ||
		!strings.Contains(errs[0].Message, "1 reference to an object not found waits for this file") {
		t.Errorf("a cluster file that does not parse, named by a MachineDeployment: want one error saying so:\n%v", errs)
	}

	_, errs = Load(edit(base, "clusters/gen/c-00002.yaml", func(s string) string { return strings.Replace(s, "name: standard", "name: standrd", 1) }))
	if len(errs) != 1 || errs[0].Field != "spec.topology.classRef.name" || !strings.Contains(errs[0].Message, `ClusterClass "standrd" not found`) {
		t.Errorf("a class named wrong, every file read: want its own error:\n%v", errs)
	}
}
