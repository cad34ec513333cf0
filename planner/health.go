package planner

import (
	"fmt"
	"time"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// unhealthy says why a machine must be remediated, or "" when it need not:
// the provider reported it Failed; or a health check that selects it finds
// it not Running nodeStartupTimeoutSeconds after creation, or Running with
// its Ready condition Unknown (no heartbeat) or False (its heartbeats say it
// is not healthy) for the condition's timeoutSeconds. A Failed machine is unhealthy even when no
// health check selects it. It returns the index of the deciding health check
// (-1 for none).
func unhealthy(m *ObservedMachine, dc *DesiredCluster, now time.Time) (string, int) {
	first := -1
	hcs := dc.HealthChecks
	labels := dc.labelsOf(m)
	for i := range hcs {
		hc := &hcs[i]
		if !hc.Selector.Matches(labels) {
			continue
		}
		if first < 0 {
			first = i
		}
		switch m.Phase {
		case wire.PhasePending, wire.PhaseProvisioning:
			if hc.NodeStartupTimeout > 0 && now.Sub(m.Created) > hc.NodeStartupTimeout {
				return fmt.Sprintf("not Running %s after creation (nodeStartupTimeout %s, %s)", round(now.Sub(m.Created)), hc.NodeStartupTimeout, hc.Name), i
			}
		case wire.PhaseRunning:
			last := m.LastHeartbeat
			if last.Before(m.Created) {
				last = m.Created
			}
			if hc.HeartbeatTimeout > 0 && now.Sub(last) > hc.HeartbeatTimeout {
				return fmt.Sprintf("no heartbeat for %s (Ready Unknown, timeoutSeconds %d, %s)", round(now.Sub(last)), int(hc.HeartbeatTimeout/time.Second), hc.Name), i
			}
			if since := m.UnhealthySince; hc.NotReadyTimeout > 0 && !since.IsZero() && now.Sub(since) > hc.NotReadyTimeout {
				return fmt.Sprintf("its heartbeats say it is not healthy for %s (Ready False, timeoutSeconds %d, %s)", round(now.Sub(since)), int(hc.NotReadyTimeout/time.Second), hc.Name), i
			}
		}
	}
	if m.Gone() {
		why := "the provider no longer runs it (" + m.Reason + ")"
		if m.Message != "" {
			why += ": " + m.Message
		}
		return why, first
	}
	if m.Phase == wire.PhaseFailed {
		return "the provider reported it Failed", first
	}
	return "", -1
}

// UnhealthyAt is the first instant after t at which the passing of time
// alone makes a health check of dc that selects m find it unhealthy (as
// unhealthy judges): its nodeStartupTimeout, or the timeoutSeconds of its
// Ready condition Unknown (no heartbeat) or False, runs out. Zero when no
// such instant comes after t: no check selects m, none has a timeout for
// its phase, or every one has run out already. Only a change of m (a
// heartbeat, a phase) moves it: a caller that plans a cluster when one
// of its machines changes, and at this instant, misses no remediation
// (time makes no machine healthy; a Failed or gone one is unhealthy at
// once).
func UnhealthyAt(m *ObservedMachine, dc *DesiredCluster, t time.Time) time.Time {
	var at time.Time
	due := func(start time.Time, timeout time.Duration) {
		if timeout <= 0 || start.IsZero() {
			return
		}
		// unhealthy takes more than the timeout: a nanosecond past it.
		if d := start.Add(timeout + time.Nanosecond); d.After(t) && (at.IsZero() || d.Before(at)) {
			at = d
		}
	}
	labels := dc.labelsOf(m)
	for i := range dc.HealthChecks {
		hc := &dc.HealthChecks[i]
		if !hc.Selector.Matches(labels) {
			continue
		}
		switch m.Phase {
		case wire.PhasePending, wire.PhaseProvisioning:
			due(m.Created, hc.NodeStartupTimeout)
		case wire.PhaseRunning:
			last := m.LastHeartbeat
			if last.Before(m.Created) {
				last = m.Created
			}
			due(last, hc.HeartbeatTimeout)
			due(m.UnhealthySince, hc.NotReadyTimeout)
		}
	}
	return at
}

// Checked reports whether a cluster's machines are under a health check:
// the desired cluster's, or its admission's, which it acts on until its
// wave admits it to the desired ones (rec nil: no record).
func Checked(dc *DesiredCluster, rec *ClusterRecord) bool {
	return dc != nil && len(dc.HealthChecks) > 0 || rec != nil && rec.Admission != nil && len(rec.Admission.HealthChecks) > 0
}

// Acting is the cluster as the planner moves it now: dc with the
// templates, rules and health checks of its admission in rec, which it
// acts on until its wave admits it to dc's (rec nil or without an
// admission: dc itself).
func Acting(dc *DesiredCluster, rec *ClusterRecord) *DesiredCluster {
	if dc == nil || rec == nil || rec.Admission == nil {
		return dc
	}
	return admitted(dc, upgraded(rec.Admission, dc))
}

// labelsOf is what a health check selects a machine by: its pool's labels
// as written now (a label change applies to selection at once, as Cluster
// API updates a machine's metadata in place), or, for a machine of a pool
// no longer written, the labels it was made with.
func (dc *DesiredCluster) labelsOf(m *ObservedMachine) map[string]string {
	if _, p := dc.pool(m.Deployment); p != nil && p.Labels != nil {
		return p.Labels
	}
	return m.Labels
}

func round(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// remediation decides, per health check, whether remediation may go on:
// when more machines than triggerIf.unhealthyLessThanOrEqualTo of those a
// check selects are unhealthy, or their count is outside
// triggerIf.unhealthyInRange, remediation of that check's machines stops
// (Cluster API's short-circuit) and blocked says why.
func remediation(ms []*mstate, dc *DesiredCluster) (blocked []string, stopped map[int]bool) {
	hcs := dc.HealthChecks
	if len(hcs) == 0 {
		return nil, nil
	}
	for i := range hcs {
		hc := &hcs[i]
		total, bad := 0, 0
		for _, s := range ms {
			if !hc.Selector.Matches(dc.labelsOf(s.m)) {
				continue
			}
			total++
			if s.unhealthy != "" {
				bad++
			}
		}
		var why string
		switch limit := hc.MaxUnhealthy.Scaled(total, false, total); {
		case hc.InRange && bad > 0 && (bad < hc.RangeMin || bad > hc.RangeMax):
			why = fmt.Sprintf("%s: %d of %d machines are unhealthy, outside triggerIf.unhealthyInRange [%d-%d]; remediation waits until the count is in range, or the range is changed in %s",
				hc.Name, bad, total, hc.RangeMin, hc.RangeMax, hc.Source)
		case !hc.InRange && bad > limit:
			why = fmt.Sprintf("%s: %d of %d machines are unhealthy, more than triggerIf.unhealthyLessThanOrEqualTo %s (%d); remediation stops until enough recover or the limit is raised in %s",
				hc.Name, bad, total, hc.MaxUnhealthy, limit, hc.Source)
		}
		if why != "" {
			if stopped == nil {
				stopped = map[int]bool{}
			}
			stopped[i] = true
			blocked = append(blocked, why)
		}
	}
	return blocked, stopped
}
