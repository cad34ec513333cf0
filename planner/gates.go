package planner

// Gate is what a cluster's class rollout decided for it right now.
type Gate struct {
	// Admit: admit the cluster to Revision now, in state AdmitState; its
	// machines then move to the desired templates.
	Admit      bool
	Revision   string
	AdmitState string
	// Waiting: a newer class revision (PendingRevision) waits for this
	// cluster's wave; meanwhile the cluster keeps what it was admitted to.
	Waiting         bool
	PendingRevision string
	// Hold: the cluster was never admitted and runs other templates than
	// the desired ones, which the planner does not know: outdated machines
	// are not replaced, and a pool whose machines do not all run its
	// desired template (or that has none left) makes no missing machine
	// until the cluster's wave admits it (heldByGate).
	Hold bool
	// OnHalt: the revision the cluster waits for is the one whose rollout
	// halted; nothing admits the cluster until the class changes again (a
	// fix or a revert) or maxFailures is raised. A new cluster (Hold, no
	// machine) then gets no steps: it would be made from the revision that
	// failed.
	OnHalt bool
	// Halted: the cluster failed on a rollout that halted, or that a newer
	// revision replaced; it gets no steps until it is admitted again (so a
	// person can look at its failed machines).
	Halted bool
	// Paused: the cluster is paused and not on the class's revision: the
	// rollout of PendingRevision passes it over (Reason says so).
	Paused bool
	Reason string
}
