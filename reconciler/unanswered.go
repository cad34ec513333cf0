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
	provider string
	worker   string          // for a host-bound provider: the worker its tasks go to
	since    time.Time       // the first unanswered task's publication
	machines map[string]bool // cluster/name of the machines whose tasks wait
	first    string          // one of them, for the message: "create dev-1-md-0-x"
}

// noAnswer notes that m's task went unanswered since it was published,
// and reports whether the condition changed (fleet.yaml is to be written).
// A host-bound provider's task goes to one worker (the machine's): that
// worker is named, and only its events clear it.
func (r *Reconciler) noAnswer(m *machine) bool {
	rec := m.rec
	key, worker := rec.Provider, ""
	if h := r.inv.providers[rec.Provider]; h != nil && h.hostBound && rec.Worker != "" {
		worker = rec.Worker
		key += "\x00" + worker
	}
	u := r.unanswered[key]
	if u == nil {
		u = &unanswered{provider: rec.Provider, worker: worker, since: rec.Published.Time(), machines: map[string]bool{},
			first: string(rec.operation()) + " " + rec.Name}
		r.unanswered[key] = u
		r.log.Warn().Str("provider", rec.Provider).Msg("no worker of the provider answers its tasks: " + r.unansweredMessage(u))
		u.machines[rec.Cluster+"/"+rec.Name] = true
		return true
	}
	u.machines[rec.Cluster+"/"+rec.Name] = true
	return false
}

// answered notes an event of a machine of provider that worker reported:
// the provider's workers answer, and that worker does. It reports whether
// the condition changed.
func (r *Reconciler) answered(provider, worker string) bool {
	n := len(r.unanswered)
	delete(r.unanswered, provider)
	if worker != "" {
		delete(r.unanswered, provider+"\x00"+worker)
	}
	if len(r.unanswered) == n {
		return false
	}
	r.log.Info().Str("provider", provider).Msg("the provider's workers answer its tasks again")
	return true
}

// unansweredCondition is fleet.yaml's TasksAnswered condition, naming the
// providers whose tasks go unanswered, or nil while every provider's
// workers answer.
func (r *Reconciler) unansweredCondition() *status.FleetCondition {
	if len(r.unanswered) == 0 {
		return nil
	}
	c := &status.FleetCondition{Condition: status.Condition{Type: status.ConditionTasksAnswered, Status: status.ConditionFalse, Reason: "NoWorkerAnswers"}}
	var msgs []string
	for _, k := range slices.Sorted(maps.Keys(r.unanswered)) {
		u := r.unanswered[k]
		msgs = append(msgs, r.unansweredMessage(u))
		c.Providers = append(c.Providers, u.provider)
		if t := u.since.UTC().Truncate(time.Second); c.LastTransitionTime.IsZero() || t.Before(c.LastTransitionTime) {
			c.LastTransitionTime = t
		}
	}
	c.Message = strings.Join(msgs, "; ")
	c.Providers = slices.Compact(c.Providers) // sorted: keys begin with the provider
	return c
}

func (r *Reconciler) unansweredMessage(u *unanswered) string {
	n := len(u.machines)
	tasks := "tasks"
	if n == 1 {
		tasks = "task"
	}
	if u.worker != "" {
		return fmt.Sprintf("provider %s: worker %s answered none of its %d %s in %v (%s, published %s); its machines live on its host: start it again there, or check that it reaches NATS",
			u.provider, u.worker, n, tasks, r.o.TaskTimeout, u.first, u.since.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("provider %s: no worker answered %d %s in %v (%s, published %s); start a worker for it (gitfleet worker --provider %s) or check that its workers reach NATS",
		u.provider, n, tasks, r.o.TaskTimeout, u.first, u.since.UTC().Format(time.RFC3339), u.provider)
}
