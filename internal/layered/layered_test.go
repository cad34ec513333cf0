package layered

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestVersionsAreIndependent: a run of versions, each a clone of the one
// before with some keys set (new ones and old ones, few and many, so that
// clones keep their base and fold it), holds at every version exactly
// what a plain map copied at that version holds, and no later version
// changes an earlier one.
func TestVersionsAreIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[int]int{}
	m := New[int, int](0)
	for k := range 1000 {
		m.Set(k, k)
		want[k] = k
	}
	type version struct {
		m    *Map[int, int]
		want map[int]int
	}
	var versions []version
	folds := 0
	for i := range 300 {
		versions = append(versions, version{m, copyOf(want)})
		before := m
		m = m.Clone()
		if len(m.top) == 0 && len(before.top) > 0 {
			folds++
		}
		n := 1 + rng.IntN(3)
		if i%50 == 49 {
			n = 400 // many at once: the next clone folds
		}
		for range n {
			k := rng.IntN(1500) // a third of them new keys
			m.Set(k, i)
			want[k] = i
		}
	}
	versions = append(versions, version{m, copyOf(want)})
	if folds == 0 {
		t.Fatal("no clone folded its top into a new base: the test does not cover folding")
	}
	for i, v := range versions {
		if v.m.Len() != len(v.want) {
			t.Fatalf("version %d: Len %d, want %d", i, v.m.Len(), len(v.want))
		}
		if all := maps.Collect(v.m.All()); !maps.Equal(all, v.want) {
			t.Fatalf("version %d: All yields %d keys unlike the map's %d", i, len(all), len(v.want))
		}
		for k := range 1600 {
			got, ok := v.m.Get(k)
			w, wok := v.want[k]
			if ok != wok || got != w {
				t.Fatalf("version %d: key %d is %d (%v), want %d (%v)", i, k, got, ok, w, wok)
			}
		}
	}
}

func copyOf(m map[int]int) map[int]int {
	c := make(map[int]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// TestSetAfterClonePanics: a cloned map shares its maps with the clone, so
// setting it would change the clone; it panics instead of doing so.
func TestSetAfterClonePanics(t *testing.T) {
	m := New[string, int](1)
	m.Set("a", 1)
	c := m.Clone()
	defer func() {
		if recover() == nil {
			t.Fatal("Set on a cloned map did not panic")
		}
		if v, _ := c.Get("a"); v != 1 {
			t.Fatalf("the clone's a is %d, want 1", v)
		}
	}()
	m.Set("a", 2)
}

// TestReadersAndClonesTogether: many goroutines read a version and clone
// it at once while each sets its own clone (run with -race).
func TestReadersAndClonesTogether(t *testing.T) {
	m := New[string, int](0)
	for i := range 100 {
		m.Set(fmt.Sprint(i), i)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			c := m.Clone()
			c.Set("mine", g)
			for i := range 100 {
				if v, ok := m.Get(fmt.Sprint(i)); !ok || v != i {
					t.Errorf("key %d read %d", i, v)
				}
			}
			if v, _ := c.Get("mine"); v != g {
				t.Errorf("goroutine %d's clone reads %d", g, v)
			}
		})
	}
	wg.Wait()
	if _, ok := m.Get("mine"); ok {
		t.Error("a clone's key is in the map it was cloned from")
	}
}

// TestNilIsEmpty: a nil *Map reads as empty, and its clone is a Map
// that takes keys.
func TestNilIsEmpty(t *testing.T) {
	var m *Map[string, int]
	if _, ok := m.Get("a"); ok || m.Len() != 0 {
		t.Fatal("a nil map has a key")
	}
	for range m.All() {
		t.Fatal("a nil map yields a key")
	}
	c := m.Clone()
	c.Set("a", 1)
	if v, ok := c.Get("a"); !ok || v != 1 || c.Len() != 1 {
		t.Fatalf("the clone of nil reads %d, %v, Len %d", v, ok, c.Len())
	}
}

func BenchmarkCloneOneChange10k(b *testing.B) {
	m := New[string, int](10000)
	for i := range 10000 {
		m.Set(fmt.Sprintf("c%05d", i), i)
	}
	b.ReportAllocs()
	for i := range b.N {
		m = m.Clone()
		m.Set(fmt.Sprintf("c%05d", i%10000), i)
	}
}
