package sources

import (
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"testing"

	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// TestAssemblyPatchIsAssembly: over random sequences of revisions — files
// edited, added, removed, given errors, objects renamed, moved into
// gitfleet.yaml or named twice, the FleetConfig moved out of it — the
// assembly each validation patches
// from the last is, field for field, the one it would build afresh, and
// a revision that changes a few files' contents only is patched, not
// built.
func TestAssemblyPatchIsAssembly(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		files := make([]*parsed, 30)
		version := 0
		file := func(i int, name string) *parsed {
			version++
			path := fmt.Sprintf("clusters/f%02d.yaml", i)
			if i == 0 {
				path = ConfigFile
			}
			objs := []schemas.Object{{Kind: v1alpha1.KindCluster, Name: name, Source: v1alpha1.Source{Path: path, Line: 1}}}
			if i == 0 {
				objs[0].Kind = v1alpha1.KindFleetConfig
			}
			if rng.Intn(4) == 0 { // a second document
				objs = append(objs, schemas.Object{Kind: v1alpha1.KindMachineDeployment, Name: name + "-md", Source: v1alpha1.Source{Path: path, Line: 20}})
			}
			var errs schemas.Errors
			if rng.Intn(10) == 0 {
				errs = schemas.Errors{{Path: path, Line: 3, Message: fmt.Sprintf("wrong %d", version)}}
			}
			return newParsed(fmt.Sprintf("blob%d %s", version, path), objs, errs, "", 0)
		}
		for i := range files {
			files[i] = file(i, fmt.Sprintf("c%02d", i))
		}
		var last *assembly
		for rev := 0; rev < 30; rev++ {
			kind := rng.Intn(9)
			next := append([]*parsed(nil), files...)
			switch kind {
			case 0, 1, 2, 3: // contents of a few files change, names kept
				for range 1 + rng.Intn(3) {
					i := 1 + rng.Intn(len(next)-1)
					p := *next[i]
					p.objs = append([]schemas.Object(nil), p.objs...)
					for j := range p.objs {
						p.objs[j].Value = version // another content
					}
					version++
					p.keys = append([]string(nil), p.keys...)
					for j := range p.keys {
						p.keys[j] = fmt.Sprintf("blob%d#%d", version, j)
					}
					if rng.Intn(5) == 0 {
						p.errs = schemas.Errors{{Path: p.objs[0].Source.Path, Message: "now wrong"}}
					}
					next[i] = &p
				}
			case 4: // an object renamed, or named as another's
				i := 1 + rng.Intn(len(next)-1)
				name := fmt.Sprintf("r%d", rev)
				if rng.Intn(2) == 0 {
					name = next[1+rng.Intn(len(next)-1)].objs[0].Name
				}
				next[i] = file(i, name)
			case 5: // a file added or removed
				if rng.Intn(2) == 0 && len(next) > 2 {
					next = next[:len(next)-1]
				} else {
					next = append(next, file(len(next), fmt.Sprintf("n%d", rev)))
				}
			case 6: // a Cluster written into gitfleet.yaml
				p := *next[0]
				p.objs = append(append([]schemas.Object(nil), p.objs...), schemas.Object{Kind: v1alpha1.KindCluster, Name: fmt.Sprintf("m%d", rev), Source: v1alpha1.Source{Path: ConfigFile, Line: 9}})
				p.keys = append(append([]string(nil), p.keys...), fmt.Sprintf("cfg%d#9", rev))
				next[0] = &p
			case 7: // nothing
			case 8: // the FleetConfig moved to another file, in gitfleet.yaml's place
				p := *next[0]
				p.objs = append([]schemas.Object(nil), p.objs...)
				for j := range p.objs {
					p.objs[j].Source.Path = "a.yaml"
				}
				next[0] = &p
			}
			got := assemble(last, next)
			want := newAssembly(next)
			for _, c := range []struct {
				what      string
				got, want any
			}{
				{"objects", got.objs, want.objs}, {"keys", maps.Collect(got.keys.All()), maps.Collect(want.keys.All())}, {"errors", got.errors(), want.errors()},
				{"fleet objects", got.fleetObjs, want.fleetObjs}, {"offsets", got.offs, want.offs}, {"unique", got.unique, want.unique},
			} {
				if !reflect.DeepEqual(c.got, c.want) {
					t.Fatalf("seed %d, revision %d (change %d): %s differ from a fresh assembly:\n%v\nwant\n%v", seed, rev, kind, c.what, c.got, c.want)
				}
			}
			if kind < 4 && last != nil && last.unique && len(last.results) == len(next) && &got.offs[0] != &last.offs[0] {
				t.Fatalf("seed %d, revision %d: contents changed with names kept, yet no patch", seed, rev)
			}
			// A patched assembly names exactly the objects whose keys
			// differ from the last one's; a fresh one names none.
			switch {
			case last != nil && got.from == last.id:
				var diff []objectRef
				for ref, k := range want.keys.All() {
					if lk, _ := last.keys.Get(ref); lk != k {
						diff = append(diff, ref)
					}
				}
				for ref := range last.keys.All() {
					if _, ok := want.keys.Get(ref); !ok {
						diff = append(diff, ref)
					}
				}
				if !sameRefs(got.changed, diff) {
					t.Fatalf("seed %d, revision %d (change %d): changed %v, the keys that differ %v", seed, rev, kind, got.changed, diff)
				}
			case got.from != 0 || got.changed != nil:
				t.Fatalf("seed %d, revision %d: assembled afresh, yet from %d with changes %v", seed, rev, got.from, got.changed)
			}
			if last != nil && got.id <= last.id {
				t.Fatalf("seed %d, revision %d: id %d after %d", seed, rev, got.id, last.id)
			}
			last, files = got, next
		}
	}
}

func sameRefs(a, b []objectRef) bool {
	count := map[objectRef]int{}
	for _, r := range a {
		count[r]++
	}
	for _, r := range b {
		count[r]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}
