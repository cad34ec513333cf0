package reconciler

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/sources"
)

// TestRevisionPlansOnlyWhatChanged: a new revision marks dirty the
// clusters it changes, and no other; a class change reaches every cluster
// of the class (the rollout decides when each moves).
func TestRevisionPlansOnlyWhatChanged(t *testing.T) {
	repo := &benchRepo{tb: t, dir: t.TempDir()}
	repo.git("init", "-q", "-b", "main")
	repo.write("classes/small.yaml", fmt.Sprintf(loopClass, "inmemory"))
	repo.write("classes/other.yaml", strings.Replace(fmt.Sprintf(loopClass, "inmemory"), "name: small", "name: other", 1))
	for _, c := range []string{"a1", "a2", "a3"} {
		repo.write("clusters/"+c+".yaml", fmt.Sprintf(loopCluster, c, 1, 2))
	}
	repo.write("clusters/b1.yaml", strings.Replace(fmt.Sprintf(loopCluster, "b1", 1, 2), "classRef: {name: small}", "classRef: {name: other}", 1))
	repo.commit("four clusters, two classes")
	src, err := sources.Open(t.Context(), sources.Options{Location: repo.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	desired := func() *planner.Desired {
		t.Helper()
		rev, err := src.Revision(t.Context(), "main")
		if err != nil || rev.Rejected() {
			t.Fatalf("revision: %v %v", err, rev.Err)
		}
		d, _ := planner.Expand(rev.Fleet)
		return d
	}
	r := &Reconciler{dirty: map[string]bool{}, gone: map[string]bool{}, clock: map[string]time.Time{}, machines: map[string]machineList{}}
	prev := desired()
	if n := r.markChanged(nil, prev); n != 4 {
		t.Errorf("a leader's first revision marked %d clusters, want all 4", n)
	}
	for _, step := range []struct {
		what string
		edit func()
		want []string
	}{
		{"a file that is no fleet object", func() { repo.write("NOTES.txt", "hello\n") }, nil},
		{"a2 scaled", func() { repo.write("clusters/a2.yaml", fmt.Sprintf(loopCluster, "a2", 1, 3)) }, []string{"a2"}},
		{"class small's version", func() {
			repo.write("classes/small.yaml", strings.Replace(fmt.Sprintf(loopClass, "inmemory"), "v1.31.2", "v1.31.3", 1))
		}, []string{"a1", "a2", "a3"}},
		{"a cluster added", func() { repo.write("clusters/a4.yaml", fmt.Sprintf(loopCluster, "a4", 1, 1)) }, []string{"a4"}},
		{"a cluster removed", func() { repo.git("rm", "-q", "clusters/a1.yaml") }, []string{"a1"}},
	} {
		step.edit()
		repo.commit(step.what)
		next := desired()
		clear(r.dirty)
		r.markChanged(prev, next)
		var got []string
		for name := range r.dirty {
			got = append(got, name)
		}
		slices.Sort(got)
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: planned %v, want %v", step.what, got, step.want)
		}
		prev = next
	}
}
