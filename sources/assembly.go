package sources

import (
	"slices"
	"sync/atomic"

	"github.com/gitfleet/gitfleet/internal/layered"
	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// assembly is what a validation builds from its files' parse results,
// before the cross-object checks: the objects in file order (those
// misplaced left out, each with its content key), the content keys by
// kind and name, and which files have errors. A daemon's next revision
// usually changes a file or two of 10,000: it copies the last assembly
// and replaces those files' objects (patch) instead of going through
// every file's objects and hashing every name again. Its keys are never
// changed once made (revisions share them); its objects are taken over
// by the next patch, so an assembly is used by one validation at a time.
type assembly struct {
	objectKeys
	results []*parsed
	// offs[i] is where the objects of results[i] begin in objs;
	// offs[len(results)] is len(objs).
	offs []int
	objs []schemas.Object
	// bad are the indexes of the files with errors or misplaced objects.
	bad []int
	// fleetObjs counts the objects other than a FleetConfig.
	fleetObjs int
	// unique: no two objects have the same kind and name, so a file's
	// keys can be replaced without looking at the others.
	unique bool
	// index is the cross-object checks' index of objs (nil before the
	// first checks); a patch keeps it, and the checks verify it fits.
	index *schemas.Index
}

// objectKeys are the content keys of an assembly's objects by kind and
// name, and how they differ from those of the assembly it was patched
// from: a revision keeps them (ObjectKey, ChangedSince).
type objectKeys struct {
	// keys share with the assembly patched from all but what the patch
	// changed: a one-file commit of 10,000 does not copy 10,000 keys.
	keys *layered.Map[objectRef, string]
	// id numbers the assembly; from is the id of the one it was patched
	// from (0: assembled afresh), and changed the objects whose keys
	// differ from that one's.
	id, from uint64
	changed  []objectRef
}

// assemblies numbers the assemblies made.
var assemblies atomic.Uint64

// maxPatched is how many changed files a validation patches the last
// assembly for; more are assembled afresh.
const maxPatched = 64

// assemble returns the assembly of results: last's patched when results
// differ from last's in a few files whose objects keep their kinds and
// names (and counts), else a new one.
func assemble(last *assembly, results []*parsed) *assembly {
	if a := last.patch(results); a != nil {
		return a
	}
	return newAssembly(results)
}

func newAssembly(results []*parsed) *assembly {
	a := &assembly{objectKeys: objectKeys{id: assemblies.Add(1), keys: layered.New[objectRef, string](len(results))},
		results: results, offs: make([]int, len(results)+1), objs: make([]schemas.Object, 0, len(results))}
	total := 0
	for i, p := range results {
		a.offs[i] = len(a.objs)
		bad := len(p.errs) > 0
		for j, o := range p.objs {
			total++
			a.keys.Set(objectRef{o.Kind, o.Name}, p.keys[j])
			if _, wrong := misplaced(o); wrong {
				bad = true
				continue
			}
			o.Key = p.keys[j]
			a.objs = append(a.objs, o)
			if o.Kind != v1alpha1.KindFleetConfig {
				a.fleetObjs++
			}
		}
		if bad {
			a.bad = append(a.bad, i)
		}
	}
	a.offs[len(results)] = len(a.objs)
	a.unique = a.keys.Len() == total
	return a
}

// patch returns a with the files of results that differ from a's put
// in, or nil when that cannot be done exactly: no a, another number of
// files, too many changed, objects of another kind, name or number, or
// names used twice. The objects are replaced in a's own slice (copying
// 10,000 of them cost more than the rest of the patch): a is not to be
// used after.
func (a *assembly) patch(results []*parsed) *assembly {
	if a == nil || !a.unique || len(a.results) != len(results) {
		return nil
	}
	var changed []int
	for i, p := range results {
		if p == a.results[i] {
			continue
		}
		if len(changed) == maxPatched || !sameNames(a.results[i], p) {
			return nil
		}
		changed = append(changed, i)
	}
	n := &assembly{objectKeys: objectKeys{id: assemblies.Add(1), from: a.id, changed: []objectRef{}, keys: a.keys},
		results: results, offs: a.offs, objs: a.objs, bad: a.bad, fleetObjs: a.fleetObjs, unique: true, index: a.index}
	if len(changed) == 0 {
		return n
	}
	n.keys = a.keys.Clone()
	n.bad = slices.DeleteFunc(slices.Clone(a.bad), func(i int) bool { _, c := slices.BinarySearch(changed, i); return c })
	for _, i := range changed {
		p := results[i]
		k := n.offs[i]
		bad := len(p.errs) > 0
		for j, o := range p.objs {
			ref := objectRef{o.Kind, o.Name}
			if k, _ := a.keys.Get(ref); k != p.keys[j] {
				n.changed = append(n.changed, ref)
			}
			n.keys.Set(ref, p.keys[j])
			if _, wrong := misplaced(o); wrong {
				bad = true
				continue
			}
			o.Key = p.keys[j]
			n.objs[k] = o
			k++
		}
		if bad {
			n.bad = append(n.bad, i)
		}
	}
	slices.Sort(n.bad)
	return n
}

// sameNames reports whether two parse results of a file have objects of
// the same kinds and names in the same order, and as many kept (not
// misplaced): the new one's objects then take the old one's places.
func sameNames(old, cur *parsed) bool {
	if len(old.objs) != len(cur.objs) {
		return false
	}
	for j := range old.objs {
		o, c := &old.objs[j], &cur.objs[j]
		if o.Kind != c.Kind || o.Name != c.Name || o.Source.Path != c.Source.Path {
			return false
		}
	}
	return true
}

// errors are the assembly's files' errors, in file order: each file's
// misplaced objects, then its parse and schema errors.
// unread are the paths of the files with errors and not one object (YAML
// that does not parse): files that may define what a reference misses.
func (a *assembly) unread() []string {
	var paths []string
	for _, i := range a.bad {
		if p := a.results[i]; len(p.objs) == 0 {
			for _, e := range p.errs {
				paths = append(paths, e.Path)
			}
		}
	}
	return paths
}

func (a *assembly) errors() schemas.Errors {
	var errs schemas.Errors
	for _, i := range a.bad {
		p := a.results[i]
		for _, o := range p.objs {
			if e, wrong := misplaced(o); wrong {
				errs = append(errs, e)
			}
		}
		errs = append(errs, p.errs...)
	}
	return errs
}
