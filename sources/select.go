package sources

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// ConfigFile is the optional fleet configuration at the repository root.
const ConfigFile = "gitfleet.yaml"

// input is one file handed to validation, with the key its parse result is
// cached under (content hash and path). Data is nil until load is called:
// a file whose parse result is cached is never read.
type input struct {
	schemas.File
	key string
	// render is where a kustomize-rendered input comes from (its source
	// file, whose lines errors are mapped back to); nil for files read as
	// they are.
	render *rendering
	// ent is the snapshot entry of a file read as it is (nil for a
	// rendered one): it remembers the file's parse result, and reads the
	// file again when its text was let go.
	ent *entry
}

// readable reports whether the input's text can be read (again): a
// rendered input's cannot, and stays.
func (in *input) readable() bool { return in.ent != nil && in.ent.readable() }

// load reads the file's content if it was not read yet.
func (in *input) load() error {
	if in.Data != nil || !in.readable() {
		return nil
	}
	data, err := in.ent.readData()
	if err != nil {
		return fmt.Errorf("read %s: %w", in.Path, err)
	}
	if data == nil {
		data = []byte{}
	}
	in.Data = data
	return nil
}

// fleetPaths is what gitfleet.yaml says to read.
type fleetPaths struct {
	paths    []string // repository-relative folders or files; [""] is the whole tree
	policies string
	explicit bool   // paths came from gitfleet.yaml
	config   []byte // gitfleet.yaml, to place errors at their line
}

// configError is an error at a field of gitfleet.yaml, at its line.
func (fp fleetPaths) configError(field, message string) schemas.Error {
	return schemas.ConfigFieldError(schemas.File{Path: ConfigFile, Data: fp.config}, field, message)
}

// readConfig reads spec.paths and spec.policies from gitfleet.yaml. A file
// that does not parse yields the defaults; validation reports its errors.
func readConfig(s *snapshot) (fleetPaths, error) {
	fp := fleetPaths{paths: []string{""}, policies: v1alpha1.DefaultPoliciesDir}
	if _, ok := s.files.Get(ConfigFile); !ok {
		return fp, nil
	}
	data, err := s.readFile(ConfigFile)
	if err != nil {
		return fp, err
	}
	var doc struct {
		Spec struct {
			Paths    []string `yaml:"paths"`
			Policies string   `yaml:"policies"`
		} `yaml:"spec"`
	}
	fp.config = data
	if yaml.Unmarshal(data, &doc) != nil {
		return fp, nil
	}
	if len(doc.Spec.Paths) > 0 {
		fp.paths, fp.explicit = doc.Spec.Paths, true
	}
	if doc.Spec.Policies != "" {
		fp.policies = doc.Spec.Policies
	}
	return fp, nil
}

// joinRel joins a relative path written in a user's file onto dir; ok is
// false when the result leaves the repository.
func joinRel(dir, rel string) (string, bool) {
	if path.IsAbs(rel) {
		return "", false
	}
	p := path.Join(dir, rel)
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", false
	}
	if p == "." {
		p = ""
	}
	return p, true
}

// hidden reports whether p is in or is a dot folder or file (.github, .ci).
func hidden(p string) bool {
	return strings.HasPrefix(p, ".") || strings.Contains(p, "/.")
}

// collect picks the files to validate from a snapshot: gitfleet.yaml, the
// YAML files under spec.paths (folders with a kustomization rendered), and
// the .cue files of the policies folder. Problems with spec.paths are
// returned as validation errors against gitfleet.yaml. The inputs are
// appended to buf[:0] (nil: a new slice).
func collect(s *snapshot, rc *renderCache, buf []input) ([]input, schemas.Errors, error) {
	ins, errs, _, err := collectListing(s, rc, buf)
	return ins, errs, err
}

// collectListing is collect, saying too whether the listing can be
// patched for the next commit (patchListing): nothing in it was rendered
// by kustomize and nothing was wrong with it.
func collectListing(s *snapshot, rc *renderCache, buf []input) (_ []input, _ schemas.Errors, patchable bool, _ error) {
	fp, err := readConfig(s)
	if err != nil {
		return nil, nil, false, err
	}
	var (
		out  = buf[:0] // buf: an emptied slice to fill, or nil
		errs schemas.Errors
		seen = map[string]bool{}
		// dedupe: a file may be listed twice (spec.paths names several
		// folders, or a file); one folder lists each file once.
		dedupe = true
		// tooMany: the file limit was reached (reported once).
		tooMany bool
		raw     []string
		kdirs   []string
	)
	addRaw := func(p string) error {
		if dedupe {
			if seen[p] {
				return nil
			}
			seen[p] = true
		}
		// A file whose parse result is cached was read before, and one
		// whose content fitted before fits: their size passed (asking a
		// loose object's size opens it: 30 µs a file through go-git, a
		// third of a second at a restart of 10,000 clusters).
		e := s.file(p)
		if e == nil {
			e = &entry{} // not listed: read as empty, as before
		}
		in, tooBig, err := s.inputOf(p, e)
		if err != nil {
			return err
		}
		if tooBig != nil {
			errs = append(errs, *tooBig)
			return nil
		}
		if len(out) >= MaxFiles {
			if !tooMany {
				tooMany = true
				errs = append(errs, schemas.Error{Path: p, Message: fmt.Sprintf("more than %d fleet files: a fleet repository is read up to %d files; narrow spec.paths", MaxFiles, MaxFiles)})
			}
			return nil
		}
		out = append(out, in)
		return nil
	}
	if _, ok := s.files.Get(ConfigFile); ok {
		if err := addRaw(ConfigFile); err != nil {
			return nil, nil, false, err
		}
	}
	direct := false // a spec.paths entry names a file
	for i, want := range fp.paths {
		p, ok := joinRel("", strings.TrimSuffix(want, "/"))
		field := fmt.Sprintf("spec.paths[%d]", i)
		if !ok {
			errs = append(errs, fp.configError(field, fmt.Sprintf("%q leaves the repository; give a folder inside it", want)))
			continue
		}
		if _, isFile := s.files.Get(p); isFile {
			raw = append(raw, p)
			direct = true
			continue
		}
		matched := false
		for _, f := range s.under(p) {
			if hidden(strings.TrimPrefix(f, p)) || !schemas.IsYAMLFile(f) || f == ConfigFile {
				continue
			}
			if isKustomization(path.Base(f)) {
				kdirs = append(kdirs, path.Dir(f))
			}
			raw = append(raw, f)
			matched = true
		}
		if !matched && fp.explicit {
			// The words of schemas.Load, so both commands say the same.
			errs = append(errs, fp.configError(field, fmt.Sprintf("%q matches no YAML file: fix the path or remove it", want)))
		}
	}
	ks, err := planKustomizations(s, kdirs)
	if err != nil {
		return nil, nil, false, err
	}
	// Sized once for the files listed, not grown file by file: a
	// revision of 10,000 clusters comes here at every commit.
	out = slices.Grow(out, len(raw))
	if len(fp.paths) == 1 && !direct {
		// Files of one folder, none of them gitfleet.yaml (read above),
		// and the policies below are .cue files: none is listed twice,
		// and 10,000 files need no set of what was seen.
		dedupe = false
	} else {
		grown := make(map[string]bool, len(seen)+len(raw))
		maps.Copy(grown, seen)
		seen = grown
	}
	for _, f := range raw {
		if ks.consumed(f) {
			continue
		}
		if err := addRaw(f); err != nil {
			return nil, nil, false, err
		}
	}
	for _, dir := range ks.roots {
		files, err := rc.render(s, dir)
		if err != nil {
			errs = append(errs, kustomizeError(dir, err))
			continue
		}
		out = append(out, files...)
	}
	pol, ok := joinRel("", strings.TrimSuffix(fp.policies, "/"))
	found := 0
	if ok && pol != "" {
		for _, f := range s.under(pol) {
			if path.Ext(f) == ".cue" && path.Dir(f) == pol {
				if err := addRaw(f); err != nil {
					return nil, nil, false, err
				}
				found++
			}
		}
	}
	// A policies folder written by hand that leaves the repository or holds
	// no policy would silently disable every policy: the words of
	// schemas.Load, so both commands say the same.
	if fp.policies != v1alpha1.DefaultPoliciesDir {
		switch {
		case !ok || pol == "":
			errs = append(errs, fp.configError("spec.policies", fmt.Sprintf("%q is outside the repository: policies are .cue files in a folder of the repository, like %s", fp.policies, v1alpha1.DefaultPoliciesDir)))
		case found == 0:
			errs = append(errs, fp.configError("spec.policies", fmt.Sprintf("%q holds no .cue file, so no policy would apply: fix the path, or remove spec.policies to use %s/", fp.policies, v1alpha1.DefaultPoliciesDir)))
		}
	}
	// Each file's place in the listing, for the next commit's patch.
	for i := range out {
		if e := out[i].ent; e != nil {
			e.place = int32(i + 1)
		}
	}
	return out, errs, len(errs) == 0 && len(kdirs) == 0, nil
}

// inputOf is the input of the file at p, whose entry is e: its size is
// checked unless it was parsed or found to fit before (asking a loose
// object's size opens it), and a file over MaxFileSize is not an input
// but the error tooBig.
func (s *snapshot) inputOf(p string, e *entry) (in input, tooBig *schemas.Error, err error) {
	key := e.inputKey(p)
	var data []byte // read while its size was asked
	if e.sizes() && !s.parsedBefore(e, key) && (s.fits == nil || !s.fits(e.key)) {
		n, content, err := e.sizeOf()
		if err != nil {
			return input{}, nil, fmt.Errorf("read %s: %w", p, err)
		}
		if n > MaxFileSize {
			return input{}, &schemas.Error{Path: p, Message: fmt.Sprintf("the file is %d bytes: fleet files are read up to %d (%s); split it into smaller files", n, MaxFileSize, humanBytes(MaxFileSize))}, nil
		}
		if s.fitted != nil {
			s.fitted(e.key)
		}
		data = content
	}
	return input{File: schemas.File{Path: p, Data: data}, key: key, ent: e}, nil, nil
}

// Limits on what a revision may make the daemon read: a fleet file (a YAML
// document, a policy) and the number of files. A commit over them is
// refused with an error naming the file, like any invalid commit.
const (
	MaxFileSize = 1 << 20
	MaxFiles    = 100000
)

func humanBytes(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
