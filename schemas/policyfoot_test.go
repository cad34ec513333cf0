package schemas

import (
	"io/fs"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"github.com/gitfleet/gitfleet/fixtures"
	"github.com/google/go-cmp/cmp"
)

// footPolicies are policies whose footprints the reading follows, one for
// each construct it reads, with each footprint written out: a field's name,
// "*" where the document's value counts whole.
var footPolicies = []struct {
	name, src string
	feet      map[string]string
	fits      []any // values that fit the policy's places, for mutants to write there often
}{
	{"init", "", map[string]string{
		"Cluster": "{metadata:{labels:{env:*}} spec:{topology:{controlPlane:{replicas:*}}}}"}, nil},
	{"teams", `#Teams: "payments" | "search"
Cluster: metadata: labels: team: #Teams @help("is not a team of this fleet")
`, map[string]string{"Cluster": "{metadata:{labels:{team:*}}}"}, []any{"payments", "search"}},
	{"clauses", `import "strings"

Cluster: {
	metadata: name: string
	if metadata.labels.tier != _|_ if metadata.labels.tier == "gold" {
		spec: topology: controlPlane: replicas: 5
	}
	spec: topology: {
		version?: string
		if version != _|_ if strings.HasPrefix(version, "v1.31") {
			controlPlane: replicas: >=3
		}
		workers?: machineDeployments?: [...{replicas?: <=2}]
	}
}
ClusterClass: {
	spec: workers: machineDeployments: [...{class: =~"^[a-z]+-"}]
	let n = len(spec.workers.machineDeployments)
	if n > 1 {
		metadata: labels: big: "true"
	}
}
MachineHealthCheck: {
	spec: checks: unhealthyNodeConditions?: [...]
	if spec.checks.unhealthyNodeConditions != _|_
	for i, c in spec.checks.unhealthyNodeConditions if c.type == "Ready" && i == 0 {
		spec: checks: nodeStartupTimeoutSeconds: >=60
	}
}
`, map[string]string{
		"Cluster":            "{metadata:{labels:{tier:*} name:*} spec:{topology:{controlPlane:{replicas:*} version:* workers:{machineDeployments:*}}}}",
		"ClusterClass":       "{metadata:{labels:{big:*}} spec:{workers:{machineDeployments:*}}}",
		"MachineHealthCheck": "{spec:{checks:{nodeStartupTimeoutSeconds:* unhealthyNodeConditions:*}}}",
	}, []any{int64(60), int64(90), "v1.31.2", int64(3), []any{map[string]any{"type": "MemoryPressure", "status": "True"}},
		[]any{map[string]any{"type": "Ready", "status": "Unknown"}}, "gold", map[string]any{"tier": "gold"}}},
	// Values the footprint keeps whole may be structs, closed definitions
	// and choices of structs: they meet the document's whole value there.
	{"whole structs", `#CP: {replicas?: 1 | 3 | 5, ...}
#Strategy: {type: "RollingUpdate", rollingUpdate: {maxSurge: 0 | 1, ...}} | {type: "OnDelete"}
Cluster: spec: topology: controlPlane: #CP
Cluster: spec: clusterNetwork: {serviceDomain: "cluster.local"} | {pods: _}
MachineDeployment: spec: rollout?: strategy?: #Strategy
MachineDeployment: spec: template: close({provider: "docker" | "inmemory", spec?: _})
`, map[string]string{
		"Cluster":           "{spec:{clusterNetwork:* topology:{controlPlane:*}}}",
		"MachineDeployment": "{spec:{rollout:{strategy:*} template:*}}",
	}, []any{map[string]any{"provider": "docker"}, map[string]any{"type": "OnDelete"},
		map[string]any{"replicas": int64(3), "machineTemplate": map[string]any{"provider": "docker"}}}},
	// A reference to the file's own fields (another kind's policy, a
	// definition) is the policy's value, not the document's: the kind's
	// footprint does not hold it, and the test below fails if CUE read it
	// from the document.
	{"the file's own fields", `#max: 5
#shared: team: "payments"
Cluster: {
	if Cluster.spec.topology.version != _|_ {
		metadata: labels: pinned: "yes"
	}
	if ClusterClass.metadata.name == "x" {
		metadata: labels: team: #shared.team
	}
	spec: topology: controlPlane: replicas?: <=#max
}
ClusterClass: metadata: name: "x"
`, map[string]string{
		"Cluster":      "{metadata:{labels:{pinned:* team:*}} spec:{topology:{controlPlane:{replicas:*}}}}",
		"ClusterClass": "{metadata:{name:*}}",
	}, nil},
	// A kind the reading does not follow has no footprint; the others
	// of its file keep theirs.
	{"refused", `#Base: {metadata: name: string}
Cluster: #Base
ClusterClass: {[string]: _}
MachineDeployment: spec: {replicas?: <=10, ...}
MachineHealthCheck: {#Base, spec: clusterName: string}
`, map[string]string{}, nil},
	{"refused builtins and aliases", `Cluster: close({metadata: _, apiVersion: _, kind: _, spec: _})
ClusterClass: {X=metadata: name: string, spec: workers: machineDeployments: [...{class: X.name}]}
MachineDeployment: {_local: 3, spec: replicas: <=_local}
MachineHealthCheck: spec: clusterName: string
`, map[string]string{"MachineHealthCheck": "{spec:{clusterName:*}}"}, nil},
	{"refused everywhere", `if true {
	Cluster: metadata: name: string
}
MachineHealthCheck: spec: clusterName: string
`, nil, nil},
}

func footPolicySource(t testing.TB, i int) []byte {
	t.Helper()
	if footPolicies[i].src != "" {
		return []byte(footPolicies[i].src)
	}
	b, err := fs.ReadFile(fixtures.Init(), "policies/prod.cue")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (fp *footprint) String() string {
	if fp.whole {
		return "*"
	}
	var parts []string
	for _, n := range fp.names {
		parts = append(parts, n+":"+fp.kids[n].String())
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// project returns the document's values at the footprint's places: what a
// policy with this footprint sees of x, the value whose encoding key is.
func (fp *footprint) project(x any) any {
	if fp.whole {
		return x
	}
	m, ok := x.(map[string]any)
	if !ok {
		return x
	}
	out := map[string]any{}
	for _, name := range fp.names {
		if v, ok := m[name]; ok {
			out[name] = fp.kids[name].project(v)
		}
	}
	return out
}

// TestPolicyFootprints: each kind's footprint is the places its policy
// names, and a policy the reading does not follow has none.
func TestPolicyFootprints(t *testing.T) {
	c := getValidator()
	defer putValidator(c)
	for i, p := range footPolicies {
		if err := c.ctx.CompileBytes(footPolicySource(t, i)).Err(); err != nil {
			t.Fatalf("%s does not compile: %v", p.name, err)
		}
		got := map[string]string{}
		feet := policyFootprints(p.name+".cue", footPolicySource(t, i))
		for kind, fp := range feet {
			got[kind] = fp.String()
		}
		want := p.feet
		if want == nil {
			want = map[string]string{}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: footprints (-want +got):\n%s", p.name, d)
		}
	}
}

// policyVerdict is whether CUE finds the document m of kind valid under
// the policy p.
func policyVerdict(c *compiled, p cue.Value, m any) bool {
	return p.Unify(c.ctx.Encode(m)).Validate(cue.Concrete(true)) == nil
}

// footPaths lists the places of a footprint as the table writes it
// ("{a:{b:*} c:*}"), for mutations to reach: the places the policy is
// known to see, not those the reading found.
func footPaths(s string) [][]string {
	var out [][]string
	var path []string
	name := ""
	for _, r := range s {
		switch r {
		case '{':
			if name != "" {
				path = append(path, name)
			}
			name = ""
		case ':':
			out = append(out, append(slices.Clone(path), name))
		case '}':
			if len(path) > 0 && name == "" {
				path = path[:len(path)-1]
			}
			name = ""
		case ' ', '*':
			name = ""
		default:
			name += string(r)
		}
	}
	return out
}

// footValues fit or miss the test policies' places.
var footValues = []func() any{
	func() any { return "prod" }, func() any { return "dev" }, func() any { return "payments" },
	func() any { return "search" }, func() any { return "yes" }, func() any { return "x" },
	func() any { return "true" }, func() any { return "v1.31.2" }, func() any { return "v1.30.0" },
	func() any { return int64(1) }, func() any { return int64(3) }, func() any { return int64(5) },
	func() any { return int64(60) }, func() any { return "cluster.local" }, func() any { return "docker" },
	func() any { return map[string]any{"replicas": int64(3)} },
	func() any { return map[string]any{"replicas": int64(2), "metadata": map[string]any{}} },
	func() any { return map[string]any{"type": "OnDelete"} },
	func() any {
		return map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": int64(1)}}
	},
	func() any { return []any{map[string]any{"class": "default-worker", "replicas": int64(2)}} },
	func() any {
		return []any{map[string]any{"class": "a-b"}, map[string]any{"class": "Bad", "replicas": int64(9)}}
	},
	func() any {
		return []any{map[string]any{"type": "Ready", "status": "Unknown", "timeoutSeconds": int64(1)}}
	},
	func() any { return map[string]any{"provider": "docker", "spec": map[string]any{"cpus": int64(1)}} },
	func() any { return map[string]any{"provider": "inmemory", "extra": true} },
}

// setAt writes v at path in m, making the structs on the way, or removes
// the field when v is nil and drop is set.
func setAt(m map[string]any, path []string, v any, drop bool) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	if drop {
		delete(m, path[len(path)-1])
		return
	}
	m[path[len(path)-1]] = v
}

// footMutant changes d at random places and at the footprint's places.
func footMutant(r *rand.Rand, m map[string]any, names []string, paths [][]string, fits []any) map[string]any {
	out := mutate(r, m, names, r.IntN(3))
	for range 1 + r.IntN(3) {
		p := paths[r.IntN(len(paths))]
		switch r.IntN(5) {
		case 0:
			setAt(out, p, nil, true)
		case 4:
			if len(fits) > 0 {
				setAt(out, p, deepCopy(fits[r.IntN(len(fits))]), false)
			}
		case 1:
			setAt(out, p, mutationValues[r.IntN(len(mutationValues))](), false)
		default:
			setAt(out, p, footValues[r.IntN(len(footValues))](), false)
		}
	}
	return out
}

// TestPolicyProjectionKeepsTheVerdict: for every test policy the reading
// follows, CUE's verdict on a document is its verdict on the document's
// projection, over every fleet document of the fixtures of the kind and
// many mutants of each (changed anywhere, and at the policy's places), and
// both verdicts occur, or the test shows nothing.
func TestPolicyProjectionKeepsTheVerdict(t *testing.T) {
	corpus := precheckCorpus(t)
	names := append(precheckFieldNames(), "env", "team", "pinned", "big")
	const rounds = 20
	r := rand.New(rand.NewPCG(15, 2026))
	for i, pol := range footPolicies {
		src := footPolicySource(t, i)
		feet := policyFootprints(pol.name+".cue", src)
		for _, kind := range keys(feet) {
			fp := feet[kind]
			paths := footPaths(pol.feet[kind])
			c, err := compileSchema()
			if err != nil {
				t.Fatal(err)
			}
			p := c.policy(File{Path: pol.name + ".cue", Data: src}).kinds[kind]
			accepted, rejected := 0, 0
			for _, d := range corpus {
				if d.kind != kind {
					continue
				}
				for range rounds {
					m := footMutant(r, d.m, names, paths, pol.fits)
					full := policyVerdict(c, p, m)
					if full {
						accepted++
					} else {
						rejected++
					}
					if proj := fp.project(m); policyVerdict(c, p, proj) != full {
						t.Fatalf("%s, %s (%s): CUE says %v of the document and %v of its projection\ndocument: %#v\nprojection: %#v",
							pol.name, kind, d.path, full, !full, m, proj)
					}
				}
			}
			t.Logf("%s, %s: %d accepted, %d rejected", pol.name, kind, accepted, rejected)
			if accepted < 5 || rejected < 5 {
				t.Errorf("%s, %s: the mutants do not exercise both verdicts: %d accepted, %d rejected", pol.name, kind, accepted, rejected)
			}
		}
	}
}

// TestProjectionKeysAreExact: two documents share a key exactly when their
// projections are equal (a key that merged different values would let one
// document's verdict answer for another's).
func TestProjectionKeysAreExact(t *testing.T) {
	fp := policyFootprints("p.cue", footPolicySource(t, 0))["Cluster"]
	values := []any{nil, true, false, int64(3), 3.0, int64(5), "3", "", "prod", "prod\x00", []any{}, []any{"a"},
		[]any{"a", "b"}, []any{[]any{"a"}, "b"}, map[string]any{}, map[string]any{"a": "b"}, map[string]any{"a": []any{"b"}},
		map[string]any{"ab": ""}, map[string]any{"a": "", "b": ""}}
	keysSeen := map[string]string{}
	for _, env := range append(values, "absent") {
		for _, rep := range append(values, "absent") {
			m := map[string]any{"metadata": map[string]any{"labels": map[string]any{}}, "spec": map[string]any{
				"topology": map[string]any{"controlPlane": map[string]any{}}}}
			if env != "absent" {
				m["metadata"].(map[string]any)["labels"].(map[string]any)["env"] = env
			}
			if rep != "absent" {
				m["spec"].(map[string]any)["topology"].(map[string]any)["controlPlane"].(map[string]any)["replicas"] = rep
			}
			k, ok := fp.key(nil, m)
			if !ok {
				t.Fatalf("no key for %#v", m)
			}
			shown := cmp.Diff(nil, fp.project(m))
			if other, seen := keysSeen[string(k)]; seen && other != shown {
				t.Errorf("one key for two projections:\n%s\n%s", other, shown)
			}
			keysSeen[string(k)] = shown
		}
	}
	if n := (len(values) + 1) * (len(values) + 1); len(keysSeen) != n {
		t.Errorf("%d keys for %d projections", len(keysSeen), n)
	}
	if _, ok := fp.key(nil, map[string]any{"metadata": map[string]any{"labels": map[string]any{"env": strings.Repeat("x", maxProjectionKey)}}}); ok {
		t.Error("a projection over maxProjectionKey was given a key")
	}
}

// TestPolicyVerdictsAreShared: a fleet whose clusters agree where a policy
// looks is unified with the policy once per context, not once a cluster,
// and its errors are the same with the verdicts remembered or not.
func TestPolicyVerdictsAreShared(t *testing.T) {
	class := inmemoryClassC(t)
	var fleet strings.Builder
	for i := range 600 {
		env, replicas := "prod", 3
		if i%100 == 8 {
			replicas = 1 // violates the policy
		}
		if i%2 == 1 {
			env = "dev"
		}
		fleet.WriteString(header + "kind: Cluster\nmetadata: {name: c" + strings.Repeat("x", i%5) + "-" + strconv.Itoa(i) +
			", labels: {env: " + env + ", n: \"" + strconv.Itoa(i) + "\"}}\nspec:\n  topology:\n    classRef: {name: c}\n    controlPlane: {replicas: " + strconv.Itoa(replicas) + "}\n---\n")
	}
	policies := []File{{Path: "policies/prod.cue", Data: footPolicySource(t, 0)}}
	check := func() ([]string, int64) {
		before := policyUnifications.Load()
		objs, errs := ParseFile(File{Path: "clusters/all.yaml", Data: []byte(fleet.String())})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		_, errs = Check(append(slices.Clone(class), objs...), policies)
		return errLines(errs), policyUnifications.Load() - before
	}
	clearAccepted := func() {
		policyAccepts.Lock()
		policyAccepts.m, policyAccepts.bytes = nil, 0
		policyAccepts.Unlock()
	}
	clearAccepted()
	first, unified := check()
	if len(first) != 6 {
		t.Fatalf("want the 6 clusters with one control plane machine named, got %d errors:\n%s", len(first), strings.Join(first, "\n"))
	}
	// Each context (rotateAfter documents) meets each projection once:
	// prod with 3, dev with 3, dev with 1... and the 6 violations whole.
	if unified > 30 {
		t.Errorf("600 clusters of 3 projections were unified with the policy %d times", unified)
	}
	again, unifiedAgain := check()
	if d := cmp.Diff(first, again); d != "" {
		t.Errorf("errors with the verdicts remembered (-before +after):\n%s", d)
	}
	if unifiedAgain != 6 {
		t.Errorf("with every accepted projection remembered, %d unifications; want the 6 violations'", unifiedAgain)
	}
	// A policy with no footprint unifies each cluster.
	policies = []File{{Path: "policies/closed.cue", Data: []byte("Cluster: close({apiVersion: _, kind: _, metadata: _, spec: _})\n")}}
	if _, n := check(); n != 600 {
		t.Errorf("a policy the reading does not follow was unified %d times for 600 clusters", n)
	}
}

// FuzzPolicyProjection: for any fleet document, CUE's verdict under each
// test policy the reading follows is its verdict on the projection.
func FuzzPolicyProjection(f *testing.F) {
	addDocumentSeeds(f, "clusters/dev-1.yaml", "clusters/prod-1.yaml", "classes/standard.yaml")
	type pol struct {
		feet map[string]*footprint
		file File
	}
	var pols []pol
	for i, p := range footPolicies {
		src := footPolicySource(f, i)
		pols = append(pols, pol{policyFootprints(p.name+".cue", src), File{Path: p.name + ".cue", Data: src}})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		eachFuzzedDocument(data, func(c *compiled, kind string, m map[string]any) {
			for _, p := range pols {
				fp := p.feet[kind]
				if fp == nil {
					continue
				}
				pv := c.policy(p.file).kinds[kind]
				if full := policyVerdict(c, pv, m); policyVerdict(c, pv, fp.project(m)) != full {
					t.Fatalf("%s, %s: CUE says %v of the document and not of its projection", p.file.Path, kind, full)
				}
			}
		})
	})
}

// TestContextsCountWhatTheyBuild: a CUE context counts the values built in
// it, so that it is dropped before it grows without bound (rotateAfter),
// and only those: compiling a policy file counts (a daemon's revisions
// bring the same policy in new memory each time); a document whose
// scalars the precheck judged before, and whose projection the policy
// accepted before, does not.
func TestContextsCountWhatTheyBuild(t *testing.T) {
	c, err := compileSchema()
	if err != nil {
		t.Fatal(err)
	}
	src := footPolicySource(t, 0)
	f := File{Path: "policies/prod.cue", Data: src}
	c.policy(f)
	used := c.used
	if used != 1 {
		t.Errorf("compiling a policy counted %d", used)
	}
	if c.policy(f); c.used != used {
		t.Errorf("the same policy file compiled again")
	}
	if c.policy(File{Path: f.Path, Data: slices.Clone(src)}); c.used != used+1 {
		t.Errorf("a policy file in new memory was not counted: %d, want %d", c.used, used+1)
	}
	b, err := fs.ReadFile(fixtures.Init(), "clusters/prod-1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := splitYAML("clusters/prod-1.yaml", b)
	m := docs[0].value.(map[string]any)
	if !c.precheck("Cluster", m) {
		t.Fatal("the precheck refused a valid cluster")
	}
	used = c.used // its scalars judged once, its name in Go
	if c.precheck("Cluster", m); c.used != used {
		t.Errorf("the precheck of a valid cluster it judged before built %d values", c.used-used)
	}
	o := &Object{Kind: "Cluster", Raw: m}
	if errs := c.policyErrors([]File{f}, o, cue.Value{}); len(errs) > 0 {
		t.Fatal(errs)
	}
	used = c.used
	for range 10 {
		c.policyErrors([]File{f}, o, cue.Value{})
	}
	if c.used != used {
		t.Errorf("an accepted projection built %d values in 10 checks", c.used-used)
	}
}
