package status

// Words the cluster views share (gitfleet describe, the dashboard), so that
// they say a cluster's state alike.

// HaltHold returns the RolloutHalted condition of a cluster its class's
// halted rollout holds — its rollout waits (state Waiting) and the
// condition is True, with its words — or nil. Such a cluster waits for no
// wave: only a fix, a revert or a higher maxFailures releases it.
func (c *ClusterStatus) HaltHold() *Condition {
	if c.Rollout == nil || c.Rollout.State != "Waiting" {
		return nil
	}
	for i := range c.Conditions {
		if cd := &c.Conditions[i]; cd.Type == ConditionRolloutHalted && cd.Status == ConditionTrue && cd.Message != "" {
			return cd
		}
	}
	return nil
}

// HeldByHalt says that a cluster its class's halted rollout holds (HaltHold)
// is held, and what it runs meanwhile: "held by its class's halted rollout
// (runs class revision 9ce7da3c89)", or "(admitted to no revision)" for one
// added during the halt, which has no revision yet (its wave is the one its
// class's waves put it in). The
// RolloutHalted condition's message says the halt and what releases it.
func (r *Rollout) HeldByHalt() string {
	on := "runs class revision " + r.ClassRevision
	if r.ClassRevision == "" {
		on = "admitted to no revision"
	}
	return "held by its class's halted rollout (" + on + ")"
}
