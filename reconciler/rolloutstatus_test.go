package reconciler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestAClassChangeThatMovesNoMachineIsInFleetYAML: a class commit that
// makes a new revision but changes no cluster's machines (here a variable
// default no patch reads) still shows in fleet.yaml at once: the class's
// rollout names the new revision and the commit that made it, though no
// cluster's summary moved.
func TestAClassChangeThatMovesNoMachineIsInFleetYAML(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 1)
	l.start()
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning) // the control plane first
	l.answer(l.nextTasks(1)[0], wire.PhaseRunning)
	l.waitRecords("Running Running")
	first := l.rolloutOf("small", "")

	l.repo.write("classes/small.yaml", fmt.Sprintf(loopClass, "inmemory")+"  variables:\n    - name: unused\n      default: 2\n")
	l.repo.commit("small: a variable nobody reads yet")
	head, err := l.g.Head()
	if err != nil {
		t.Fatal(err)
	}
	commit := head.Hash().String()
	l.apply()
	second := l.rolloutOf("small", first.revision)
	if second.change == "" || !strings.HasPrefix(commit, second.change) {
		t.Errorf("rollout of small names change %q, want the commit %s", second.change, commit)
	}
	l.noMoreTasks(300 * time.Millisecond)
}

type rolloutSeen struct{ revision, change string }

// rolloutOf waits until fleet.yaml shows a rollout of class at a revision
// other than not, and returns it.
func (l *loop) rolloutOf(class, not string) rolloutSeen {
	l.t.Helper()
	var seen rolloutSeen
	l.waitFor("class "+class+"'s rollout in fleet.yaml at a revision other than "+not, func() (bool, string) {
		for _, r := range l.statusSnapshot().Fleet.Rollouts {
			if r.Class != class {
				continue
			}
			seen = rolloutSeen{revision: r.Revision}
			if r.Change != nil {
				seen.change = r.Change.Commit
			}
			return r.Revision != not, fmt.Sprintf("%+v", r)
		}
		return false, "no rollout of " + class
	})
	return seen
}
