// Package layered is a map whose versions share what they have alike. A
// version is a base map, shared with the versions it came from and never
// written, and a small map of what this version set on top of it. The
// next version of a daemon's 10,000-entry maps usually differs in an entry
// or two: Clone copies the small map, not the 10,000 entries, and folds the
// two into a new base only once the small one has grown past the square
// root of the base's size, so a clone costs about that many entries at
// most, however the changes come.
//
// A Map is written (Set) only by whoever made it, before anyone else reads
// it, and not after it was cloned: its clones share its maps. Reading a
// Map that is no longer written is safe from many goroutines.
package layered

import (
	"iter"
	"math"
	"sync/atomic"
)

// Map is one version of a map from K to V. The zero Map is empty, and a
// nil *Map reads as empty.
type Map[K comparable, V any] struct {
	base map[K]V // shared: never written
	top  map[K]V // this version's own: set over base
	n    int     // keys in all
	// cloned says the Map has been cloned: its maps are shared, so Set
	// would change its clones too.
	cloned atomic.Bool
}

// New returns an empty Map with room for size keys.
func New[K comparable, V any](size int) *Map[K, V] {
	return &Map[K, V]{top: make(map[K]V, size)}
}

// Get returns the value of k, and whether k is in the map.
func (m *Map[K, V]) Get(k K) (V, bool) {
	if m == nil {
		var zero V
		return zero, false
	}
	if v, ok := m.top[k]; ok {
		return v, true
	}
	v, ok := m.base[k]
	return v, ok
}

// All yields every key and its value, in no order.
func (m *Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if m == nil {
			return
		}
		for k, v := range m.top {
			if !yield(k, v) {
				return
			}
		}
		for k, v := range m.base {
			if _, over := m.top[k]; !over && !yield(k, v) {
				return
			}
		}
	}
}

// Len is the number of keys.
func (m *Map[K, V]) Len() int {
	if m == nil {
		return 0
	}
	return m.n
}

// Set sets k to v. It panics on a Map that was cloned.
func (m *Map[K, V]) Set(k K, v V) {
	if m.cloned.Load() {
		panic("layered: Set on a map that was cloned")
	}
	if m.top == nil {
		m.top = map[K]V{}
	}
	if _, ok := m.top[k]; !ok {
		if _, ok := m.base[k]; !ok {
			m.n++
		}
	}
	m.top[k] = v
}

// foldAt is how large the top map may grow, for a base of n keys, before
// a clone folds it into a new base. A clone copies the top, a fold the
// base: with each change a new key, a top of f costs f/2 a clone on
// average and a fold n/f, least at f = √(2n) (141 for 10,000 keys).
func foldAt(n int) int { return max(32, int(math.Sqrt(float64(2*n)))) }

// Clone returns a new version of m, which Set may change without changing
// m. m may not be Set after it. The clone of nil is an empty Map.
func (m *Map[K, V]) Clone() *Map[K, V] {
	if m == nil {
		return &Map[K, V]{}
	}
	m.cloned.Store(true)
	c := &Map[K, V]{n: m.n}
	switch {
	case len(m.top) == 0:
		c.base = m.base
	case len(m.base) == 0:
		// The top is no longer written (m was cloned): it is the base.
		c.base = m.top
	case len(m.top) <= foldAt(len(m.base)):
		c.base = m.base
		c.top = make(map[K]V, len(m.top)+1)
		for k, v := range m.top {
			c.top[k] = v
		}
	default:
		c.base = make(map[K]V, m.n)
		for k, v := range m.base {
			c.base[k] = v
		}
		for k, v := range m.top {
			c.base[k] = v
		}
	}
	return c
}
