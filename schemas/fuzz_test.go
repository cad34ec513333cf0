package schemas

import (
	"io/fs"
	"testing"

	"github.com/gitfleet/gitfleet/fixtures"
)

// FuzzValidate feeds arbitrary bytes as a cluster file into a fleet and runs
// ParseFile and Check: they may report errors but must never panic, and
// every error must point at a file.
func FuzzValidate(f *testing.F) {
	_ = fs.WalkDir(fixtures.Init(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := fs.ReadFile(fixtures.Init(), p)
			f.Add(b)
		}
		return nil
	})
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("a: &a {b: 1}\nc: {<<: *a, b: 2}\n"))
	f.Add([]byte("kind: Cluster\napiVersion: gitfleet.io/v1alpha1\n---\n- 1\n--- !!binary aGVsbG8=\n"))
	f.Add([]byte("Cluster: {spec: topology: controlPlane: replicas: 3 | 5}\n"))
	class, _ := fs.ReadFile(fixtures.Init(), "classes/standard.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, errs := ParseFile(File{Path: "clusters/fuzz.yaml", Data: data})
		classObjs, _ := ParseFile(File{Path: "classes/standard.yaml", Data: class})
		_, cerrs := Check(append(classObjs, objs...), []File{{Path: "policies/fuzz.cue", Data: data}})
		for _, e := range append(errs, cerrs...) {
			if e.Path == "" || e.Message == "" {
				t.Fatalf("error without path or message: %#v", e)
			}
		}
	})
}
