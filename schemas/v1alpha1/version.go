package v1alpha1

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a parsed Kubernetes version vMAJOR.MINOR.PATCH.
type Version struct{ Major, Minor, Patch int }

// ParseVersion reads v1.30.2 (pre-release and build metadata are dropped:
// v1.30.2-rc.1+build is v1.30.2).
func ParseVersion(s string) (Version, bool) {
	rest, ok := strings.CutPrefix(s, "v")
	if !ok {
		return Version{}, false
	}
	if i := strings.IndexAny(rest, "-+"); i >= 0 {
		rest = rest[:i]
	}
	// Three parts between dots, cut without a slice: versions are parsed
	// for every pool of every cluster a plan expands.
	var n [3]int
	for i := range n {
		part := rest
		if i < len(n)-1 {
			var ok bool
			if part, rest, ok = strings.Cut(rest, "."); !ok {
				return Version{}, false
			}
		} else if strings.Contains(part, ".") {
			return Version{}, false
		}
		v, err := strconv.Atoi(part)
		if err != nil || v < 0 {
			return Version{}, false
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, true
}

func (v Version) String() string { return fmt.Sprintf("v%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Compare orders two versions: -1, 0 or 1.
func (v Version) Compare(w Version) int {
	switch {
	case v.Major != w.Major:
		return cmpInt(v.Major, w.Major)
	case v.Minor != w.Minor:
		return cmpInt(v.Minor, w.Minor)
	}
	return cmpInt(v.Patch, w.Patch)
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
