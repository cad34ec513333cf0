// Package planner decides what should happen next to a fleet. It is pure: it
// takes the desired fleet (Expand), the machines the daemon observed, the
// decisions earlier plans recorded and the time, and returns the steps
// allowed right now (create or delete a machine, each with a reason), every
// cluster's phase and conditions, every class's rollout state, and the
// decisions it took (which the caller persists before carrying out any
// step). No I/O, no clock it did not receive, no randomness: the caller
// supplies Now, NewName and the backoff's jitter.
//
// Typical use by the daemon on every wake-up:
//
//	desired, problems := planner.Expand(fleet)          // once per revision
//	res := planner.Plan(planner.Input{Desired: desired, Observed: machines, Records: records, Now: now, NewName: names})
//	// persist res.Records, then publish res.Steps
//
// and, when one machine's event arrives, the cheap path for one cluster:
//
//	sums.Set(name, planner.Summarize(desired.Cluster(name), records.Cluster(name), machinesOf(name), now)) // sums: a *planner.Summaries kept from pass to pass
//	gates = planner.RolloutsSince(gates, desired, sums, records.Rollouts, now) // the last pass's gates
//	cp := planner.PlanCluster(planner.ClusterInput{Desired: desired.Cluster(name), Name: name, Machines: machinesOf(name),
//		Record: records.Cluster(name), Gate: gates.For(name), Now: now, NewName: names})
//
// Preview compares two revisions for a pull request. docs/planner.md
// describes the rollout model and the choices made where Cluster API is silent.
package planner
