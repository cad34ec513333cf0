package history

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/gitfleet/gitfleet/reconciler/status"
)

// MachineLife is the life of one machine on the status branch.
type MachineLife struct {
	Machine string         `json:"machine"`
	Cluster string         `json:"cluster"`
	Events  []MachineEvent `json:"events"`
}

// MachineEvent is one change of the machine: its phase (Gone once its
// delete finished), why, and the spec commits that led to it.
type MachineEvent struct {
	StatusCommit string    `json:"statusCommit"`
	Time         time.Time `json:"time"`
	Phase        string    `json:"phase"`
	Unhealthy    bool      `json:"unhealthy,omitempty"`
	// Reason and Message are what the provider or the health check said.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// HealthReason and HealthMessage are why it is unhealthy: its Healthy
	// condition's reason and message.
	HealthReason  string `json:"healthReason,omitempty"`
	HealthMessage string `json:"healthMessage,omitempty"`
	// Cause is why the daemon decided the machine's task: a spec change,
	// a remediation, the inventory, a rollout. It is not why the machine
	// is unhealthy.
	Cause    string    `json:"cause,omitempty"`
	Triggers []SpecRef `json:"triggers,omitempty"`
}

// PhaseGone is the phase of a machine whose delete finished.
const PhaseGone = "Gone"

// SpecRef names a spec commit.
type SpecRef struct {
	Commit  string `json:"commit"`
	Author  string `json:"author,omitempty"`
	Subject string `json:"subject,omitempty"`
}

// Machine reads the life of machine from the status branch: when it came
// and went, and why.
func Machine(g *git.Repository, statusBranch, machine string) (*MachineLife, error) {
	if statusBranch == "" {
		statusBranch = status.BranchOf(g)
	}
	events, err := status.MachineHistory(g, statusBranch, machine)
	if err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return nil, fmt.Errorf("machine %q is %w of %s", machine, ErrNotFound, statusBranch)
	}
	life := &MachineLife{Machine: machine, Cluster: events[0].Cluster}
	for _, e := range events {
		ev := MachineEvent{StatusCommit: e.Commit, Time: e.Time.UTC(), Phase: PhaseGone}
		if d := e.Deleted; d != nil {
			ev.Cause, ev.Reason = d.Cause, d.Reason
		}
		if m := e.Machine; m != nil {
			ev.Phase, ev.Unhealthy, ev.Reason, ev.Message, ev.Cause = m.Phase, m.Unhealthy, m.Reason, m.Message, m.Cause
			ev.HealthReason, ev.HealthMessage = m.HealthProblem()
		}
		for _, t := range e.Triggers {
			ev.Triggers = append(ev.Triggers, specRef(g, t))
		}
		life.Events = append(life.Events, ev)
	}
	return life, nil
}

func specRef(g *git.Repository, hash string) SpecRef {
	r := SpecRef{Commit: hash}
	if c, err := g.CommitObject(plumbing.NewHash(hash)); err == nil {
		r.Author = c.Author.Name
		r.Subject, _, _ = strings.Cut(c.Message, "\n")
	}
	return r
}

// WriteText prints one line per change: time, phase, what the provider
// or health check said, the cause when it changed, and the spec commits.
// A change of health says what the Healthy condition says, and no cause:
// the cause is why the machine's task was decided (its creation, its
// delete), never why it is unhealthy.
func (l *MachineLife) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "machine %s of cluster %s\n", l.Machine, l.Cluster)
	cause, fleetAt := "", ""
	var prev *MachineEvent
	for i := range l.Events {
		e := &l.Events[i]
		line := fmt.Sprintf("%s  %-12s", e.Time.Format("2006-01-02 15:04:05"), strings.ToLower(e.Phase))
		if e.Phase != PhaseGone {
			line = fmt.Sprintf("%s  %-12s", e.Time.Format("2006-01-02 15:04:05"), e.Phase)
		}
		health := e.healthChange(prev)
		healthOnly := health != "" && prev != nil && prev.Phase == e.Phase
		if e.Unhealthy && health == "" {
			line += " unhealthy"
		}
		if e.Reason != "" && e.Phase != PhaseGone && !healthOnly {
			line += " " + e.Reason
			if e.Message != "" {
				line += ": " + e.Message
			}
		}
		if e.Cause != "" && e.Cause != cause && !healthOnly {
			line += " because: " + e.Cause
			if e.Phase != PhaseGone {
				cause = e.Cause
			}
			if health != "" {
				line += ";"
			}
		}
		if health != "" {
			line += " " + health
		}
		// The spec commits the daemon had applied then: the cause of a
		// create or delete is the "because"; these say which revision of
		// the fleet it was, when that changed.
		var refs []string
		for _, t := range e.Triggers {
			refs = append(refs, t.text())
		}
		if at := strings.Join(refs, "; "); at != "" && at != fleetAt {
			line += " (fleet at " + at + ")"
			fleetAt = at
		}
		fmt.Fprintln(b, strings.TrimRight(line, " "))
		prev = e
	}
	return b.Flush()
}

// healthChange says how e's health differs from prev's (nil: e is the
// first event): "unhealthy: <reason>: <message>" or "healthy again"; ""
// when it is the same, or when the machine left Running (only a Running
// machine is marked unhealthy) or the branch.
func (e *MachineEvent) healthChange(prev *MachineEvent) string {
	was := prev != nil && prev.Unhealthy
	switch {
	case e.Phase == PhaseGone || e.Unhealthy == was:
		return ""
	case e.Unhealthy:
		if why := status.HealthText(e.HealthReason, e.HealthMessage); why != "" {
			return "unhealthy: " + why
		}
		return "unhealthy"
	case prev.Phase == e.Phase:
		return "healthy again"
	}
	return ""
}

func (r SpecRef) text() string {
	if r.Author == "" {
		return fmt.Sprintf("spec %.7s", r.Commit)
	}
	return fmt.Sprintf("spec %.7s by %s: %s", r.Commit, r.Author, r.Subject)
}
