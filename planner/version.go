package planner

import (
	"fmt"
	"strings"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

type version = v1alpha1.Version

func parseVersion(s string) (version, bool) { return v1alpha1.ParseVersion(s) }

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
	return va.Compare(vb)
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
	switch c := vf.Compare(vt); {
	case c == 0:
		return nil, nil
	case c > 0:
		return nil, &versionError{message: fmt.Sprintf("cannot downgrade from %s to %s: Kubernetes versions never go down; set the version back to %s or later", from, to, from)}
	}
	if vf.Major != vt.Major {
		return nil, &versionError{message: fmt.Sprintf("cannot upgrade from %s to %s: a major version change is not supported", from, to)}
	}
	var chain []string
	for m := vf.Minor + 1; m < vt.Minor; m++ {
		best, ok := highestPatch(listed, vt.Major, m)
		if !ok {
			return nil, &versionError{field: "spec.kubernetesVersions", message: fmt.Sprintf(
				"cannot upgrade from %s to %s: minor versions go up one at a time and no v%d.%d.x is listed to pass through; add one (e.g. v%d.%d.0) to the class's spec.kubernetesVersions, or upgrade to v%d.%d.x first",
				from, to, vt.Major, m, vt.Major, m, vt.Major, m)}
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
		if !ok || v.Major != major || v.Minor != minor {
			continue
		}
		if !found || v.Compare(best) > 0 {
			best, found = v, true
		}
	}
	return best, found
}
