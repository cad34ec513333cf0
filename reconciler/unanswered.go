package reconciler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/reconciler/status"
)

// unanswered is a provider whose tasks went unanswered past the task
// timeout (retry) with no event of its workers since: likely no worker of
// it runs, or none reaches NATS. fleet.yaml says so in the condition
// TasksAnswered, which an event of the provider clears.
type unanswered struct {
	since    time.Time       // the first unanswered task's publication
	machines map[string]bool // cluster/name of the machines whose tasks wait
	first    string          // one of them, for the message: "create dev-1-md-0-x"
}

// noAnswer notes that m's task went unanswered since it was published.
func (r *Reconciler) noAnswer(m *machine) {
	rec := m.rec
	u := r.unanswered[rec.Provider]
	if u == nil {
		u = &unanswered{since: rec.Published.Time(), machines: map[string]bool{},
			first: string(rec.operation()) + " " + rec.Name}
		r.unanswered[rec.Provider] = u
		r.log.Warn().Str("provider", rec.Provider).Msg("no worker of the provider answers its tasks: " + r.unansweredMessage(rec.Provider, u))
		defer r.writeFleet()
	}
	u.machines[rec.Cluster+"/"+rec.Name] = true
}

// answered notes an event of one of the provider's workers: they answer.
func (r *Reconciler) answered(provider string) {
	if _, ok := r.unanswered[provider]; ok {
		delete(r.unanswered, provider)
		r.log.Info().Str("provider", provider).Msg("the provider's workers answer its tasks again")
		r.writeFleet()
	}
}

// unansweredCondition is fleet.yaml's TasksAnswered condition, or nil
// while every provider's workers answer.
func (r *Reconciler) unansweredCondition() *status.Condition {
	if len(r.unanswered) == 0 {
		return nil
	}
	c := &status.Condition{Type: status.ConditionTasksAnswered, Status: status.ConditionFalse, Reason: "NoWorkerAnswers"}
	var msgs []string
	for _, p := range slices.Sorted(maps.Keys(r.unanswered)) {
		u := r.unanswered[p]
		msgs = append(msgs, r.unansweredMessage(p, u))
		if t := u.since.UTC().Truncate(time.Second); c.LastTransitionTime.IsZero() || t.Before(c.LastTransitionTime) {
			c.LastTransitionTime = t
		}
	}
	c.Message = strings.Join(msgs, "; ")
	return c
}

func (r *Reconciler) unansweredMessage(provider string, u *unanswered) string {
	n := len(u.machines)
	tasks := "tasks"
	if n == 1 {
		tasks = "task"
	}
	return fmt.Sprintf("provider %s: no worker answered %d %s in %v (%s, published %s); start a worker for it (gitfleet worker --provider %s) or check that its workers reach NATS",
		provider, n, tasks, r.o.TaskTimeout, u.first, u.since.UTC().Format(time.RFC3339), provider)
}
