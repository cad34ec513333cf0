// Package planner decides what should happen next to a fleet. It is pure: it
// takes the desired fleet (Expand), the machines the daemon observed and the
// time, and returns the steps allowed right now (create or delete a machine,
// each with a reason), every cluster's phase and conditions, and every
// class's rollout state. No I/O, no clock it did not receive, no randomness:
// the caller supplies Now and NewName.
//
// Typical use by the daemon on every wake-up:
//
//	desired, problems := planner.Expand(fleet)          // once per revision
//	res := planner.Plan(planner.Input{Desired: desired, Observed: machines, Now: now, NewName: names})
//
// and, when one machine's event arrives, the cheap path for one cluster:
//
//	sums[name] = planner.Summarize(desired.Cluster(name), machinesOf(name), now)
//	gates := planner.Gates(desired, sums)
//	cp := planner.PlanCluster(planner.ClusterInput{Desired: desired.Cluster(name), Name: name, Machines: machinesOf(name), Gate: gates.For(name), Now: now, NewName: names})
//
// Preview compares two revisions for a pull request. docs/planner.md lists
// the decisions the issue left open.
package planner
