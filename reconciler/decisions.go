package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// The planner's recorded decisions live in the gitfleet-rollouts bucket:
// cluster.<name> holds a cluster's admission to a class revision and its
// pools' create backoff, class.<name> a class's current rollout. They are
// saved before any step that depends on them is published, so a new leader
// continues the same rollout: it admits nobody twice and forgets no
// failure. The stored types are this package's, converted to and from the
// planner's, so a change to the planner's types never changes the stored
// format by accident.

const (
	keyCluster = "cluster."
	keyClass   = "class."
)

type storedCluster struct {
	Cluster   string           `json:"cluster"`
	Admission *storedAdmission `json:"admission,omitempty"`
	Backoff   []storedBackoff  `json:"backoff,omitempty"`
}

type storedAdmission struct {
	Revision   string       `json:"revision"`
	Wave       string       `json:"wave,omitempty"`
	AdmittedAt time.Time    `json:"admittedAt"`
	State      string       `json:"state"`
	Reason     string       `json:"reason,omitempty"`
	FailedAt   time.Time    `json:"failedAt,omitzero"`
	Version    string       `json:"version"`
	Pools      []storedPool `json:"pools"`
	// Rules: the pools' rules, the health checks and the versions are
	// recorded; an admission stored before they were has not (the
	// planner reads it with the desired cluster's: planner.Admission).
	Rules              bool                `json:"rules,omitempty"`
	HealthChecks       []storedHealthCheck `json:"healthChecks,omitempty"`
	KubernetesVersions []string            `json:"kubernetesVersions,omitempty"`
}

type storedPool struct {
	Name          string          `json:"name,omitempty"`
	Version       string          `json:"version"`
	Provider      string          `json:"provider"`
	Spec          json.RawMessage `json:"spec,omitempty"`
	FailureDomain string          `json:"failureDomain,omitempty"`
	Hash          string          `json:"hash"`
	Rules         storedRules     `json:"rules,omitzero"`
}

type storedRules struct {
	Strategy      storedStrategy         `json:"strategy,omitzero"`
	RolloutAfter  time.Time              `json:"rolloutAfter,omitzero"`
	DeletionOrder string                 `json:"deletionOrder,omitempty"`
	MinReady      time.Duration          `json:"minReadyNanos,omitempty"`
	Naming        string                 `json:"naming,omitempty"`
	MaxInFlight   *v1alpha1.IntOrPercent `json:"maxInFlight,omitempty"`
	Labels        map[string]string      `json:"labels,omitempty"`
	Annotations   map[string]string      `json:"annotations,omitempty"`
}

type storedStrategy struct {
	OnDelete       bool                   `json:"onDelete,omitempty"`
	MaxSurge       *v1alpha1.IntOrPercent `json:"maxSurge,omitempty"`
	MaxUnavailable *v1alpha1.IntOrPercent `json:"maxUnavailable,omitempty"`
}

// storedHealthCheck is a resolved health check; durations are in
// nanoseconds, 0 for a check that is off.
type storedHealthCheck struct {
	Name               string                 `json:"name"`
	Source             storedSource           `json:"source,omitzero"`
	Selector           v1alpha1.LabelSelector `json:"selector,omitzero"`
	NodeStartupTimeout time.Duration          `json:"nodeStartupTimeoutNanos,omitempty"`
	HeartbeatTimeout   time.Duration          `json:"heartbeatTimeoutNanos,omitempty"`
	NotReadyTimeout    time.Duration          `json:"notReadyTimeoutNanos,omitempty"`
	MaxUnhealthy       *v1alpha1.IntOrPercent `json:"maxUnhealthy,omitempty"`
	InRange            bool                   `json:"inRange,omitempty"`
	RangeMin           int                    `json:"rangeMin,omitempty"`
	RangeMax           int                    `json:"rangeMax,omitempty"`
	MaxInFlight        *v1alpha1.IntOrPercent `json:"maxInFlight,omitempty"`
}

type storedSource struct {
	Path string `json:"path,omitempty"`
	Line int    `json:"line,omitempty"`
}

type storedBackoff struct {
	Pool        string    `json:"pool"`
	Failures    int       `json:"failures"`
	LastFailure time.Time `json:"lastFailure"`
	NextRetry   time.Time `json:"nextRetry"`
	Reason      string    `json:"reason"`
	Counted     []string  `json:"counted,omitempty"`
}

type storedRollout struct {
	Class    string          `json:"class"`
	Revision string          `json:"revision"`
	Started  time.Time       `json:"started"`
	Change   storedChange    `json:"change,omitzero"`
	Failed   []storedFailure `json:"failed,omitempty"`
}

type storedChange struct {
	Commit  string `json:"commit,omitempty"`
	Author  string `json:"author,omitempty"`
	Subject string `json:"subject,omitempty"`
}

type storedFailure struct {
	Cluster string    `json:"cluster"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

func toStoredCluster(r planner.ClusterRecord) storedCluster {
	s := storedCluster{Cluster: r.Cluster}
	if a := r.Admission; a != nil {
		sa := &storedAdmission{Revision: a.Revision, Wave: a.Wave, AdmittedAt: a.AdmittedAt, State: a.State,
			Reason: a.Reason, FailedAt: a.FailedAt, Version: a.Version, Rules: a.Rules, KubernetesVersions: a.KubernetesVersions}
		for _, p := range a.Pools {
			sa.Pools = append(sa.Pools, storedPool{Name: p.Name, Version: p.Version, Provider: p.Provider, Spec: p.Spec,
				FailureDomain: p.FailureDomain, Hash: p.Hash, Rules: storedRules{Strategy: storedStrategy(p.Rules.Strategy),
					RolloutAfter: p.Rules.RolloutAfter, DeletionOrder: p.Rules.DeletionOrder, MinReady: p.Rules.MinReady,
					Naming: p.Rules.Naming, MaxInFlight: p.Rules.MaxInFlight, Labels: p.Rules.Labels, Annotations: p.Rules.Annotations}})
		}
		for _, h := range a.HealthChecks {
			sa.HealthChecks = append(sa.HealthChecks, storedHealthCheck{Name: h.Name, Source: storedSource(h.Source), Selector: h.Selector,
				NodeStartupTimeout: h.NodeStartupTimeout, HeartbeatTimeout: h.HeartbeatTimeout, NotReadyTimeout: h.NotReadyTimeout,
				MaxUnhealthy: h.MaxUnhealthy, InRange: h.InRange, RangeMin: h.RangeMin, RangeMax: h.RangeMax, MaxInFlight: h.MaxInFlight})
		}
		s.Admission = sa
	}
	for _, b := range r.Backoff {
		s.Backoff = append(s.Backoff, storedBackoff(b))
	}
	return s
}

func (s storedCluster) record() planner.ClusterRecord {
	r := planner.ClusterRecord{Cluster: s.Cluster}
	if sa := s.Admission; sa != nil {
		a := &planner.Admission{Revision: sa.Revision, Wave: sa.Wave, AdmittedAt: sa.AdmittedAt, State: sa.State,
			Reason: sa.Reason, FailedAt: sa.FailedAt, Version: sa.Version, Rules: sa.Rules, KubernetesVersions: sa.KubernetesVersions}
		for _, p := range sa.Pools {
			a.Pools = append(a.Pools, planner.PoolTemplate{Name: p.Name, Version: p.Version, Provider: p.Provider, Spec: p.Spec,
				FailureDomain: p.FailureDomain, Hash: p.Hash, Rules: planner.PoolRules{Strategy: planner.StrategySpec(p.Rules.Strategy),
					RolloutAfter: p.Rules.RolloutAfter, DeletionOrder: p.Rules.DeletionOrder, MinReady: p.Rules.MinReady,
					Naming: p.Rules.Naming, MaxInFlight: p.Rules.MaxInFlight, Labels: p.Rules.Labels, Annotations: p.Rules.Annotations}})
		}
		for _, h := range sa.HealthChecks {
			a.HealthChecks = append(a.HealthChecks, planner.HealthCheck{Name: h.Name, Source: v1alpha1.Source(h.Source), Selector: h.Selector,
				NodeStartupTimeout: h.NodeStartupTimeout, HeartbeatTimeout: h.HeartbeatTimeout, NotReadyTimeout: h.NotReadyTimeout,
				MaxUnhealthy: h.MaxUnhealthy, InRange: h.InRange, RangeMin: h.RangeMin, RangeMax: h.RangeMax, MaxInFlight: h.MaxInFlight})
		}
		r.Admission = a
	}
	for _, b := range s.Backoff {
		r.Backoff = append(r.Backoff, planner.PoolBackoff(b))
	}
	return r
}

func toStoredRollout(r planner.RolloutRecord) storedRollout {
	s := storedRollout{Class: r.Class, Revision: r.Revision, Started: r.Started, Change: storedChange(r.Change)}
	for _, f := range r.Failed {
		s.Failed = append(s.Failed, storedFailure(f))
	}
	return s
}

func (s storedRollout) record() planner.RolloutRecord {
	r := planner.RolloutRecord{Class: s.Class, Revision: s.Revision, Started: s.Started, Change: planner.Change(s.Change)}
	for _, f := range s.Failed {
		r.Failed = append(r.Failed, planner.RolloutFailure(f))
	}
	return r
}

// decodeDecision reads one entry of the rollouts bucket into recs.
func decodeDecision(key string, data []byte, recs *planner.Records) error {
	switch {
	case strings.HasPrefix(key, keyCluster):
		var s storedCluster
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("rollout record %s: %w", key, err)
		}
		if keyCluster+s.Cluster != key {
			return fmt.Errorf("rollout record %s: names cluster %q", key, s.Cluster)
		}
		recs.Clusters[s.Cluster] = s.record()
	case strings.HasPrefix(key, keyClass):
		var s storedRollout
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("rollout record %s: %w", key, err)
		}
		if keyClass+s.Class != key {
			return fmt.Errorf("rollout record %s: names class %q", key, s.Class)
		}
		recs.Rollouts[s.Class] = s.record()
	default:
		return fmt.Errorf("rollout record %s: unknown key", key)
	}
	return nil
}

// emptyRecord: nothing left to remember of the cluster.
func emptyRecord(r planner.ClusterRecord) bool { return r.Admission == nil && len(r.Backoff) == 0 }

// decisions are the planner's records as this leader knows them, with the
// revision each is stored at (for compare-and-set).
type decisions struct {
	store   *Store
	records planner.Records
	revs    map[string]uint64 // by key
}

// loadDecisions reads every recorded decision from the rollouts bucket.
func (r *Reconciler) loadDecisions(ctx context.Context) error {
	d := &r.decisions
	d.records = planner.Records{Clusters: map[string]planner.ClusterRecord{}, Rollouts: map[string]planner.RolloutRecord{}}
	d.revs = map[string]uint64{}
	err := d.store.Load(ctx, func(key string, value []byte, rev uint64) {
		if strings.HasPrefix(key, keyScale) {
			if err := r.decodeScale(key, value); err != nil {
				r.log.Error().Err(err).Msg("skipping unreadable scale record")
				return
			}
			d.revs[key] = rev
			return
		}
		if err := decodeDecision(key, value, &d.records); err != nil {
			r.log.Error().Err(err).Msg("skipping unreadable rollout record")
			return
		}
		d.revs[key] = rev
	})
	if err != nil {
		return fmt.Errorf("reconciler: rollout records: %w", err)
	}
	r.log.Info().Int("clusters", len(d.records.Clusters)).Int("classes", len(d.records.Rollouts)).Msg("rollout records loaded")
	return nil
}

// saveClusterRecord persists a cluster's record (deleting an empty one),
// then keeps it in memory. On failure nothing changed and the cluster is
// planned again.
func (r *Reconciler) saveClusterRecord(ctx context.Context, rec planner.ClusterRecord) bool {
	d := &r.decisions
	key := keyCluster + rec.Cluster
	var rev uint64
	var err error
	if emptyRecord(rec) {
		err = d.store.Delete(ctx, key, d.revs[key])
	} else {
		rev, err = d.store.Save(ctx, key, toStoredCluster(rec), d.revs[key])
	}
	if err != nil {
		r.decisionFailed(ctx, key, err)
		r.dirty[rec.Cluster] = true
		return false
	}
	r.health.Report(ProblemRollouts, nil)
	if emptyRecord(rec) {
		delete(d.records.Clusters, rec.Cluster)
		delete(d.revs, key)
	} else {
		d.records.Clusters[rec.Cluster] = rec
		d.revs[key] = rev
	}
	return true
}

// saveRollouts persists changed class rollouts, then keeps them in memory.
func (r *Reconciler) saveRollouts(ctx context.Context, recs []planner.RolloutRecord) bool {
	d := &r.decisions
	for _, rec := range recs {
		key := keyClass + rec.Class
		rev, err := d.store.Save(ctx, key, toStoredRollout(rec), d.revs[key])
		if err != nil {
			r.decisionFailed(ctx, key, err)
			return false
		}
		d.records.Rollouts[rec.Class] = rec
		d.revs[key] = rev
	}
	r.health.Report(ProblemRollouts, nil)
	return true
}

// decisionFailed reports a failed save; after a conflict (the record
// changed underneath) the stored version is read again and wins.
func (r *Reconciler) decisionFailed(ctx context.Context, key string, err error) {
	r.log.Error().Err(err).Str("key", key).Msg("cannot record a rollout decision; nothing changed, it will be tried again")
	switch {
	case errors.Is(err, ErrNotLeader):
		return
	case errors.Is(err, ErrConflict):
		r.reloadDecision(ctx, key)
	}
	r.health.ReportFor(ProblemRollouts, decisionCluster(key), err)
}

// decisionCluster is the cluster whose record or scale request key is,
// "" for a class's rollout: the cluster names no NATS subject token holds
// a '.', so it ends at the first.
func decisionCluster(key string) string {
	switch {
	case strings.HasPrefix(key, keyCluster):
		return strings.TrimPrefix(key, keyCluster)
	case strings.HasPrefix(key, keyScale):
		c, _, _ := strings.Cut(strings.TrimPrefix(key, keyScale), ".")
		return c
	}
	return ""
}

func (r *Reconciler) reloadDecision(ctx context.Context, key string) {
	d := &r.decisions
	data, rev, err := d.store.Get(ctx, key)
	if err != nil {
		return
	}
	if strings.HasPrefix(key, keyScale) {
		if data != nil && r.decodeScale(key, data) == nil {
			d.revs[key] = rev
		}
		return
	}
	name := strings.TrimPrefix(strings.TrimPrefix(key, keyCluster), keyClass)
	if data == nil {
		delete(d.revs, key)
		if strings.HasPrefix(key, keyCluster) {
			delete(d.records.Clusters, name)
		} else {
			delete(d.records.Rollouts, name)
		}
		return
	}
	if err := decodeDecision(key, data, &d.records); err == nil {
		d.revs[key] = rev
	}
}

// forgetClasses removes the rollouts of classes no longer in the fleet.
func (r *Reconciler) forgetClasses(ctx context.Context) {
	d := &r.decisions
	for class := range d.records.Rollouts {
		if r.desired.Class(class) != nil {
			continue
		}
		key := keyClass + class
		if err := d.store.Delete(ctx, key, d.revs[key]); err != nil {
			r.decisionFailed(ctx, key, err)
			continue
		}
		delete(d.records.Rollouts, class)
		delete(d.revs, key)
	}
}

// forgetScales removes the scale requests of clusters the applied revision
// no longer has, and of pools it no longer autoscales (Git sizes them, or
// they are gone): a cluster made again under the same name starts at its
// own minimum, not at a request made for the one before. It reports
// whether every stale request was removed.
func (r *Reconciler) forgetScales(ctx context.Context) bool {
	d := &r.decisions
	done := true
	for cluster, pools := range r.scale {
		dc := r.desired.Cluster(cluster)
		for pool := range pools {
			if dc != nil && slices.ContainsFunc(dc.Deployments, func(p planner.Pool) bool { return p.Name == pool && p.Autoscale != nil }) {
				continue
			}
			key := keyScale + cluster + "." + pool
			if err := d.store.Delete(ctx, key, d.revs[key]); err != nil {
				r.decisionFailed(ctx, key, err)
				done = false
				continue
			}
			delete(pools, pool)
			delete(d.revs, key)
			r.log.Info().Str(logCluster, cluster).Str("deployment", pool).Msg("scale request forgotten: the applied revision no longer autoscales this pool")
		}
		if len(pools) == 0 {
			delete(r.scale, cluster)
		}
	}
	return done
}

// jitter draws the random part of a pool's backoff.
func jitter(string, string, int) float64 { return mrand.Float64() }
