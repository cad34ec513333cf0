package status

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// compareEntries must order entries exactly as go-git's (and Git's) rule:
// a folder sorts as if its name ended with "/".
func TestCompareEntriesIsGitOrder(t *testing.T) {
	names := []string{"a", "a.b", "a-b", "a0", "a/", "ab", "b", "clusters", "clusters.yaml", "clusters-x", "fleet.yaml", "z"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var es []object.TreeEntry
		seen := map[string]bool{}
		for range 8 {
			n := names[r.IntN(len(names))]
			if n == "a/" || seen[n] {
				continue
			}
			seen[n] = true
			mode := filemode.Regular
			if r.IntN(2) == 0 {
				mode = filemode.Dir
			}
			es = append(es, object.TreeEntry{Name: n, Mode: mode})
		}
		want := slices.Clone(es)
		sort.Sort(object.TreeEntrySorter(want))
		slices.SortFunc(es, compareEntries)
		if !slices.Equal(es, want) {
			t.Fatalf("order %v, want %v", es, want)
		}
	}
}
