package schemas

import (
	"testing"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// A CUE context is dropped after rotateAfter values are built in it, which
// keeps memory flat; values it already judged build nothing, so a fleet
// whose clusters set the same few values keeps one context (compiling the
// schema again cost a 1,000-cluster plan a dozen compilations).
func TestVariablesRotateOnCUEWorkOnly(t *testing.T) {
	class := &v1alpha1.ClusterClass{Metadata: v1alpha1.ObjectMeta{Name: "standard"},
		Spec: v1alpha1.ClusterClassSpec{Variables: []v1alpha1.ClassVariable{{Name: "cpus", Constraint: "int & >=1 & <=64"}}}}
	check := func(vs *variables, value int) string {
		cv, err := vs.compile(class, 0)
		if err != nil {
			t.Fatal(err)
		}
		return cv.check(value)
	}

	same := newVariables()
	defer same.close()
	first := same.v
	for range 3 * rotateAfter {
		if msg := check(same, 4); msg != "" {
			t.Fatalf("4 refused: %s", msg)
		}
	}
	if same.v != first {
		t.Errorf("the context was dropped while every check was remembered")
	}

	distinct := newVariables()
	defer distinct.close()
	seen := map[*compiled]bool{distinct.v: true}
	for i := range 3 * rotateAfter {
		value := i%64 + 1
		if i%2 == 1 {
			value = 64 + i // refused: each a new value for CUE
		}
		msg := check(distinct, value)
		if (msg == "") != (value <= 64) {
			t.Fatalf("value %d: verdict %q", value, msg)
		}
		seen[distinct.v] = true
		if distinct.v.used > rotateAfter {
			t.Fatalf("%d values built in one context, want at most %d", distinct.v.used, rotateAfter)
		}
	}
	if len(seen) < 2 {
		t.Errorf("%d new values built in one context: it was never dropped", 3*rotateAfter/2)
	}
}
