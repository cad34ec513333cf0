package sources

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/gitfleet/gitfleet/schemas"
)

// kustomizationNames are the file names kustomize recognises.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

func isKustomization(name string) bool {
	for _, n := range kustomizationNames {
		if name == n {
			return true
		}
	}
	return false
}

// kustomizationFile returns the kustomization file of dir, or "".
func kustomizationFile(s *snapshot, dir string) string {
	for _, n := range kustomizationNames {
		p := path.Join(dir, n)
		if _, ok := s.files.Get(p); ok {
			return p
		}
	}
	return ""
}

func normDir(d string) string {
	if d == "." {
		return ""
	}
	return d
}

// kustomizePlan says which kustomizations are rendered on their own (roots:
// not inside another one's folder and not used by another as a base) and
// which files they consume, so those are not read raw as well.
type kustomizePlan struct {
	roots []string
	used  map[string]bool // files read by some kustomization
	dirs  []string        // every kustomization folder
}

func (k *kustomizePlan) consumed(f string) bool {
	if k.used[f] {
		return true
	}
	for _, d := range k.dirs {
		if d == "" || strings.HasPrefix(f, d+"/") {
			return true
		}
	}
	return false
}

func planKustomizations(s *snapshot, kdirs []string) (*kustomizePlan, error) {
	k := &kustomizePlan{used: map[string]bool{}}
	isBase := map[string]bool{}
	for _, d := range kdirs {
		d = normDir(d)
		k.dirs = append(k.dirs, d)
		c := newClosure(s)
		_ = c.add(d) // errors are reported when the root is rendered
		for f := range c.files {
			k.used[f] = true
		}
		for _, b := range c.kdirs {
			if b != d {
				isBase[b] = true
			}
		}
	}
	sort.Strings(k.dirs)
	for _, d := range k.dirs {
		nested := false
		for _, o := range k.dirs {
			if o != d && (o == "" || strings.HasPrefix(d, o+"/")) {
				nested = true
			}
		}
		if !nested && !isBase[d] {
			k.roots = append(k.roots, d)
		}
	}
	return k, nil
}

// closure gathers every file a kustomization may read: its folder, and every
// file or folder its kustomization file names, recursively.
type closure struct {
	s     *snapshot
	files map[string]bool
	kdirs []string
	seen  map[string]bool
}

func newClosure(s *snapshot) *closure {
	return &closure{s: s, files: map[string]bool{}, seen: map[string]bool{}}
}

// add adds the kustomization in dir and what it references.
func (c *closure) add(dir string) error {
	if c.seen[dir] {
		return nil
	}
	c.seen[dir] = true
	kf := kustomizationFile(c.s, dir)
	if kf == "" {
		return fmt.Errorf("%s: no kustomization.yaml in the folder", displayDir(dir))
	}
	c.kdirs = append(c.kdirs, dir)
	for _, f := range c.s.under(dir) {
		c.files[f] = true
	}
	data, err := c.s.readFile(kf)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		e := &schemas.Error{Path: kf, Message: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
		if m := yamlLine.FindStringSubmatch(e.Message); m != nil {
			e.Line, _ = strconv.Atoi(m[1])
			e.Message = "not valid YAML: " + e.Message[len(m[0]):]
		}
		return e
	}
	k := kustomization{path: kf, data: data}
	for _, key := range []string{"helmCharts", "helmChartInflationGenerator"} {
		if _, ok := doc[key]; ok {
			return k.error(key, key+":", "Helm runs a program, which gitfleet does not do; render the chart and commit its output")
		}
	}
	for _, key := range []string{"resources", "bases", "components"} {
		list, _ := doc[key].([]any)
		for _, v := range list {
			ref, _ := v.(string)
			if err := c.ref(dir, k, key, ref, true); err != nil {
				return err
			}
		}
	}
	// Other fields (patches, generators, configurations...) may name files;
	// take those that exist.
	var walkErr error
	walkStrings(doc, func(v string) {
		if walkErr == nil {
			walkErr = c.ref(dir, k, "", v, false)
		}
	})
	return walkErr
}

// yamlLine is where yaml.v3 says a syntax error is, after "yaml: ".
var yamlLine = regexp.MustCompile(`^not valid YAML: line (\d+): `)

// kustomization is a kustomization file as written, for errors at the
// line that names what is wrong.
type kustomization struct {
	path string
	data []byte
}

// error is an error at field of the kustomization, at the first place
// value is written (a list item, block or flow style, or a key; line
// unknown when it is nowhere, as written in another form).
func (k kustomization) error(field, value, msg string) error {
	e := &schemas.Error{Path: k.path, Field: field, Message: msg}
	for i, l := range strings.Split(string(k.data), "\n") {
		if at := scalarAt(l, value); at >= 0 && !strings.HasPrefix(strings.TrimSpace(l), "#") {
			e.Line, e.Col = i+1, at+1
			break
		}
	}
	return e
}

// scalarAt is where value is written whole on line l (not as a part of a
// longer value: ../base in ../base-common), or -1.
func scalarAt(l, value string) int {
	const around = " \t-[],{}:\"'#"
	for from := 0; ; {
		at := strings.Index(l[from:], value)
		if at < 0 {
			return -1
		}
		at += from
		end := at + len(value)
		if (at == 0 || strings.ContainsRune(around, rune(l[at-1]))) && (end == len(l) || strings.ContainsRune(around, rune(l[end]))) {
			return at
		}
		from = at + 1
	}
}

// ref adds one reference made by kustomization file k.
func (c *closure) ref(dir string, k kustomization, key, ref string, strict bool) error {
	if ref == "" {
		return nil
	}
	if strict && looksRemote(ref) {
		return k.error(key, ref, fmt.Sprintf("remote base %q refused: gitfleet renders only what is in the repository; copy it in (vendor it) and refer to the local folder", ref))
	}
	p, ok := joinRel(dir, ref)
	if !ok {
		if strict {
			return k.error(key, ref, fmt.Sprintf("%q is outside the repository; only files in the repository can be used", ref))
		}
		return nil
	}
	if _, isFile := c.s.files.Get(p); isFile {
		c.files[p] = true
		return c.checkFunction(k, key, ref, p)
	}
	if p != "" && c.s.isDir(p) {
		if kustomizationFile(c.s, p) != "" {
			return c.add(p)
		}
		if strict {
			return k.error(key, ref, fmt.Sprintf("%q is a folder without a kustomization.yaml: add one, or name its files", ref))
		}
		return nil
	}
	if strict {
		return k.error(key, ref, fmt.Sprintf("%q does not exist at this revision: fix the path, or commit the file", ref))
	}
	return nil
}

// checkFunction refuses KRM function configs: gitfleet does not run
// programs or containers from the repository.
func (c *closure) checkFunction(k kustomization, key, ref, p string) error {
	data, err := c.s.readFile(p)
	if err != nil {
		return err
	}
	for _, marker := range []string{"config.kubernetes.io/function", "config.k8s.io/function"} {
		if bytes.Contains(data, []byte(marker)) {
			return k.error(key, ref, fmt.Sprintf("%s is an exec or container plugin (%s), which gitfleet does not run; commit the generated output instead", p, marker))
		}
	}
	return nil
}

func looksRemote(ref string) bool {
	return strings.Contains(ref, "://") || strings.HasPrefix(ref, "git@") ||
		strings.HasPrefix(ref, "github.com/") || strings.HasPrefix(ref, "gitlab.com/") ||
		strings.Contains(ref, "?ref=") || strings.Contains(ref, ".git//")
}

func walkStrings(v any, fn func(string)) {
	switch v := v.(type) {
	case string:
		fn(v)
	case []any:
		for _, e := range v {
			walkStrings(e, fn)
		}
	case map[string]any:
		for _, e := range v {
			walkStrings(e, fn)
		}
	}
}

func displayDir(d string) string {
	if d == "" {
		return "."
	}
	return d
}

func kustomizeError(dir string, err error) schemas.Error {
	// An error in a kustomization file names that file and its line.
	if se := (*schemas.Error)(nil); errors.As(err, &se) {
		return *se
	}
	return schemas.Error{Path: path.Join(dir, "kustomization.yaml"), Message: strings.TrimPrefix(err.Error(), "kustomize: ")}
}

// renderCache keeps each kustomization's output by the hash of its inputs.
type renderCache struct {
	mu sync.Mutex
	m  map[string][]input
}

func newRenderCache() *renderCache { return &renderCache{m: map[string][]input{}} }

const maxRenderCache = 256

// originAnnotation is where kustomize says which file a resource came from.
const originAnnotation = "config.kubernetes.io/origin"

// render builds the kustomization in dir on an in-memory file system made
// of the files it may read, and splits the output by source file.
func (rc *renderCache) render(s *snapshot, dir string) ([]input, error) {
	c := newClosure(s)
	if err := c.add(dir); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKustomize, err)
	}
	files := make([]string, 0, len(c.files))
	for f := range c.files {
		files = append(files, f)
	}
	sort.Strings(files)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", dir)
	for _, f := range files {
		fmt.Fprintf(h, "%s %s\n", f, s.file(f).key)
	}
	key := hex.EncodeToString(h.Sum(nil))
	rc.mu.Lock()
	out, ok := rc.m[key]
	rc.mu.Unlock()
	if ok {
		return out, nil
	}
	out, err := build(s, dir, files)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrKustomize, displayDir(dir), err)
	}
	rc.mu.Lock()
	if len(rc.m) >= maxRenderCache {
		clear(rc.m)
	}
	rc.m[key] = out
	rc.mu.Unlock()
	return out, nil
}

func build(s *snapshot, dir string, files []string) ([]input, error) {
	fs := filesys.MakeFsInMemory()
	root := kustomizationFile(s, dir)
	texts := make(map[string][]byte, len(files)) // as written
	for _, f := range files {
		data, err := s.readFile(f)
		if err != nil {
			return nil, err
		}
		texts[f] = data
		if f == root {
			data, err = withOriginAnnotations(data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
		}
		if err := fs.WriteFile("/"+f, data); err != nil {
			return nil, err
		}
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(fs, "/"+dir)
	if err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), "/"+dir+"/", ""))
	}
	byFile := map[string]*bytes.Buffer{}
	var order []string
	for _, res := range m.Resources() {
		src := originPath(res, dir, root)
		if err := stripOrigin(res); err != nil {
			return nil, err
		}
		y, err := res.AsYAML()
		if err != nil {
			return nil, err
		}
		b := byFile[src]
		if b == nil {
			b = &bytes.Buffer{}
			byFile[src] = b
			order = append(order, src)
		} else {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	// The files read that are no object's source (kustomization files,
	// patches) are kept for a value the rendering sets.
	by := &kustomized{file: root, texts: map[string][]byte{}}
	for f, data := range texts {
		if _, isSource := byFile[f]; !isSource || f == root {
			by.texts[f] = data
		}
	}
	out := make([]input, 0, len(order))
	for _, src := range order {
		data := byFile[src].Bytes()
		sum := sha256.Sum256(data)
		in := input{File: schemas.File{Path: src, Data: data}, key: hex.EncodeToString(sum[:]) + " " + src}
		if src != root {
			in.render = &rendering{source: texts[src], by: by}
		}
		out = append(out, in)
	}
	return out, nil
}

// rendering is where a kustomize-rendered input comes from: the text of
// its source file, and the rendering of the kustomization that made it.
type rendering struct {
	source []byte
	by     *kustomized
}

// kustomized is one rendering of a kustomization: its file (the root's),
// and the files it read that are no object's source (kustomization files,
// patches), as written, where a value the rendering sets is looked for.
type kustomized struct {
	file  string
	texts map[string][]byte
}

// withOriginAnnotations adds buildMetadata: [originAnnotations] to a
// kustomization so every output resource names its source file.
func withOriginAnnotations(data []byte) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc == nil {
		doc = map[string]any{}
	}
	meta, _ := doc["buildMetadata"].([]any)
	for _, m := range meta {
		if m == "originAnnotations" {
			return data, nil
		}
	}
	doc["buildMetadata"] = append(meta, "originAnnotations")
	return yaml.Marshal(doc)
}

// originPath is the repository path of the file a resource came from, or
// the kustomization file for generated resources.
func originPath(res *resource.Resource, dir, root string) string {
	v, ok := res.GetAnnotations()[originAnnotation]
	if !ok {
		return root
	}
	var o struct {
		Path string `yaml:"path"`
		Repo string `yaml:"repo"`
	}
	if yaml.Unmarshal([]byte(v), &o) != nil || o.Path == "" || o.Repo != "" {
		return root
	}
	p, ok := joinRel(dir, o.Path)
	if !ok {
		return root
	}
	return p
}

func stripOrigin(res *resource.Resource) error {
	ann := res.GetAnnotations()
	if _, ok := ann[originAnnotation]; !ok {
		return nil
	}
	delete(ann, originAnnotation)
	return res.SetAnnotations(ann)
}
