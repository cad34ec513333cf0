package reconciler

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kinds of loop problems.
const (
	ProblemStore   = "Store"   // the gitfleet-machines bucket cannot be written
	ProblemPublish = "Publish" // tasks are not accepted by NATS
	ProblemStatus  = "Status"  // the status branch cannot be committed or pushed
	// ProblemRollouts: the gitfleet-rollouts bucket cannot be written.
	ProblemRollouts = "Rollouts"
	// ProblemBootstrap: a machine's bootstrap data cannot be made (the
	// gitfleet-pki bucket cannot be read or written).
	ProblemBootstrap = "Bootstrap"
	// ProblemHeartbeats: heartbeats are dropped unread (the loop falls
	// behind), so a machine that stops sending them is not noticed.
	ProblemHeartbeats = "Heartbeats"
)

// Problem is one kind of loop error that has not cleared: the newest error
// and since when the loop has had it.
type Problem struct {
	Kind    string
	Message string
	Since   time.Time
	// Cluster is the cluster the newest error was about, when the failing
	// operation was one cluster's own (its bootstrap data, a join to it,
	// saving its machine's record or its rollout record, publishing its
	// machine's task); fleet.yaml's condition records it
	// (status.FleetCondition.Clusters).
	Cluster string
}

// LoopHealth collects the reconciler loop's errors. The loop reports each
// kind of operation's outcome (Report with nil clears it); the daemon shows
// what has not cleared as a condition in fleet.yaml and fails /readyz when
// a problem lasts longer than a bound. Safe for concurrent use; one lives
// as long as the daemon, across leadership terms.
type LoopHealth struct {
	mu       sync.Mutex
	now      func() time.Time
	problems map[string]Problem
	changed  chan struct{}
}

// NewLoopHealth returns a LoopHealth with no problem.
func NewLoopHealth() *LoopHealth {
	return &LoopHealth{now: time.Now, problems: map[string]Problem{}, changed: make(chan struct{}, 1)}
}

// Report records the outcome of an operation of kind: err nil clears it.
func (h *LoopHealth) Report(kind string, err error) { h.ReportFor(kind, "", err) }

// ReportFor is Report for an operation that was cluster's own: a problem
// it starts or renews is about that cluster.
func (h *LoopHealth) ReportFor(kind, cluster string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, had := h.problems[kind]
	if err == nil {
		if had {
			delete(h.problems, kind)
			h.poke()
		}
		return
	}
	p := Problem{Kind: kind, Message: err.Error(), Since: h.now(), Cluster: cluster}
	if had {
		p.Since = old.Since
	}
	h.problems[kind] = p
	if !had {
		h.poke()
	}
}

func (h *LoopHealth) poke() {
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

// Changed is signalled when a kind of problem appears or clears.
func (h *LoopHealth) Changed() <-chan struct{} { return h.changed }

// Problems returns the problems that have not cleared, by kind.
func (h *LoopHealth) Problems() []Problem {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Problem, 0, len(h.problems))
	for _, p := range h.problems {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// Err describes the problems that have lasted longer than bound; nil when
// there are none.
func (h *LoopHealth) Err(bound time.Duration) error {
	now := h.now()
	var msgs []string
	for _, p := range h.Problems() {
		if now.Sub(p.Since) > bound {
			msgs = append(msgs, fmt.Sprintf("%s failing for %s: %s", strings.ToLower(p.Kind), now.Sub(p.Since).Round(time.Second), p.Message))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("reconciler loop: %s", strings.Join(msgs, "; "))
}
