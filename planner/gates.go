package planner

// Gate is what a cluster's class rollout allows it right now.
type Gate struct {
	// Hold: outdated machines must not be replaced yet (the cluster's wave
	// has not come, its wave is at maxConcurrent, or the rollout halted).
	Hold bool
	// Halted: the rollout halted and this cluster failed; it gets no steps
	// until a person looks.
	Halted bool
	Reason string
}
