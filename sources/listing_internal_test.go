package sources

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gitfleet/gitfleet/internal/gittest"
)

// listingFixture is a file of gitfleet init's fleet.
func listingFixture(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "fixtures", "init", filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// listingCluster is gitfleet init's dev-1 named name, with replicas
// control-plane machines.
func listingCluster(dev1, name string, replicas int) string {
	c := strings.Replace(dev1, "name: dev-1", "name: "+name, 1)
	return strings.Replace(c, "controlPlane:\n      replicas: 1", fmt.Sprintf("controlPlane:\n      replicas: %d", replicas), 1)
}

// TestPatchedListingIsCollected: commit after commit of edits to fleet
// files, policies, files that are not fleet files (a README, a dot
// folder's YAML), gitfleet.yaml and a kustomization, with files added
// now and then, a file over the size limit and reads of other revisions
// between them, every listing a validation keeps is the one collect
// makes of the same tree, and every revision validates as it does in a
// repository opened afresh. Most commits are patched, not collected.
func TestPatchedListingIsCollected(t *testing.T) {
	work := gittest.NewRepo(t)
	listingClass, dev1 := listingFixture(t, "classes/standard.yaml"), listingFixture(t, "clusters/dev-1.yaml")
	files := map[string]string{
		"classes/standard.yaml":    listingClass,
		"README.md":                "# fleet\n",
		".github/ci.yaml":          "on: push\n",
		"policies/p.cue":           "Cluster: metadata: name: =~\"^c\"\n",
		"extra/kustomization.yaml": "resources: [c.yaml]\n",
		"extra/c.yaml":             listingCluster(dev1, "cx", 1),
	}
	var clusters []string
	for i := range 12 {
		p := fmt.Sprintf("clusters/c%d/c%02d.yaml", i/4, i)
		files[p] = listingCluster(dev1, fmt.Sprintf("c%02d", i), 1)
		clusters = append(clusters, p)
	}
	work.Commit("fleet", files)
	r, err := Open(context.Background(), Options{Location: work.Dir, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rng := rand.New(rand.NewPCG(14, 27))
	edits := []func(i int) (string, string){
		func(i int) (string, string) {
			return clusters[rng.IntN(len(clusters))], "" // filled below
		},
		func(i int) (string, string) { return "README.md", fmt.Sprintf("# fleet %d\n", i) },
		func(i int) (string, string) { return ".github/ci.yaml", fmt.Sprintf("on: push # %d\n", i) },
		func(i int) (string, string) {
			return "policies/p.cue", fmt.Sprintf("Cluster: metadata: name: =~\"^c\"\n// %d\n", i)
		},
		func(i int) (string, string) {
			return "classes/standard.yaml", listingClass + strings.Repeat("#\n", i%4)
		},
		func(i int) (string, string) {
			// What is listed changes with spec.paths.
			paths := []string{"", "\nspec:\n  paths: [classes, clusters]\n", "\nspec:\n  paths: [classes, clusters/c0]\n"}[i%3]
			return "gitfleet.yaml", fmt.Sprintf("apiVersion: gitfleet.io/v1alpha1\nkind: FleetConfig\nmetadata:\n  name: fleet%d%s", i, paths)
		},
		func(i int) (string, string) {
			return "extra/kustomization.yaml", "resources: [c.yaml]\n" + strings.Repeat("#\n", i%3)
		},
		func(i int) (string, string) { return "extra/c.yaml", listingCluster(dev1, "cx", 1+2*(i%3)) },
	}
	patched := 0
	for i := range 120 {
		if i == 40 { // no kustomization from here (the last two edits): a listing with one is never patched
			work.Git("rm", "-q", "-r", "extra")
			edits = edits[:6]
		}
		change := map[string]string{}
		for range 1 + rng.IntN(3) {
			k := rng.IntN(len(edits) + 8) // cluster edits most often
			if k >= len(edits) {
				k = 0
			}
			p, content := edits[k](i)
			if k == 0 {
				content = listingCluster(dev1, strings.TrimSuffix(p[strings.LastIndex(p, "/")+1:], ".yaml"), 1+2*rng.IntN(3))
			}
			change[p] = content
		}
		switch {
		case i%17 == 5: // a path comes
			p := fmt.Sprintf("clusters/c%d/cn%02d.yaml", i%3, i)
			change[p] = listingCluster(dev1, fmt.Sprintf("cn%02d", i), 1)
			clusters = append(clusters, p)
		case i%29 == 11: // a file over the size limit, then back
			change[clusters[0]] = listingCluster(dev1, "c00", 1) + "#" + strings.Repeat("x", MaxFileSize) + "\n"
		case i%29 == 12:
			change[clusters[0]] = listingCluster(dev1, "c00", 3)
		}
		work.Commit(fmt.Sprintf("step %d", i), change)
		if i%13 == 7 {
			// Another revision read between two validations.
			if _, err := r.Files(context.Background(), "HEAD~1"); err != nil {
				t.Fatal(err)
			}
		}
		before := r.patches
		rev, err := r.Revision(context.Background(), "main")
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		patched += r.patches - before
		if l := r.listing; l != nil {
			checkListing(t, i, l)
		}
		fresh, err := Open(context.Background(), Options{Location: work.Dir, DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		want, err := fresh.Revision(context.Background(), "main")
		fresh.Close()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.Errors, rev.Errors); diff != "" {
			t.Fatalf("step %d: errors differ from a fresh read (-fresh +patched):\n%s", i, diff)
		}
		if (want.Fleet == nil) != (rev.Fleet == nil) {
			t.Fatalf("step %d: fleet %v, fresh %v", i, rev.Fleet != nil, want.Fleet != nil)
		}
		if want.Fleet != nil {
			if diff := cmp.Diff(want.Fleet, rev.Fleet); diff != "" {
				t.Fatalf("step %d: the fleet differs from a fresh read (-fresh +patched):\n%s", i, diff)
			}
		}
	}
	t.Logf("%d of 120 commits patched", patched)
	if patched < 40 {
		t.Errorf("%d of 120 commits were patched; want most of those that only edit fleet files", patched)
	}
}

// checkListing compares a kept listing with collect's of its snapshot,
// leaving the entries' places as they were.
func checkListing(t *testing.T, step int, l *listing) {
	t.Helper()
	places := map[*entry]int32{}
	for _, p := range l.snap.paths {
		if e := l.snap.file(p); e != nil {
			places[e] = e.place
		}
	}
	want, _, _, err := collectListing(l.snap, newRenderCache(), nil)
	for e, place := range places {
		e.place = place
	}
	if err != nil {
		t.Fatal(err)
	}
	type in struct {
		Path, Key string
		Ent       *entry
	}
	flat := func(ins []input) []in {
		var out []in
		for _, x := range ins {
			out = append(out, in{x.Path, x.key, x.ent})
		}
		return out
	}
	if diff := cmp.Diff(flat(want), flat(l.ins), cmp.Comparer(func(a, b *entry) bool { return a == b })); diff != "" {
		t.Fatalf("step %d: the kept listing is not collect's (-collect +kept):\n%s", step, diff)
	}
}
