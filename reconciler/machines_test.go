package reconciler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func listMachine(name string, rev uint64) *machine {
	return &machine{rec: &Record{Name: name}, rev: rev}
}

// TestMachineListKeepsWhatAMapWould: random puts and removes on a
// cluster's list and on a map agree on every lookup, and the list stays
// sorted by name.
func TestMachineListKeepsWhatAMapWould(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var l machineList
	want := map[string]*machine{}
	for i := range 5000 {
		name := fmt.Sprintf("m-%02d", rng.IntN(40))
		var old *machine
		if rng.IntN(3) == 0 {
			l, old = l.without(name)
			if old != want[name] {
				t.Fatalf("step %d: removing %s gave %v, want %v", i, name, old, want[name])
			}
			delete(want, name)
		} else {
			m := listMachine(name, uint64(i))
			l, old = l.with(m)
			if old != want[name] {
				t.Fatalf("step %d: putting %s replaced %v, want %v", i, name, old, want[name])
			}
			want[name] = m
		}
		if len(l) != len(want) {
			t.Fatalf("step %d: %d machines, want %d", i, len(l), len(want))
		}
		if !slices.IsSortedFunc(l, func(a, b *machine) int { return strings.Compare(a.rec.Name, b.rec.Name) }) {
			t.Fatalf("step %d: not sorted by name", i)
		}
		for n, m := range want {
			if got := l.get(n); got != m {
				t.Fatalf("step %d: get %s = %v, want %v", i, n, got, m)
			}
		}
	}
	if got := l.get("absent"); got != nil {
		t.Errorf("get of a name not in the list = %v", got)
	}
}

// TestMachineListLoopSeesEachMachineOnce: a loop over a cluster's list
// that replaces, removes or adds beside the machine it is at (as the tick
// does: a retry, a record found deleted, a reload) meets every machine
// that was there once, each at its current version.
func TestMachineListLoopSeesEachMachineOnce(t *testing.T) {
	var cur machineList
	for i := range 10 {
		cur, _ = cur.with(listMachine(fmt.Sprintf("m-%02d", i), 1))
	}
	seen := map[string]int{}
	for i, m := range cur {
		seen[m.rec.Name]++
		if m.rev != 1 {
			t.Errorf("machine %s met at version %d, want the current one", m.rec.Name, m.rev)
		}
		switch i % 3 {
		case 0:
			cur, _ = cur.with(listMachine(m.rec.Name, 2)) // replaced
		case 1:
			cur, _ = cur.without(m.rec.Name) // removed
		case 2:
			cur, _ = cur.with(listMachine(m.rec.Name+"-new", 1)) // one added
		}
	}
	for i := range 10 {
		if n := seen[fmt.Sprintf("m-%02d", i)]; n != 1 {
			t.Errorf("m-%02d met %d times, want once", i, n)
		}
	}
	if len(seen) != 10 {
		t.Errorf("the loop met %d machines, want the 10 that were there", len(seen))
	}
}
