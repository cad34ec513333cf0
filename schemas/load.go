package schemas

import (
	"fmt"
	"path"
	"runtime"
	"strings"

	"github.com/gitfleet/gitfleet/internal/workers"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// ConfigFile is the optional FleetConfig at the repository root.
const ConfigFile = "gitfleet.yaml"

// Load validates a whole tree: it reads gitfleet.yaml (when present) for
// spec.paths and spec.policies, parses the selected YAML files in parallel,
// and runs Check with the policy files. files is every file of the tree (or
// at least every YAML and CUE file); others are ignored.
func Load(files []File) (*v1alpha1.Fleet, Errors) {
	var errs Errors
	cfg, cfgObjs, cfgErrs := loadConfig(files)
	errs = append(errs, cfgErrs...)
	docs, pols, selErrs := selectFiles(files, cfg, cfgObjs)
	errs = append(errs, selErrs...)
	good, polErrs := compilePolicies(pols)
	errs = append(errs, polErrs...)
	if good == nil {
		good = []File{} // not nil: parseFile then drops Raw
	}
	objs, perrs := parseAll(docs, good)
	errs = append(errs, perrs...)
	kept := objs[:0]
	for _, o := range objs {
		if o.Kind == v1alpha1.KindFleetConfig {
			errs = append(errs, objectError(&o, "kind", "FleetConfig belongs in gitfleet.yaml at the repository root: move it there"))
			continue
		}
		kept = append(kept, o)
	}
	objs = kept
	if len(objs) == 0 && len(errs) == 0 {
		errs = append(errs, Error{Path: ".", Message: "no fleet objects found: add a ClusterClass and a Cluster as YAML files (gitfleet init DIR writes an example)"})
	}
	// Policies were applied while parsing, where each document was already
	// encoded.
	fleet, cerrs := Check(append(cfgObjs, objs...), nil)
	errs = append(errs, cerrs...)
	return fleet, sortErrors(AwaitUnread(errs, unread(perrs, objs)))
}

// loadConfig parses gitfleet.yaml; its spec tells what else to read.
func loadConfig(files []File) (v1alpha1.FleetConfigSpec, []Object, Errors) {
	spec := v1alpha1.FleetConfigSpec{Policies: v1alpha1.DefaultPoliciesDir}
	for _, f := range files {
		if f.Path != ConfigFile {
			continue
		}
		objs, errs := ParseFile(f)
		for i, o := range objs {
			if o.Kind != v1alpha1.KindFleetConfig {
				errs = append(errs, objectError(&objs[i], "kind", fmt.Sprintf("gitfleet.yaml holds only the FleetConfig: move this %s to its own file", o.Kind)))
				continue
			}
			if c, ok := o.Value.(*v1alpha1.FleetConfig); ok {
				spec = c.Spec
				if spec.Policies == "" {
					spec.Policies = v1alpha1.DefaultPoliciesDir
				}
			}
		}
		var keep []Object
		for _, o := range objs {
			if o.Kind == v1alpha1.KindFleetConfig {
				keep = append(keep, o)
			}
		}
		return spec, keep, errs
	}
	return spec, nil, nil
}

// selectFiles picks the YAML documents under spec.paths (all of the tree
// when empty) and the policy files (*.cue directly in spec.policies).
// gitfleet.yaml and kustomization files are not fleet documents.
func selectFiles(files []File, spec v1alpha1.FleetConfigSpec, cfgObjs []Object) (docs, pols []File, errs Errors) {
	roots := make([]string, len(spec.Paths))
	used := make([]bool, len(spec.Paths))
	for i, p := range spec.Paths {
		roots[i] = strings.Trim(path.Clean("/"+p), "/")
	}
	policyDir := strings.Trim(path.Clean("/"+spec.Policies), "/")
	for _, f := range files {
		if path.Ext(f.Path) == ".cue" && path.Dir(f.Path) == policyDir {
			pols = append(pols, f)
			continue
		}
		if !isFleetYAML(f.Path) {
			continue
		}
		if len(roots) == 0 {
			docs = append(docs, f)
			continue
		}
		for i, r := range roots {
			if r == "" || f.Path == r || strings.HasPrefix(f.Path, r+"/") {
				docs = append(docs, f)
				used[i] = true
				break
			}
		}
	}
	if len(cfgObjs) > 0 && spec.Policies != v1alpha1.DefaultPoliciesDir {
		clean := path.Clean(spec.Policies)
		switch {
		case path.IsAbs(spec.Policies) || clean == ".." || clean == "." || strings.HasPrefix(clean, "../"):
			errs = append(errs, cfgObjs[0].ErrorAt("spec.policies",
				fmt.Sprintf("%q is outside the repository: policies are .cue files in a folder of the repository, like %s", spec.Policies, v1alpha1.DefaultPoliciesDir)))
		case len(pols) == 0:
			errs = append(errs, cfgObjs[0].ErrorAt("spec.policies",
				fmt.Sprintf("%q holds no .cue file, so no policy would apply: fix the path, or remove spec.policies to use %s/", spec.Policies, v1alpha1.DefaultPoliciesDir)))
		}
	}
	for i, u := range used {
		if !u && len(cfgObjs) > 0 {
			errs = append(errs, cfgObjs[0].ErrorAt(fmt.Sprintf("spec.paths[%d]", i),
				fmt.Sprintf("%q matches no YAML file: fix the path or remove it", spec.Paths[i])))
		}
	}
	return docs, pols, errs
}

// IsYAMLFile reports whether a path names a YAML file: it ends in .yaml or
// .yml, in any case (prod-1.YAML is read as YAML too; a file silently not
// read would be a cluster silently missing). It allocates nothing: every
// path of a revision's tree goes through it.
func IsYAMLFile(p string) bool {
	return hasSuffixFold(p, ".yaml") || hasSuffixFold(p, ".yml")
}

// hasSuffixFold is strings.HasSuffix where an upper-case ASCII letter of s
// matches the lower-case one of suffix: ~4 ns a path, a third of
// strings.EqualFold's time, and no allocation.
func hasSuffixFold(s, suffix string) bool {
	if len(s) < len(suffix) {
		return false
	}
	s = s[len(s)-len(suffix):]
	for i := range len(suffix) {
		if c := s[i]; c != suffix[i] && !('A' <= c && c <= 'Z' && c+'a'-'A' == suffix[i]) {
			return false
		}
	}
	return true
}

// isFleetYAML reports whether a repository path may hold fleet documents:
// YAML, not in a dot folder (.github), not gitfleet.yaml, not a
// kustomization.
func isFleetYAML(p string) bool {
	if !IsYAMLFile(p) {
		return false
	}
	if strings.HasPrefix(p, ".") || strings.Contains(p, "/.") {
		return false
	}
	base := path.Base(p)
	return p != ConfigFile && base != "kustomization.yaml" && base != "kustomization.yml"
}

// parseAll runs parseFile on every file, in parallel across cores, and
// returns the objects in file order.
func parseAll(files []File, policies []File) ([]Object, Errors) {
	type result struct {
		objs []Object
		errs Errors
	}
	results := make([]result, len(files))
	parallel(len(files), func(i int) {
		results[i].objs, _, results[i].errs = parseFile(files[i], policies, false)
	})
	var objs []Object
	var errs Errors
	for _, r := range results {
		objs = append(objs, r.objs...)
		errs = append(errs, r.errs...)
	}
	return objs, errs
}

// parallel calls work(0..n-1) on one goroutine per core and waits.
func parallel(n int, work func(i int)) { workers.Each(n, runtime.GOMAXPROCS(0), work) }

// unread are the paths of files that have errors and not one object: a
// file whose YAML does not parse.
func unread(errs Errors, objs []Object) []string {
	read := map[string]bool{}
	for _, o := range objs {
		read[o.Source.Path] = true
	}
	var paths []string
	for _, e := range errs {
		if !read[e.Path] {
			paths = append(paths, e.Path)
		}
	}
	return paths
}
