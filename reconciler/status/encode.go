package status

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// normalized returns a copy of c with every list sorted and times in UTC
// seconds, so the same observation always encodes to the same bytes.
func (c ClusterStatus) normalized() ClusterStatus {
	c.Deployments = slices.Clone(c.Deployments)
	slices.SortStableFunc(c.Deployments, func(a, b DeploymentStatus) int { return strings.Compare(a.Name, b.Name) })
	c.Conditions = normalConditions(c.Conditions)
	c.Machines = slices.Clone(c.Machines)
	for i := range c.Machines {
		m := &c.Machines[i]
		m.Conditions = normalConditions(m.Conditions)
		m.Addresses = slices.Clone(m.Addresses)
		slices.Sort(m.Addresses)
		if !m.Created.IsZero() {
			m.Created = m.Created.UTC().Truncate(time.Second)
		}
	}
	slices.SortStableFunc(c.Machines, func(a, b MachineStatus) int { return strings.Compare(a.Name, b.Name) })
	if c.Rollout != nil {
		r := *c.Rollout
		r.AdmittedAt = seconds(r.AdmittedAt)
		c.Rollout = &r
	}
	c.ControlPlane.Backoff = c.ControlPlane.Backoff.normalized()
	for i := range c.Deployments {
		c.Deployments[i].Backoff = c.Deployments[i].Backoff.normalized()
	}
	return c
}

func (b *Backoff) normalized() *Backoff {
	if b == nil {
		return nil
	}
	n := *b
	n.NextRetry = seconds(n.NextRetry)
	return &n
}

// sortedSet is a sorted copy of names without repeats; nil when empty.
func sortedSet(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	names = slices.Clone(names)
	slices.Sort(names)
	return slices.Compact(names)
}

// seconds is t in UTC, to the second (zero stays zero).
func seconds(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Second)
}

// normalConditions sorts conditions (a cluster's, or fleet.yaml's) by type
// and keeps their times to the second, in UTC.
func normalConditions[C any, P interface {
	*C
	condition() *Condition
}](cs []C) []C {
	if len(cs) == 0 {
		return nil
	}
	cs = slices.Clone(cs)
	for i := range cs {
		if c := P(&cs[i]).condition(); !c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = c.LastTransitionTime.UTC().Truncate(time.Second)
		}
	}
	slices.SortStableFunc(cs, func(a, b C) int { return strings.Compare(P(&a).condition().Type, P(&b).condition().Type) })
	return cs
}

func (f FleetStatus) normalized() FleetStatus {
	f.Conditions = normalConditions(f.Conditions)
	for i := range f.Conditions {
		c := &f.Conditions[i]
		c.Clusters, c.Providers = sortedSet(c.Clusters), sortedSet(c.Providers)
	}
	if len(f.Orphans) == 0 {
		f.Orphans = nil
	} else {
		f.Orphans = slices.Clone(f.Orphans)
		for i := range f.Orphans {
			f.Orphans[i].Since = f.Orphans[i].Since.UTC().Truncate(time.Second)
		}
		slices.SortFunc(f.Orphans, func(a, b Orphan) int {
			return strings.Compare(a.Cluster+"/"+a.Machine+"/"+a.Worker, b.Cluster+"/"+b.Machine+"/"+b.Worker)
		})
	}
	if len(f.Rollouts) > 0 {
		f.Rollouts = slices.Clone(f.Rollouts)
		for i := range f.Rollouts {
			f.Rollouts[i].Started = f.Rollouts[i].Started.UTC().Truncate(time.Second)
		}
		slices.SortFunc(f.Rollouts, func(a, b ClassRollout) int { return strings.Compare(a.Class, b.Class) })
	}
	if f.LastRejected != nil {
		r := *f.LastRejected
		r.Errors = slices.Clone(r.Errors)
		slices.Sort(r.Errors)
		f.LastRejected = &r
	}
	return f
}

// encodeYAML writes v as YAML with two-space indents. yaml.v3 sorts map keys.
func encodeYAML(v any) ([]byte, error) {
	if out, err := fastYAML(v); err == nil {
		return out, nil
	}
	return slowYAML(v)
}

// slowYAML is yaml.v3 itself.
func slowYAML(v any) ([]byte, error) {
	var b bytes.Buffer
	e := yaml.NewEncoder(&b)
	e.SetIndent(2)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	if err := e.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// EncodeCluster returns the bytes of clusters/<name>.yaml for c.
func EncodeCluster(c ClusterStatus) ([]byte, error) {
	if err := checkName(c.Name); err != nil {
		return nil, err
	}
	return encodeYAML(c.normalized())
}

// EncodeFleet returns the bytes of fleet.yaml for f.
func EncodeFleet(f FleetStatus) ([]byte, error) { return encodeYAML(f.normalized()) }

// DecodeCluster reads clusters/<name>.yaml.
func DecodeCluster(data []byte) (ClusterStatus, error) {
	var c ClusterStatus
	err := yaml.Unmarshal(data, &c)
	return c, err
}

// DecodeFleet reads fleet.yaml.
func DecodeFleet(data []byte) (FleetStatus, error) {
	var f FleetStatus
	err := yaml.Unmarshal(data, &f)
	return f, err
}

// checkName refuses cluster names that would not make one file name.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return fmt.Errorf("cluster name %q cannot be a file name on the status branch", name)
	}
	return nil
}

// machinePhaseOrder is the order phases are listed in summaries.
var machinePhaseOrder = []string{"Running", "Provisioning", "Pending", "Deleting", "Failed", "Deleted"}

// phaseCounts lists "2 Running, 1 Provisioning" in machinePhaseOrder, then
// any other phase alphabetically.
func phaseCounts(ms []MachineStatus) string {
	n := map[string]int{}
	for _, m := range ms {
		n[m.Phase]++
	}
	var parts []string
	for _, p := range machinePhaseOrder {
		if n[p] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[p], p))
			delete(n, p)
		}
	}
	rest := make([]string, 0, len(n))
	for p := range n {
		rest = append(rest, p)
	}
	slices.Sort(rest)
	for _, p := range rest {
		parts = append(parts, fmt.Sprintf("%d %s", n[p], p))
	}
	return strings.Join(parts, ", ")
}

// summary is the cluster's line in a status commit message:
// "dev-1: Provisioning, 3 machines: 2 Running, 1 Provisioning".
func (c ClusterStatus) summary() string {
	s := c.Name + ": " + c.Phase
	if len(c.Machines) == 0 {
		return s + ", no machines"
	}
	word := "machines"
	if len(c.Machines) == 1 {
		word = "machine"
	}
	s = fmt.Sprintf("%s, %d %s: %s", s, len(c.Machines), word, phaseCounts(c.Machines))
	if n := unhealthyCount(c.Machines); n > 0 {
		s += fmt.Sprintf(" (%d unhealthy)", n)
	}
	return s
}

func unhealthyCount(ms []MachineStatus) int {
	n := 0
	for _, m := range ms {
		if m.Unhealthy {
			n++
		}
	}
	return n
}

func (f FleetStatus) summary() string {
	var parts []string
	if f.LastApplied != nil {
		parts = append(parts, "applied "+short(f.LastApplied.Commit))
	}
	if f.LastRejected != nil {
		n := len(f.LastRejected.Errors)
		noun := "errors"
		if n == 1 {
			noun = "error"
		}
		parts = append(parts, fmt.Sprintf("rejected %s (%d %s)", short(f.LastRejected.Commit), n, noun))
	}
	for _, c := range f.Conditions {
		if c.Status == ConditionFalse {
			parts = append(parts, fmt.Sprintf("%s False (%s)", c.Type, c.Reason))
		}
	}
	if n := len(f.Orphans); n > 0 {
		parts = append(parts, fmt.Sprintf("%d orphan machines", n))
	}
	if len(parts) == 0 {
		return ""
	}
	return "fleet: " + strings.Join(parts, ", ")
}

// short abbreviates a commit hash the way git log --oneline does.
func short(h string) string {
	if len(h) > 7 {
		return h[:7]
	}
	return h
}
