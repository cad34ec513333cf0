package status

// tally counts a cluster's machines by phase or by version. A cluster has
// one or two of each, so a short slice holds them in a fraction of a map's
// room (a summary is kept for every cluster of the fleet).
type tally []tallyEntry

type tallyEntry struct {
	key string
	n   int
}

func (t *tally) add(key string) {
	for i := range *t {
		if (*t)[i].key == key {
			(*t)[i].n++
			return
		}
	}
	*t = append(*t, tallyEntry{key, 1})
}

// toMap is t as the summary cache writes it.
func (t tally) toMap() map[string]int {
	if len(t) == 0 {
		return nil
	}
	m := make(map[string]int, len(t))
	for _, e := range t {
		m[e.key] += e.n
	}
	return m
}

func tallyOf(m map[string]int) tally {
	var t tally
	for k, n := range m {
		t = append(t, tallyEntry{k, n})
	}
	return t
}

// condMarks are a cluster's conditions by type; the last set of a type
// wins.
type condMarks []condEntry

type condEntry struct {
	typ string
	condMark
}

func (c *condMarks) set(typ string, m condMark) {
	for i := range *c {
		if (*c)[i].typ == typ {
			(*c)[i].condMark = m
			return
		}
	}
	*c = append(*c, condEntry{typ, m})
}

func (c condMarks) get(typ string) (condMark, bool) {
	for _, e := range c {
		if e.typ == typ {
			return e.condMark, true
		}
	}
	return condMark{}, false
}
