package reconciler

import (
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestUnansweredTasksAreInFleetYAML: a provider whose tasks nobody answers
// (no worker runs for it) is named in fleet.yaml's TasksAnswered
// condition, with what to do, once a task went unanswered past the task
// timeout; the first event of its workers clears it.
func TestUnansweredTasksAreInFleetYAML(t *testing.T) {
	l := newLoop(t, "inmemory", 1, 0)
	l.opts.TaskTimeout = 300 * time.Millisecond
	l.start()
	first := l.nextTasks(1)[0]
	condition := func() *status.Condition {
		for _, c := range l.statusSnapshot().Fleet.Conditions {
			if c.Type == status.ConditionTasksAnswered {
				return &c
			}
		}
		return nil
	}
	l.waitFor("TasksAnswered False in fleet.yaml", func() (bool, string) {
		c := condition()
		if c == nil {
			return false, "no TasksAnswered condition"
		}
		return c.Status == status.ConditionFalse && c.Reason == "NoWorkerAnswers" &&
			strings.Contains(c.Message, "provider inmemory: no worker answered 1 task") &&
			strings.Contains(c.Message, "create "+first.task.Machine.Name) &&
			strings.Contains(c.Message, "gitfleet worker --provider inmemory") && !c.LastTransitionTime.IsZero(), c.Message
	})
	// A worker comes and answers the task's newest attempt.
	var last received
	for {
		task := l.nextTasks(1)[0]
		last = task
		if task.task.Attempt > first.task.Attempt {
			break
		}
	}
	l.answer(last, wire.PhaseRunning)
	l.waitFor("TasksAnswered gone from fleet.yaml", func() (bool, string) {
		if c := condition(); c != nil {
			return false, c.Message
		}
		return true, ""
	})
}
