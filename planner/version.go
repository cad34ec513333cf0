package planner

import (
	"fmt"
	"strconv"
	"strings"
)

// version is a parsed Kubernetes version vMAJOR.MINOR.PATCH.
type version struct{ major, minor, patch int }

func parseVersion(s string) (version, bool) {
	rest, ok := strings.CutPrefix(s, "v")
	if !ok {
		return version{}, false
	}
	// Drop pre-release and build metadata: v1.30.2-rc.1+build.
	if i := strings.IndexAny(rest, "-+"); i >= 0 {
		rest = rest[:i]
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return version{}, false
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return version{}, false
		}
		n[i] = v
	}
	return version{n[0], n[1], n[2]}, true
}

func (v version) String() string { return fmt.Sprintf("v%d.%d.%d", v.major, v.minor, v.patch) }

func (v version) compare(w version) int {
	switch {
	case v.major != w.major:
		return cmpInt(v.major, w.major)
	case v.minor != w.minor:
		return cmpInt(v.minor, w.minor)
	default:
		return cmpInt(v.patch, w.patch)
	}
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

// compareVersions orders two version strings; unparsable ones sort first.
func compareVersions(a, b string) int {
	va, oka := parseVersion(a)
	vb, okb := parseVersion(b)
	switch {
	case !oka && !okb:
		return strings.Compare(a, b)
	case !oka:
		return -1
	case !okb:
		return 1
	}
	return va.compare(vb)
}

// ErrVersion says why an upgrade from one version to another cannot be
// planned; Problem carries it to the user with the fix.
type versionError struct {
	field   string // which field of the class to fix, when the fix is there
	message string
}

// upgradeChain returns the versions an upgrade from -> to passes through,
// ending with to: one minor at a time, intermediates taken from the class's
// kubernetesVersions (the highest patch listed for each minor). from == to
// gives nil. A downgrade, a major change or a missing intermediate is an error.
func upgradeChain(from, to string, listed []string) ([]string, *versionError) {
	vf, okf := parseVersion(from)
	vt, okt := parseVersion(to)
	if !okt {
		return nil, &versionError{message: fmt.Sprintf("%q is not a version like v1.30.2", to)}
	}
	if !okf || from == to {
		return nil, nil
	}
	switch c := vf.compare(vt); {
	case c == 0:
		return nil, nil
	case c > 0:
		return nil, &versionError{message: fmt.Sprintf("cannot downgrade from %s to %s: Kubernetes versions never go down; set the version back to %s or later", from, to, from)}
	}
	if vf.major != vt.major {
		return nil, &versionError{message: fmt.Sprintf("cannot upgrade from %s to %s: a major version change is not supported", from, to)}
	}
	var chain []string
	for m := vf.minor + 1; m < vt.minor; m++ {
		best, ok := highestPatch(listed, vt.major, m)
		if !ok {
			return nil, &versionError{field: "spec.kubernetesVersions", message: fmt.Sprintf(
				"cannot upgrade from %s to %s: minor versions go up one at a time and no v%d.%d.x is listed to pass through; add one (e.g. v%d.%d.0) to the class's spec.kubernetesVersions, or upgrade to v%d.%d.x first",
				from, to, vt.major, m, vt.major, m, vt.major, m)}
		}
		chain = append(chain, best.String())
	}
	return append(chain, to), nil
}

func highestPatch(listed []string, major, minor int) (version, bool) {
	var best version
	found := false
	for _, s := range listed {
		v, ok := parseVersion(s)
		if !ok || v.major != major || v.minor != minor {
			continue
		}
		if !found || v.compare(best) > 0 {
			best, found = v, true
		}
	}
	return best, found
}
