package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gitfleet/gitfleet/internal/workers"
	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// parseCache keeps each file's parse result by content hash and path, so a
// commit that changes one file parses one file. Entries not used by the two
// latest validations are dropped.
type parseCache struct {
	mu  sync.Mutex
	m   map[string]*parsed
	gen uint64
	// known are the verdicts of earlier validations: a file that passed
	// the schema and policy checks is decoded without them next time.
	known *verdicts
	// clusters are the clusters whose own checks passed with their class
	// (schemas.KnownGood), by the cluster's content key: a daemon asks for
	// all of them at every revision, and a map lookup costs less than
	// hashing a verdict. One class is remembered a cluster, the newest;
	// the ones the latest validation did not ask for are dropped.
	clusters map[string]*clusterMemo
	// objects, when set, keeps each good file's decoded objects across
	// processes (Options.KeepObjects).
	objects *objectCache
	// last is the latest validation's assembly, which the next starts
	// from.
	last *assembly
}

type parsed struct {
	key  string // the file's input key: content and path
	objs []schemas.Object
	errs schemas.Errors
	keys []string // each object's content key: file key and line
	// polKey names the policies the objects were checked against; a
	// result for other policies is parsed again.
	polKey string
	gen    uint64
}

func newParseCache(known *verdicts) *parseCache {
	return &parseCache{m: map[string]*parsed{}, known: known, clusters: map[string]*clusterMemo{}}
}

// validate parses every input (cached ones are not parsed again), checking
// each document against the schemas and the policies, then runs the
// cross-object checks. pre are errors found while reading. It also returns
// each object's content key, and where the objects' fields are written.
// load reads the content of inputs that turn out not to be cached.
func (pc *parseCache) validate(ins []input, pre schemas.Errors, load func([]*input) error) (*v1alpha1.Fleet, schemas.Errors, *objectKeys, *Places, error) {
	var policies []*input
	for i, in := range ins {
		if strings.HasSuffix(in.Path, ".cue") {
			policies = append(policies, &ins[i])
		}
	}
	docs := ins // without policies, as most fleets are: no copy
	if len(policies) > 0 {
		docs = make([]input, 0, len(ins)-len(policies))
		for _, in := range ins {
			if !strings.HasSuffix(in.Path, ".cue") {
				docs = append(docs, in)
			}
		}
	}
	if err := load(policies); err != nil {
		return nil, nil, nil, nil, err
	}
	// Policies are applied while each document is parsed, where it is
	// already encoded for the schema, as schemas.Load does; the objects
	// then keep no raw value.
	good, polErrs := pc.compilePolicies(policies)
	results, err := pc.parseAll(docs, good, policiesKey(good), load)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	// The documents are decoded: let go of their text, so that a large
	// fleet's files are not held through the cross-object checks (a file
	// parsed again later is read again; rendered ones cannot be, and stay).
	for i := range ins {
		if ins[i].readable() {
			ins[i].Data = nil
		}
	}
	// The objects in file order with their keys: the last validation's,
	// patched where files changed, when it can be (assembly).
	pc.mu.Lock()
	last := pc.last
	pc.last = nil // this validation's alone: its patch takes it over
	pc.mu.Unlock()
	a := assemble(last, results)
	errs := append(append(append(schemas.Errors(nil), pre...), polErrs...), a.errors()...)
	keys, objs, fleetObjs := a.objectKeys, a.objs, a.fleetObjs
	if fleetObjs == 0 && len(errs) == 0 {
		errs = append(errs, schemas.Error{Path: ".", Message: "no fleet objects found: add a ClusterClass and a Cluster as YAML files (gitfleet init DIR writes an example)"})
	}
	pc.mu.Lock()
	kc := knownClusters{pc: pc, gen: pc.gen}
	pc.mu.Unlock()
	// A patched assembly's objects are its last's, replaced in place with
	// the same kinds and names: the index of the last checks fits them.
	prevIdx := a.index
	fleet, cerrs, idx := schemas.CheckIndexed(objs, nil, kc, a.index)
	a.index = idx
	// A kept index vouches for the clusters that passed before, which
	// known is not asked about again (so not told they are still in
	// use): forget only when the index was made anew, or when what is
	// remembered outgrows the fleet.
	if idx != prevIdx || kc.crowded(len(fleet.Clusters)) {
		kc.forget()
	}
	// Only now is the assembly free for the next validation to patch:
	// the cross-object checks read its objects, which a patch replaces in
	// place (a validation that starts meanwhile assembles its own).
	pc.mu.Lock()
	pc.last = a
	pc.mu.Unlock()
	errs = append(errs, cerrs...)
	// Lines of rendered files first: AwaitUnread quotes an error whole.
	newSourceLines(ins).fix(errs)
	errs = schemas.AwaitUnread(errs, a.unread())
	sortErrors(errs)
	return fleet, errs, &keys, newPlaces(results, ins), nil
}

// compilePolicies is schemas.CompilePolicies, trusting a verdict for a
// policy file that compiled before (its path and content): a warm run
// then builds no CUE context for policies at all. The files keep their
// order.
func (pc *parseCache) compilePolicies(policies []*input) ([]schemas.File, schemas.Errors) {
	var good []schemas.File
	var errs schemas.Errors
	for _, p := range policies {
		k := pc.known.key("policy", p.key)
		if pc.known.good(k) {
			good = append(good, p.File)
			continue
		}
		g, es := schemas.CompilePolicies([]schemas.File{p.File})
		if len(g) == 1 && len(es) == 0 {
			pc.known.add(k)
		}
		good = append(good, g...)
		errs = append(errs, es...)
	}
	return good, errs
}

// knownClusters answers schemas.CheckKnown from the parse cache's memory,
// then from the verdicts (which outlive the process), and records a pass
// in both.
type knownClusters struct {
	pc  *parseCache
	gen uint64
}

// clusterMemo is a cluster that passed its own checks with class (a
// content key), and the validation that last asked.
type clusterMemo struct {
	class string
	gen   uint64
}

func (k knownClusters) Good(cluster, class string) bool {
	k.pc.mu.Lock()
	m := k.pc.clusters[cluster]
	ok := m != nil && m.class == class
	if ok {
		m.gen = k.gen
	}
	k.pc.mu.Unlock()
	if ok {
		return true
	}
	if !k.pc.known.good(k.pc.known.key("check", cluster, class)) {
		return false
	}
	k.remember(cluster, class)
	return true
}

// GoodAll is Good for many clusters under one lock; those the memory
// does not hold are asked of the verdicts one by one (after a restart, or
// for a cluster that changed).
func (k knownClusters) GoodAll(keys []schemas.ClusterKeys, good []bool) {
	var misses []int
	k.pc.mu.Lock()
	for i, key := range keys {
		if key.Cluster == "" {
			continue
		}
		m := k.pc.clusters[key.Cluster]
		if good[i] = m != nil && m.class == key.Class; good[i] {
			m.gen = k.gen
		} else {
			misses = append(misses, i)
		}
	}
	k.pc.mu.Unlock()
	for _, i := range misses {
		good[i] = k.Good(keys[i].Cluster, keys[i].Class)
	}
}

func (k knownClusters) Add(cluster, class string) {
	k.pc.known.add(k.pc.known.key("check", cluster, class))
	k.remember(cluster, class)
}

func (k knownClusters) remember(cluster, class string) {
	k.pc.mu.Lock()
	k.pc.clusters[cluster] = &clusterMemo{class: class, gen: k.gen}
	k.pc.mu.Unlock()
}

// crowded reports whether the clusters remembered are many more than a
// fleet of n.
func (k knownClusters) crowded(n int) bool {
	k.pc.mu.Lock()
	defer k.pc.mu.Unlock()
	return len(k.pc.clusters) > 2*n+1024
}

// forget drops the clusters validation gen did not ask about.
func (k knownClusters) forget() {
	k.pc.mu.Lock()
	defer k.pc.mu.Unlock()
	for key, m := range k.pc.clusters {
		if m.gen != k.gen {
			delete(k.pc.clusters, key)
		}
	}
}

// objectRef names a fleet object.
type objectRef struct{ kind, name string }

// policiesKey names the content of the policy files that compile.
func policiesKey(pols []schemas.File) string {
	h := sha256.New()
	for _, p := range pols {
		fmt.Fprintf(h, "%s %d\n", p.Path, len(p.Data))
		h.Write(p.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// has reports whether key's parse result is cached, in memory or in the
// object cache: its file need not be read unless parseAll finds it must.
func (pc *parseCache) has(key string) bool {
	pc.mu.Lock()
	_, ok := pc.m[key]
	pc.mu.Unlock()
	return ok || pc.objects.has(key)
}

func (pc *parseCache) parseAll(ins []input, pols []schemas.File, polKey string, load func([]*input) error) ([]*parsed, error) {
	pc.mu.Lock()
	pc.gen++
	gen := pc.gen
	out := make([]*parsed, len(ins))
	var todo []int
	for i := range ins {
		// The entry's result first: a lookup by key hashes a long string
		// in a map of every file, 10,000 times a commit.
		var p *parsed
		if e := ins[i].ent; e != nil {
			p = e.parsed.Load()
		}
		if p == nil || p.key != ins[i].key || p.polKey != polKey {
			p = pc.m[ins[i].key]
		}
		if p != nil && p.polKey == polKey {
			p.gen = gen
			out[i] = p
		} else {
			todo = append(todo, i)
		}
	}
	pc.mu.Unlock()
	done := todo
	if pc.objects != nil {
		// Good files the object cache holds are decoded from it, unread.
		hit := make([]bool, len(todo))
		workers.Each(len(todo), runtime.GOMAXPROCS(0), func(t int) {
			i := todo[t]
			if !pc.known.good(pc.known.key("parse", polKey, ins[i].key)) {
				return
			}
			docs, ok := pc.objects.get(ins[i].key, polKey)
			if !ok {
				return
			}
			if objs, ok := pc.objects.decode(ins[i].Path, docs); ok {
				out[i], hit[t] = newParsed(ins[i].key, objs, nil, polKey, gen), true
			}
		})
		var rest []int
		for t, i := range todo {
			if !hit[t] {
				rest = append(rest, i)
			}
		}
		todo = rest
	}
	var missing []*input
	for _, i := range todo {
		if ins[i].Data == nil {
			missing = append(missing, &ins[i])
		}
	}
	if err := load(missing); err != nil {
		return nil, err
	}

	workers.Each(len(todo), runtime.GOMAXPROCS(0), func(t int) {
		i := todo[t]
		k := pc.known.key("parse", polKey, ins[i].key)
		var objs []schemas.Object
		var docs []schemas.KnownDoc
		var errs schemas.Errors
		if pc.known.good(k) {
			objs, docs, errs = schemas.ParseKnownGoodDocs(ins[i].File)
			for j := range objs {
				objs[j].Raw = nil // the policies passed it
			}
		} else {
			objs, docs, errs = schemas.ParseFileCheckedDocs(ins[i].File, pols)
		}
		if len(errs) == 0 {
			pc.known.add(k)
			if docs != nil {
				pc.objects.put(ins[i].key, polKey, docs)
			}
		}
		out[i] = newParsed(ins[i].key, objs, errs, polKey, gen)
	})
	for i := range ins {
		if e := ins[i].ent; e != nil && e.parsed.Load() != out[i] {
			e.parsed.Store(out[i])
		}
	}
	pc.mu.Lock()
	for _, i := range done {
		pc.m[ins[i].key] = out[i]
	}
	for k, p := range pc.m {
		if p.gen+1 < gen {
			delete(pc.m, k)
		}
	}
	pc.mu.Unlock()
	return out, nil
}

// newParsed is a file's parse result, each object keyed by the file's key
// and its line.
func newParsed(key string, objs []schemas.Object, errs schemas.Errors, polKey string, gen uint64) *parsed {
	keys := make([]string, len(objs))
	for j, o := range objs {
		keys[j] = key + "#" + strconv.Itoa(o.Source.Line)
	}
	return &parsed{key: key, objs: objs, errs: errs, keys: keys, polKey: polKey, gen: gen}
}

func sortErrors(es schemas.Errors) {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		return a.Field < b.Field
	})
}

// misplaced applies schemas.Load's rule that gitfleet.yaml holds the
// FleetConfig and nothing else.
func misplaced(o schemas.Object) (schemas.Error, bool) {
	inConfig := o.Source.Path == ConfigFile
	isConfig := o.Kind == v1alpha1.KindFleetConfig
	if inConfig == isConfig {
		return schemas.Error{}, false
	}
	e := schemas.Error{Path: o.Source.Path, Line: o.Source.Line, Field: "kind"}
	if inConfig {
		e.Message = "gitfleet.yaml holds only the FleetConfig: move this " + o.Kind + " to its own file"
	} else {
		e.Message = "FleetConfig belongs in gitfleet.yaml at the repository root: move it there"
	}
	return e, true
}
