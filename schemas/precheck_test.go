package schemas

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/parser"

	"github.com/gitfleet/gitfleet/fixtures"
)

// richCluster, richHealthCheck and richMachineDeployment write every field
// of their kinds, so that the mutations below reach every place of the
// schema.
const richCluster = `apiVersion: gitfleet.io/v1alpha1
kind: Cluster
metadata:
  name: rich-1
  labels: {env: prod, region: eu-1}
  annotations: {owner: team-a}
spec:
  paused: false
  clusterNetwork:
    pods: {cidrBlocks: [10.244.0.0/16]}
    services: {cidrBlocks: [10.96.0.0/12, "fd00::/108"]}
    serviceDomain: cluster.local
  topology:
    classRef: {name: standard}
    version: v1.31.2
    controlPlane:
      metadata: {labels: {tier: cp}}
      replicas: 3
      healthCheck:
        enabled: true
        checks:
          nodeStartupTimeoutSeconds: 600
          unhealthyNodeConditions:
            - {type: Ready, status: Unknown, timeoutSeconds: 300}
        remediation:
          triggerIf: {unhealthyLessThanOrEqualTo: 40%}
    workers:
      machineDeployments:
        - class: default-worker
          name: md-0
          replicas: 2
          failureDomain: zone-a
          metadata: {annotations: {note: x}}
          rollout:
            strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 25%}}
            after: "2026-12-01T00:00:00Z"
          deletion: {order: Oldest}
          minReadySeconds: 10
          machineNaming: {template: "{{ .cluster.name }}-{{ .random }}"}
          healthCheck:
            enabled: false
            checks: {unhealthyNodeConditions: [{type: Ready, status: "False", timeoutSeconds: 60}]}
            remediation: {triggerIf: {unhealthyInRange: "[1-3]"}, maxInFlight: 1}
    variables:
      - {name: workerCPUs, value: 4}
      - {name: extra, value: {a: [1, 2]}}
`

const richHealthCheck = `apiVersion: gitfleet.io/v1alpha1
kind: MachineHealthCheck
metadata: {name: rich-1-workers}
spec:
  clusterName: rich-1
  selector:
    matchLabels: {pool: md-0}
    matchExpressions: [{key: tier, operator: In, values: [a, b]}]
  checks:
    nodeStartupTimeoutSeconds: 0
    unhealthyNodeConditions: [{type: Ready, status: Unknown, timeoutSeconds: 1}]
  remediation: {triggerIf: {unhealthyLessThanOrEqualTo: 2}}
`

const richMachineDeployment = `apiVersion: gitfleet.io/v1alpha1
kind: MachineDeployment
metadata: {name: rich-1-docker, labels: {pool: docker}}
spec:
  clusterName: rich-1
  replicas: 2
  version: v1.31.2
  failureDomain: zone-b
  template:
    provider: docker
    spec: {cpus: 1.5, memory: 512Mi, heartbeatInterval: 3s, startupDelay: 100ms}
  rollout: {strategy: {type: OnDelete}}
  deletion: {order: Newest}
  minReadySeconds: 0
  machineNaming: {template: "{{ .machineSet.name }}-{{ .random }}"}
  remediation: {maxInFlight: 50%}
`

type corpusDoc struct {
	path string
	kind string
	m    map[string]any
}

// precheckCorpus is every fleet document of the fixtures, good and broken,
// and the two above.
func precheckCorpus(t testing.TB) []corpusDoc {
	t.Helper()
	files := map[string][]byte{"rich/cluster.yaml": []byte(richCluster), "rich/mhc.yaml": []byte(richHealthCheck),
		"rich/md.yaml": []byte(richMachineDeployment)}
	err := filepath.WalkDir("../fixtures", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			files[p], err = os.ReadFile(p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusDoc
	for _, p := range keys(files) {
		docs, _ := splitYAML(p, files[p])
		for _, d := range docs {
			m, ok := d.value.(map[string]any)
			if !ok {
				continue
			}
			if kind, _ := m["kind"].(string); kindDefs[kind] != "" {
				out = append(out, corpusDoc{path: p, kind: kind, m: m})
			}
		}
	}
	if len(out) < 50 {
		t.Fatalf("only %d documents in the corpus", len(out))
	}
	return out
}

// cueVerdict is what CUE says of m as a kind, every error.
func cueVerdict(c *compiled, kind string, m map[string]any) error {
	return c.kinds[kind].Unify(c.ctx.Encode(m)).Validate(cue.Concrete(true), cue.All())
}

// TestPrecheckAcceptsValidDocuments: a valid document is not unified by
// CUE; that is the precheck's point.
func TestPrecheckAcceptsValidDocuments(t *testing.T) {
	c, err := compileSchema()
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for _, d := range precheckCorpus(t) {
		if strings.Contains(d.path, "broken") {
			continue
		}
		if err := cueVerdict(c, d.kind, d.m); err != nil {
			if strings.HasPrefix(d.path, "rich/") {
				t.Errorf("%s is meant to be valid: %v", d.path, err)
			}
			continue
		}
		if !c.precheck(d.kind, d.m) {
			t.Errorf("%s (%s): valid, and the precheck leaves it to CUE", d.path, d.kind)
			continue
		}
		accepted++
	}
	if accepted < 5 {
		t.Errorf("the precheck accepted %d valid documents", accepted)
	}
}

// TestPrecheckNeverAcceptsWhatCUERejects mutates every document of the
// corpus many times (values swapped for others of every kind, fields
// removed, fields added, lists and maps where scalars go) and holds the
// precheck to its promise: whatever it accepts, CUE accepts too.
func TestPrecheckNeverAcceptsWhatCUERejects(t *testing.T) {
	c, err := compileSchema()
	if err != nil {
		t.Fatal(err)
	}
	// Mostly mutants of documents the precheck accepts as they are, whose
	// one change it may or may not see; some of the others (broken ones,
	// and those with a machine template, which CUE always checks).
	var corpus []corpusDoc
	for _, d := range precheckCorpus(t) {
		n := 2
		if c.precheck(d.kind, d.m) {
			n = 40
		}
		for range n {
			corpus = append(corpus, d)
		}
	}
	names := precheckFieldNames()
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	r := rand.New(rand.NewPCG(14, 2026))
	accepted, rejected := 0, 0
	for i := range len(corpus) * rounds {
		if i%200 == 0 {
			if c, err = compileSchema(); err != nil {
				t.Fatal(err)
			}
		}
		d := corpus[i%len(corpus)]
		m := mutate(r, d.m, names, 1+r.IntN(3)/2)
		if !c.precheck(d.kind, m) {
			rejected++
			continue
		}
		accepted++
		if err := cueVerdict(c, d.kind, m); err != nil {
			t.Errorf("%s (%s): the precheck accepted a document CUE rejects: %v\n%#v", d.path, d.kind, err, m)
		}
	}
	t.Logf("%d mutants accepted, %d left to CUE", accepted, rejected)
	if accepted < len(corpus)*rounds/10 || rejected < len(corpus)*rounds/10 {
		t.Errorf("the mutants do not exercise both sides: %d accepted, %d left to CUE", accepted, rejected)
	}
}

// TestPrecheckTemplateNeverAcceptsWhatCUERejects holds the precheck of a
// machine template alone (a class's patched template, which validation
// checks for every cluster) to the same promise, over every template of the
// corpus's classes and MachineDeployments and many mutants of each; and it
// must accept the valid ones of known providers, or it spares nothing.
func TestPrecheckTemplateNeverAcceptsWhatCUERejects(t *testing.T) {
	c, err := compileSchema()
	if err != nil {
		t.Fatal(err)
	}
	def := c.root.LookupPath(cue.MakePath(cue.Def("#MachineTemplate")))
	verdict := func(m map[string]any) error {
		return def.Unify(c.ctx.Encode(m)).Validate(cue.Concrete(true), cue.All())
	}
	var templates []map[string]any
	var find func(x any)
	find = func(x any) {
		switch v := x.(type) {
		case map[string]any:
			if _, ok := v["provider"].(string); ok {
				templates = append(templates, v)
				return
			}
			for _, k := range keys(v) {
				find(v[k])
			}
		case []any:
			for _, e := range v {
				find(e)
			}
		}
	}
	for _, d := range precheckCorpus(t) {
		find(d.m)
	}
	valid := 0
	for _, m := range templates {
		// An unknown provider's template is CUE's (and validation reports
		// the provider before it checks a spec).
		if _, known := allPrechecks().providers[m["provider"].(string)]; known && verdict(m) == nil {
			valid++
			if !c.precheckTemplate(m) {
				t.Errorf("a valid template left to CUE: %#v", m)
			}
		}
	}
	if valid < 5 {
		t.Fatalf("only %d valid templates in the corpus", valid)
	}
	names := precheckFieldNames()
	r := rand.New(rand.NewPCG(27, 11))
	accepted, rejected := 0, 0
	for i := range len(templates) * 200 {
		m := mutate(r, templates[i%len(templates)], names, 1+r.IntN(3)/2)
		if !c.precheckTemplate(m) {
			rejected++
			continue
		}
		accepted++
		if err := verdict(m); err != nil {
			t.Errorf("the precheck accepted a template CUE rejects: %v\n%#v", err, m)
		}
	}
	t.Logf("%d templates, %d mutants accepted, %d left to CUE", len(templates), accepted, rejected)
	if accepted < len(templates)*20 || rejected < len(templates)*20 {
		t.Errorf("the mutants do not exercise both sides: %d accepted, %d left to CUE", accepted, rejected)
	}
}

// FuzzPrecheck: any YAML document the precheck accepts, CUE accepts.
func FuzzPrecheck(f *testing.F) {
	addDocumentSeeds(f, "clusters/dev-1.yaml", "clusters/prod-1.yaml", "gitfleet.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		eachFuzzedDocument(data, func(c *compiled, kind string, m map[string]any) {
			if c.precheck(kind, m) {
				if err := cueVerdict(c, kind, m); err != nil {
					t.Fatalf("the precheck accepted a document CUE rejects: %v", err)
				}
			}
		})
	})
}

// addDocumentSeeds seeds f with the named files of gitfleet init's fleet
// and the rich documents above.
func addDocumentSeeds(f *testing.F, initFiles ...string) {
	for _, p := range initFiles {
		b, err := fs.ReadFile(fixtures.Init(), p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(richCluster))
	f.Add([]byte(richHealthCheck))
	f.Add([]byte(richMachineDeployment))
}

// eachFuzzedDocument calls fn, in a pooled context, with each document of
// data that is a mapping of a fleet kind, decoded without errors.
func eachFuzzedDocument(data []byte, fn func(c *compiled, kind string, m map[string]any)) {
	docs, _ := splitYAML("fuzz.yaml", data)
	c := getValidator()
	defer putValidator(c)
	for _, d := range docs {
		m, ok := d.value.(map[string]any)
		if !ok || len(d.errs) > 0 {
			continue
		}
		kind, _ := m["kind"].(string)
		if kindDefs[kind] == "" {
			continue
		}
		c.used++
		fn(c, kind, m)
	}
}

// TestPrecheckSchemaAssumptions reads the schema's sources for what the
// precheck's walk assumes: each scalar's constraint is about that scalar
// alone (no reference to another field, no builtin but the scalar
// validators), the only comprehension is the machine template's, whose
// place the walk leaves to CUE, and the only pattern is [string] (another,
// like [=~"^x"], would not be found by the walk's lookup of [string] and
// an open struct would let its fields through unchecked). A schema change
// that breaks one fails here,
// naming what to look at.
func TestPrecheckSchemaAssumptions(t *testing.T) {
	srcs, err := schemaSources()
	if err != nil {
		t.Fatal(err)
	}
	scalarValidators := map[string]bool{"strings.MaxRunes": true, "net.IPCIDR": true, "time.Time": true}
	plain := map[string]bool{"string": true, "int": true, "uint": true, "bool": true, "number": true, "float": true,
		"bytes": true, "null": true, "_": true, "net": true, "strings": true, "time": true}
	templates := 0
	for _, name := range keys(srcs) {
		f, err := parser.ParseFile(name, srcs[name])
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.Field); ok && fmt.Sprint(fd.Label) == "#MachineTemplate" {
				templates++
				b, err := format.Node(fd.Value)
				if err != nil {
					t.Fatal(err)
				}
				if got := strings.Join(strings.Fields(string(b)), " "); got != mirroredTemplate {
					t.Errorf("%s: #MachineTemplate is now\n%s\nprecheck.go's acceptsTemplate mirrors\n%s\nmake them agree", name, got, mirroredTemplate)
				}
			}
		}
		var stack []string // the labels of the fields around
		skip := map[ast.Node]bool{}
		inTemplate := func() bool { return slices.Contains(stack, "#MachineTemplate") }
		ast.Walk(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Package, *ast.ImportDecl, *ast.Attribute:
				return false
			case *ast.Field:
				label := fmt.Sprint(n.Label)
				if id, ok := n.Label.(*ast.Ident); ok {
					label = id.Name
					skip[id] = true
				}
				if l, ok := n.Label.(*ast.ListLit); ok {
					// A pattern: the walk looks up [string]'s alone.
					if id, ok := l.Elts[0].(*ast.Ident); len(l.Elts) != 1 || !ok || id.Name != "string" {
						t.Errorf("%s: a pattern other than [string] at %v: the precheck does not look it up; "+
							"make its struct opaque in precheck.go", name, n.Pos())
					}
				}
				stack = append(stack, label)
			case *ast.SelectorExpr:
				skip[n.Sel] = true
			case *ast.Comprehension:
				if !inTemplate() {
					t.Errorf("%s: a comprehension outside #MachineTemplate at %v: the precheck's tree does not follow it; "+
						"make its place opaque in precheck.go (as the template's is)", name, n.Pos())
				}
			case *ast.CallExpr:
				fn := fmt.Sprint(n.Fun)
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
					fn = fmt.Sprintf("%v.%v", sel.X, sel.Sel)
				}
				if !scalarValidators[fn] {
					t.Errorf("%s: %s at %v: the precheck leaves only scalars to CUE; if %s constrains a scalar, add it to "+
						"scalarValidators here, otherwise make its place opaque in precheck.go", name, fn, n.Pos(), fn)
				}
			case *ast.Ident:
				if !skip[n] && !plain[n.Name] && !strings.HasPrefix(n.Name, "#") && !strings.HasPrefix(n.Name, "_") && !inTemplate() {
					t.Errorf("%s: %s at %v refers to another field: the precheck judges each scalar alone; "+
						"make this place opaque in precheck.go", name, n.Name, n.Pos())
				}
			}
			return true
		}, func(n ast.Node) {
			if _, ok := n.(*ast.Field); ok {
				stack = stack[:len(stack)-1]
			}
		})
	}
	if templates != 1 {
		t.Errorf("#MachineTemplate found %d times in the schema's sources, want once", templates)
	}
}

// TestPrecheckLeavesChoicesToCUE: a choice of structs or lists, written
// in place or behind a definition, is CUE's to make; so is a list with
// fixed elements.
func TestPrecheckLeavesChoicesToCUE(t *testing.T) {
	v := cuecontext.New().CompileString(`
#A: {a: int}
#B: {b: string}
#AB: #A | #B
behind: #AB
inPlace: #A | #B
withDefault: *#A | #B
lists: [...int] | [...string]
fixed: [int, ...string]
`)
	if err := v.Err(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"behind", "inPlace", "withDefault", "lists", "fixed"} {
		if n := new(prechecks).build("X", v.LookupPath(cue.ParsePath(f)), nil, 0); !n.opaque {
			t.Errorf("%s: the walk would follow it (%+v)", f, n)
		}
	}
	elems := cuecontext.New().CompileString("#A: {a: int}\n#B: {b: string}\n#AB: #A | #B\nl: [...#AB]\n").LookupPath(cue.ParsePath("l"))
	if n := new(prechecks).build("X", elems, nil, 0); n.elem == nil || !n.elem.opaque {
		t.Errorf("a list of a choice of structs: its elements would be walked (%+v)", n)
	}
}

// mirroredTemplate is #MachineTemplate as acceptsTemplate mirrors it, its
// white space folded.
const mirroredTemplate = `{ provider: string @help("is not a known provider") if #providers[provider] != _|_ { spec?: #providers[provider] } ` +
	`if #providers[provider] == _|_ { spec?: {...} } }`

// precheckFieldNames is every field name of every kind's tree, for the
// mutations to add.
func precheckFieldNames() []string {
	seen := map[string]bool{"zzz": true}
	var walk func(n *pnode)
	walk = func(n *pnode) {
		if n == nil {
			return
		}
		for name, f := range n.fields {
			seen[name] = true
			walk(f.n)
		}
		walk(n.pattern)
		walk(n.elem)
	}
	for _, n := range allPrechecks().kinds {
		walk(n)
	}
	return keys(seen)
}

// mutationValues are values of every kind, some of which fit some places.
var mutationValues = []func() any{
	func() any { return nil }, func() any { return true }, func() any { return false },
	func() any { return int64(-1) }, func() any { return int64(0) }, func() any { return int64(1) },
	func() any { return int64(3) }, func() any { return int64(10000) }, func() any { return int64(10001) },
	func() any { return int64(2147483648) }, func() any { return 1.5 }, func() any { return 2.0 },
	func() any { return "" }, func() any { return "v1.31.2" }, func() any { return "v1.31" },
	func() any { return "10.0.0.0/8" }, func() any { return "10.0.0.300/8" }, func() any { return "25%" },
	func() any { return "RollingUpdate" }, func() any { return "Oldest" }, func() any { return "Unknown" },
	func() any { return "In" }, func() any { return "2026-12-01T00:00:00Z" }, func() any { return "ok-name" },
	func() any { return "Not_A_Name" }, func() any { return strings.Repeat("a", 64) }, func() any { return "a.b" },
	func() any { return "gitfleet.io/v1alpha1" }, func() any { return "Cluster" }, func() any { return "[1-3]" },
	func() any { return "1s" }, func() any { return "3" },
	func() any { return map[string]any{} }, func() any { return []any{} }, func() any { return []any{"x"} },
	func() any { return []any{int64(1)} }, func() any { return map[string]any{"k": "v"} },
	func() any { return map[string]any{"k": int64(1)} },
}

// mutate returns a deep copy of m changed in times places.
func mutate(r *rand.Rand, m map[string]any, names []string, times int) map[string]any {
	out := deepCopy(m).(map[string]any)
	for range times {
		var slots []func(op int)
		var collect func(x any)
		collect = func(x any) {
			switch v := x.(type) {
			case map[string]any:
				for _, k := range keys(v) {
					slots = append(slots, func(op int) {
						switch op {
						case 0:
							delete(v, k)
						case 1:
							v[names[r.IntN(len(names))]] = mutationValues[r.IntN(len(mutationValues))]()
						default:
							v[k] = mutationValues[r.IntN(len(mutationValues))]()
						}
					})
					collect(v[k])
				}
			case []any:
				for i := range v {
					slots = append(slots, func(op int) { v[i] = mutationValues[r.IntN(len(mutationValues))]() })
					collect(v[i])
				}
			}
		}
		collect(out)
		if len(slots) > 0 {
			slots[r.IntN(len(slots))](r.IntN(4))
		}
	}
	return out
}

func deepCopy(x any) any {
	switch v := x.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	}
	return x
}

// nativeLeafValues are strings at and around the edges of the schema's
// string constraints: names, labels, versions, durations, percentages.
func nativeLeafValues(t testing.TB, corpus bool) []string {
	vals := []string{"", "a", "a-", "-a", "a-b", "a.b", "a..b", ".a", "a.", "A", "aB", "a_b", "a b", "a\n", "\na",
		"é", "ａ", "a\u0301", "0", "9x", "x9", "v1.31.2", "v1.31", "v1.31.2-rc.1", "V1.31.2", "v01.2.3", "1.31.2",
		"10s", "1.5h", "1h30m", "3µs", "3us", "s", "25%", "100%", "%", "25 %", "[1-3]", "[1-]", "x_y", "_x", "9x",
		"aé", "a.b-c.d", strings.Repeat("a", 62), strings.Repeat("a", 63), strings.Repeat("a", 64),
		strings.Repeat("é", 63), strings.Repeat("é", 64), strings.Repeat("a", 252), strings.Repeat("a", 253),
		strings.Repeat("a", 254), strings.Repeat("a.", 126) + "a", strings.Repeat("a.", 127) + "a",
		strings.Repeat("é", 253), strings.Repeat("é", 254)}
	if !corpus {
		return vals
	}
	for _, d := range precheckCorpus(t) {
		var walk func(x any)
		walk = func(x any) {
			switch v := x.(type) {
			case string:
				vals = append(vals, v)
			case map[string]any:
				for k, e := range v {
					vals = append(vals, k)
					walk(e)
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			}
		}
		walk(d.m)
	}
	return vals
}

// nativeVerdicts compares each native leaf's verdict on s with CUE's.
func nativeVerdicts(t testing.TB, c *compiled, p *prechecks, s string) {
	for i, l := range p.leaves {
		if l.native == nil {
			continue
		}
		lv := c.leafValue(p, i)
		want := lv.Unify(c.ctx.Encode(s)).Validate(cue.Concrete(true)) == nil
		if got := l.native.accepts(s); got != want {
			t.Fatalf("leaf %v of %s (%v): Go says %v of %q, CUE %v", l.path, l.kind, lv, got, s, want)
		}
	}
}

// TestNativeLeavesAreCUEs: a string constraint checked in Go gives CUE's
// verdict on every string of the fixtures and the edges of each constraint;
// and the schema's names, labels and versions are checked in Go, or the
// cold validation of a fleet unifies each name.
func TestNativeLeavesAreCUEs(t *testing.T) {
	c, err := compileSchema()
	if err != nil {
		t.Fatal(err)
	}
	p := allPrechecks()
	native := map[string]bool{}
	for _, l := range p.leaves {
		if l.native != nil {
			native[l.kind+" "+fmt.Sprint(l.path)] = true
		}
	}
	for _, want := range []string{"Cluster [{metadata false 0} {name false 0}]", "ClusterClass [{spec false 0} {version true 0}]",
		"MachineHealthCheck [{spec false 0} {clusterName false 0}]"} {
		if !native[want] {
			t.Errorf("%s is not checked in Go; native leaves: %v", want, keys(native))
		}
	}
	t.Logf("%d of %d leaves checked in Go", len(native), len(p.leaves))
	for _, s := range nativeLeafValues(t, true) {
		nativeVerdicts(t, c, p, s)
	}
}

// FuzzNativeLeaves: for any string, each native leaf's verdict is CUE's.
func FuzzNativeLeaves(f *testing.F) {
	for _, s := range nativeLeafValues(f, false) {
		f.Add(s)
	}
	p := allPrechecks()
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // a YAML string is UTF-8
		}
		c := getValidator()
		defer putValidator(c)
		c.used++
		nativeVerdicts(t, c, p, s)
	})
}
