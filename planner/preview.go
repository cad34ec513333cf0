package planner

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// PreviewReport is what merging head into base would do: clusters added,
// removed and changed, and head's errors.
type PreviewReport struct {
	Base string `json:"base,omitempty"` // refs, set by the caller
	Head string `json:"head,omitempty"`
	// ComparedWith is what head was compared against: CompareBase, or,
	// when base does not validate (BaseErrors say why), CompareApplied:
	// the revision the daemon runs, the status branch's last applied
	// commit (Applied), which merging puts head in place of; or
	// CompareEmpty when there is none that validates. Against an empty
	// fleet every cluster of head is listed as added, whether or not the
	// change adds it, and what merging changes is not known here.
	ComparedWith string `json:"comparedWith"`
	// Applied is the commit compared against when ComparedWith is
	// CompareApplied.
	Applied string `json:"applied,omitempty"`
	// NotApplied says why head was not compared with the last applied
	// revision when ComparedWith is CompareEmpty: none is recorded, or it
	// could not be read, or it does not validate either.
	NotApplied string          `json:"notApplied,omitempty"`
	BaseErrors []string        `json:"baseErrors,omitempty"`
	Errors     []string        `json:"errors,omitempty"`
	Clusters   []ClusterChange `json:"clusters"`
	// Observed says whether the machines came from the status branch
	// (true) or were assumed to match base exactly (false).
	Observed bool `json:"observed"`
	// Unchanged counts the clusters the merge leaves as they are;
	// Untouched lists those of them whose own objects or class the change
	// edits, with the reason it does not reach them (a pinned version).
	Unchanged int                `json:"unchanged"`
	Untouched []UnchangedCluster `json:"untouched,omitempty"`
	Totals    PreviewTotals      `json:"totals"`
	// Rollouts says what merging does to each class's fleet rollout that
	// has something to say: one head starts, one the status branch shows
	// halted, or one that holds a cluster the change edits.
	Rollouts []RolloutPlan `json:"rollouts,omitempty"`
}

// UnchangedCluster is a cluster whose inputs the change edits although
// nothing it runs changes, and why.
type UnchangedCluster struct {
	Name   string        `json:"name"`
	Reason string        `json:"reason"`
	Diff   []FieldChange `json:"diff"`
	// Paused: spec.paused holds the cluster out of every change, its
	// class's rollout included, which passes it over; Class, Wave and
	// WaveIndex (1-based) are where that rollout would reach it.
	Paused    bool   `json:"paused,omitempty"`
	Class     string `json:"class,omitempty"`
	Wave      string `json:"wave,omitempty"`
	WaveIndex int    `json:"waveIndex,omitempty"`
	Waves     int    `json:"waves,omitempty"`
	// NewRules are the rules a class change gives the cluster although
	// no machine of it changes (health checks, a pool's deletion.order,
	// minReadySeconds, ...): its admission records them, so they reach
	// it in its wave (Wave, WaveIndex of Waves declared; 0: the class
	// declares none, and they reach it at once).
	NewRules []string `json:"newRules,omitempty"`
	// Own: NewRules are the cluster's own (its files changed them, not
	// its class): the daemon admits it again with them at once (Wave
	// empty), unless its class's rollout under way has not admitted it
	// yet: then they reach it in its wave of that rollout.
	Own bool `json:"own,omitempty"`
	// Gate is where the cluster waits, after the merge, in its class's
	// rollout under way, when the change moves it there (its wave, or how
	// many of its wave move at a time) without admitting it: the rollout
	// reaches it elsewhere, or at another pace, than before.
	Gate string `json:"gate,omitempty"`
	// Network says what the cluster's new spec.clusterNetwork reaches
	// (networkNote): no machine that runs.
	Network string `json:"network,omitempty"`
}

// PreviewTotals sums a preview up.
type PreviewTotals struct {
	Added    int `json:"added"`
	Removed  int `json:"removed"`
	Changed  int `json:"changed"`
	Replaced int `json:"machinesReplaced"`
	Created  int `json:"machinesCreated"`
	Deleted  int `json:"machinesDeleted"`
}

// What a preview compared head against (PreviewReport.ComparedWith).
const (
	CompareBase    = "base"
	CompareApplied = "last applied revision"
	CompareEmpty   = "empty fleet"
)

// BaseInvalid reports whether base did not validate, so that head was
// compared against the last applied revision or an empty fleet.
func (r *PreviewReport) BaseInvalid() bool {
	return r.ComparedWith == CompareApplied || r.ComparedWith == CompareEmpty
}

// Kinds of cluster change.
const (
	ChangeAdded   = "added"
	ChangeRemoved = "removed"
	ChangeChanged = "changed"
)

// ClusterChange is one cluster's change.
type ClusterChange struct {
	Name        string       `json:"name"`
	Change      string       `json:"change"`
	Class       string       `json:"class,omitempty"`
	Wave        string       `json:"wave,omitempty"`
	WaveIndex   int          `json:"waveIndex"` // 1-based; 0 for removed clusters
	Waves       int          `json:"waves,omitempty"`
	FromVersion string       `json:"fromVersion,omitempty"`
	ToVersion   string       `json:"toVersion,omitempty"`
	Chain       []string     `json:"chain,omitempty"` // intermediate versions of a chained upgrade
	Paused      bool         `json:"paused,omitempty"`
	Pools       []PoolChange `json:"pools,omitempty"`
	Replaced    int          `json:"machinesReplaced"`
	Created     int          `json:"machinesCreated"`
	Deleted     int          `json:"machinesDeleted"`
	// Machines names the observed machines replaced, or deleted when the
	// cluster is removed (empty when nothing was observed).
	Machines []string `json:"machines,omitempty"`
	// DeletedMachines names the observed machines a changed cluster loses
	// without a replacement: those a smaller pool's scale-down takes (by
	// the order the planner deletes in) and those of a pool it removes.
	DeletedMachines []string `json:"deletedMachines,omitempty"`
	// Refused says why the planner will not touch the cluster at head (a
	// refused version change, a problem in its spec): nothing is replaced,
	// created or deleted until it is fixed.
	Refused string `json:"refused,omitempty"`
	// Warnings are what a reviewer should know before merging, such as an
	// OnDelete pool that holds the rollout.
	Warnings []string `json:"warnings,omitempty"`
	// Held says why the class's running rollout (the status branch's,
	// which the change leaves going on) holds the cluster: its machines
	// keep their templates (new sizes apply), or it gets no step at all.
	// Its counts are then what happens at once.
	Held string `json:"held,omitempty"`
	// Diff is every field that changes in the cluster's own objects and
	// its class.
	Diff []FieldChange `json:"diff,omitempty"`
	// AtOnce: the change reaches the cluster without waiting for a wave:
	// it is new, or the change is in its own files while what its class's
	// machines are made of stays (waves order class changes only). Wave
	// is then the wave class changes reach it in.
	AtOnce bool `json:"atOnce,omitempty"`
	// RunsRevision: the status branch shows the cluster admitted to the
	// class revision head brings back (a revert of a change it never got):
	// the rollout head starts admits it at once, in no wave.
	RunsRevision string `json:"runsRevision,omitempty"`
	// Admitted says why its class's rollout under way, which the change
	// leaves going on, admits the cluster at the merge by the gate the
	// change sets (a wave's maxConcurrent, the wave it falls in), where it
	// waited before: its machines move to that rollout's revision now.
	Admitted string `json:"admitted,omitempty"`
	// Network says what the cluster's new spec.clusterNetwork reaches
	// (networkNote).
	Network string `json:"network,omitempty"`
}

// PoolChange is one pool's change.
type PoolChange struct {
	Name         string `json:"name"`
	FromReplicas int    `json:"fromReplicas"`
	ToReplicas   int    `json:"toReplicas"`
	// Replaced counts replacements: a machine of a chained upgrade is
	// replaced once per minor version it passes through.
	Replaced int  `json:"machinesReplaced"`
	OnDelete bool `json:"onDelete,omitempty"` // replaced only when someone deletes them
	// Held counts the machines whose template the change changes that
	// wait, with the cluster, for the rollout that holds it (Held).
	Held int `json:"machinesHeld,omitempty"`
	// RolloutAfter is the pool's rollout.after when the change sets or
	// moves it and machines made before it are replaced (or held) for
	// it: they go once it has passed, as after a template change.
	RolloutAfter time.Time `json:"rolloutAfter,omitzero"`
	// Strategy is the pool's strategy, resolved against its replicas
	// ("maxSurge 0, maxUnavailable 2"), when the change changes it and
	// machines are replaced: the replacement runs by it.
	Strategy string `json:"strategy,omitempty"`
	// ResizedAtOnce: the rollout head starts leaves the cluster waiting
	// for its wave, and the pool's new size applies at once, from the
	// templates the cluster runs; Replaced counts the machines made now
	// that its wave replaces.
	ResizedAtOnce bool `json:"resizedAtOnce,omitempty"`
}

// HasChanges reports whether merging would change any cluster: add it,
// remove it, or change its machines, versions, sizes or spec.paused (the
// clusters listed as changed).
func (r *PreviewReport) HasChanges() bool { return len(r.Clusters) > 0 }

// Reaches reports whether merging changes anything the daemon does to a
// cluster: a cluster changes (HasChanges, a cluster a rollout under way
// admits at the merge by the change's gate among them), gets new rules
// or a new clusterNetwork with no machine changed, waits elsewhere in a
// rollout under way, or waits on a running rollout that merging halts or
// releases.
// A plan that does not is the one that reads "No changes", and the one
// `gitfleet plan --detailed-exitcode` exits 0 for; Terraform's exits 2
// for any change, as plan's does for one that reaches a cluster.
func (r *PreviewReport) Reaches() bool {
	if r.HasChanges() {
		return true
	}
	for i := range r.Untouched {
		if u := &r.Untouched[i]; len(u.NewRules) > 0 || u.Gate != "" || u.Network != "" {
			return true
		}
	}
	for i := range r.Rollouts {
		if p := &r.Rollouts[i]; p.Releases() || p.halts() {
			return true
		}
	}
	return false
}

// Preview compares base and head. headErrs are head's validation errors;
// observed are the machines running now (from the status branch), or nil to
// assume every cluster of base runs exactly as base says.
func Preview(base, head *v1alpha1.Fleet, headErrs []error, observed []ObservedMachine) *PreviewReport {
	return PreviewOf(PreviewInput{Base: base, Head: head, HeadErrs: headErrs, Observed: observed})
}

// PreviewKeyed is Preview for fleets whose objects have content keys (as
// ExpandReusing takes them; nil: none): a cluster of head whose inputs
// have base's keys keeps base's expansion, so a pull request that changes
// one cluster expands the others once.
func PreviewKeyed(base, head *v1alpha1.Fleet, baseKey, headKey func(kind, name string) string, headErrs []error, observed []ObservedMachine) *PreviewReport {
	return PreviewOf(PreviewInput{Base: base, Head: head, BaseKey: baseKey, HeadKey: headKey, HeadErrs: headErrs, Observed: observed})
}

// PreviewInput is what PreviewOf compares.
type PreviewInput struct {
	// Base and Head are the fleets; a nil one is empty.
	Base, Head *v1alpha1.Fleet
	// BaseKey and HeadKey are their objects' content keys (PreviewKeyed);
	// nil: none.
	BaseKey, HeadKey func(kind, name string) string
	// BaseErrs are base's validation errors when base does not validate:
	// the report says so, and what head was compared against instead.
	// Base is then the revision the daemon runs (the status branch's last
	// applied commit, named by Applied), or nil (an empty fleet).
	BaseErrs []error
	// Applied is the commit Base is when BaseErrs are set; "": Base is not
	// looked at, and head is compared against an empty fleet.
	Applied string
	// NotApplied says why Base is nil when BaseErrs are set, for the
	// report ("the status branch records no applied revision").
	NotApplied string
	// HeadErrs are head's validation errors.
	HeadErrs []error
	// Observed are the machines running now (from the status branch), or
	// nil to assume every cluster of base runs exactly as base says.
	Observed []ObservedMachine
	// Locate places the problems the planner finds in head at their
	// fields' lines and columns (nil: at their documents' first lines).
	Locate Locator
	// Rollouts are the rollouts the status branch shows (nil: not known).
	// A class whose machines head leaves as they are goes on with its
	// rollout, which holds the clusters it has not admitted: their
	// template changes wait, and a halted one holds new clusters and the
	// clusters that failed on it altogether.
	Rollouts *ObservedRollouts
}

// PreviewOf compares in.Base and in.Head.
func PreviewOf(in PreviewInput) *PreviewReport {
	base, head, observed := in.Base, in.Head, in.Observed
	r := &PreviewReport{Observed: observed != nil, ComparedWith: CompareBase}
	if len(in.BaseErrs) > 0 {
		r.ComparedWith = CompareEmpty
		if in.Applied != "" && base != nil {
			r.ComparedWith, r.Applied = CompareApplied, in.Applied
		} else {
			base, r.NotApplied = nil, in.NotApplied
		}
		for _, e := range in.BaseErrs {
			r.BaseErrors = append(r.BaseErrors, e.Error())
		}
	}
	for _, e := range in.HeadErrs {
		r.Errors = append(r.Errors, e.Error())
	}
	bd, _ := ExpandReusing(nil, base, in.BaseKey)
	var hd *Desired
	var probs []Problem
	if in.BaseKey != nil && in.HeadKey != nil {
		hd, probs = ExpandReusing(bd, head, in.HeadKey)
	} else {
		hd, probs = Expand(head)
	}
	for _, p := range probs {
		r.Errors = append(r.Errors, p.Place(in.Locate).Error())
	}
	var by map[string][]ObservedMachine
	if observed != nil {
		by = groupByCluster(observed)
	}
	names := map[string]bool{}
	for _, c := range bd.Clusters {
		names[c.Name] = true
	}
	for _, c := range hd.Clusters {
		names[c.Name] = true
	}
	sorted := sortedKeys(names)
	var runs map[string]*running
	if observed != nil {
		runs = runningRollouts(bd, hd, in.Rollouts)
	}
	var obs *ObservedRollouts
	if observed != nil {
		obs = in.Rollouts
	}
	waits := waitingAtMerge(bd, hd, obs, by)
	gates := gatesAtMerge(bd, hd, obs, runs, by)
	type compared struct {
		cc      *ClusterChange
		errs    []Problem
		network string
	}
	results := make([]compared, len(sorted))
	inParallel(len(sorted), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			n := sorted[i]
			b := bd.Cluster(n)
			ms := by[n]
			if observed == nil {
				ms = assumeConverged(b)
			}
			h := hd.Cluster(n)
			var hold hold
			if h != nil && runs[h.Class] != nil {
				var cr *ClusterRollout
				if c, ok := in.Rollouts.Clusters[n]; ok {
					cr = &c
				}
				hold.kind, hold.why = holdOf(b, h, runs[h.Class], cr, live(ms))
				hold.base = b
			}
			if g := gates[n]; g.admits {
				// The rollout under way admits it at the merge: its
				// machines move to head's templates.
				hold.kind, hold.why, hold.admitted = holdNone, "", g.why
			}
			cc, errs := compareCluster(n, b, h, hd, ms, hold, waits[n] == mergeWaits)
			if cc != nil && cc.Held == "" && cc.Refused == "" && cc.Admitted == "" && (atOnce(b, h, bd, hd) || waits[n] == mergeAtOnce || waits[n] == mergeOnRevision) {
				// A halt the change releases moves the clusters it held
				// in their waves.
				cc.AtOnce = runs[h.Class] == nil || !runs[h.Class].released
				if waits[n] == mergeOnRevision {
					cc.RunsRevision = hd.Class(h.Class).Revision
				}
			}
			results[i].cc, results[i].errs = cc, errs
			if results[i].network = networkNote(b, h, ms); cc != nil {
				cc.Network = results[i].network
			}
		}
	})
	fd := newFleetDiff(base, head)
	for i, n := range sorted {
		cc, errs := results[i].cc, results[i].errs
		for _, p := range errs {
			r.Errors = append(r.Errors, p.Place(in.Locate).Error())
		}
		diff := fd.of(n)
		if cc == nil {
			r.Unchanged++
			if g := gates[n]; len(diff) > 0 || g.why != "" {
				u := UnchangedCluster{Name: n, Reason: unchangedReason(hd.Cluster(n), diff, len(errs) > 0), Diff: diff}
				b, h := bd.Cluster(n), hd.Cluster(n)
				if h != nil && h.Paused && len(errs) == 0 {
					u.Paused, u.Class, u.Wave, u.WaveIndex = true, h.Class, h.WaveName, h.Wave+1
				} else if rules, own := newRules(b, h, bd, hd); len(rules) > 0 && len(errs) == 0 {
					u.NewRules, u.Class, u.Own = rules, h.Class, own
					u.Wave, u.WaveIndex, u.Waves = h.WaveName, h.Wave+1, len(hd.Class(h.Class).Waves)-1
					switch {
					case u.Waves == 0:
						u.Wave, u.WaveIndex = "", 0
					case own && (runs[h.Class] == nil || admittedTo(runs[h.Class], in.Rollouts.Clusters[n])):
						// In no wave, unless its class's rollout under way
						// holds it: then they wait, as its templates would.
						u.Wave, u.WaveIndex, u.Waves = "", 0, 0
					}
					u.Reason = rulesReason(&u)
				}
				if g.why != "" {
					u.Gate, u.Class = g.place, hd.Cluster(n).Class
					if len(u.NewRules) > 0 {
						u.Reason = g.why + "; and " + u.Reason
					} else {
						u.Reason = g.why
					}
				}
				if u.Network = results[i].network; u.Network != "" && len(errs) == 0 {
					switch {
					case u.Paused, len(u.NewRules) > 0, u.Gate != "":
						u.Reason += "; and " + u.Network
					default:
						u.Reason = "no machine of it changes and none is replaced: " + u.Network
					}
				}
				r.Untouched = append(r.Untouched, u)
			}
			continue
		}
		if cc.Change != ChangeChanged {
			diff = slices.DeleteFunc(diff, func(c FieldChange) bool { return !c.Created && !c.Deleted })
		}
		cc.Diff = diff
		r.Clusters = append(r.Clusters, *cc)
		t := &r.Totals
		switch cc.Change {
		case ChangeAdded:
			t.Added++
		case ChangeRemoved:
			t.Removed++
		default:
			t.Changed++
		}
		t.Replaced += cc.Replaced
		t.Created += cc.Created
		t.Deleted += cc.Deleted
	}
	r.Rollouts = rolloutPlans(bd, hd, in.Rollouts, runs, by, fd, r.Clusters, r.Untouched)
	return r
}

// networkNote says what head's new spec.clusterNetwork of a cluster (b
// base's, h head's) does, given its live machines ms ("" when head keeps
// base's, or either lacks the cluster). The daemon puts it in a machine's
// bootstrap data only for the cluster's first control-plane machine, whose
// kubeadm init sets the pod and service ranges and the DNS domain of the
// cluster for good; every other machine joins, and takes the cluster's.
func networkNote(b, h *DesiredCluster, ms []ObservedMachine) string {
	if b == nil || h == nil || networkOf(b.Network) == networkOf(h.Network) {
		return ""
	}
	for i := range ms {
		if ms[i].Deployment == "" && ms[i].Phase != wire.PhaseDeleted {
			return "kubeadm takes spec.clusterNetwork only when a cluster's first control-plane machine initialises it (kubeadm init), and " + h.Name + "'s control plane is made: it keeps the pod and service ranges and the DNS domain it has, and the new ones reach only a control plane made again from none (every control-plane machine gone)"
		}
	}
	return "its first control-plane machine, made from now on, initialises it with the new spec.clusterNetwork (kubeadm init)"
}

// networkOf is a spec.clusterNetwork as the bootstrap data writes it:
// pod ranges, service ranges, DNS domain.
func networkOf(n *v1alpha1.ClusterNetwork) [3]string {
	var out [3]string
	if n == nil {
		return out
	}
	if n.Pods != nil {
		out[0] = strings.Join(n.Pods.CIDRBlocks, ",")
	}
	if n.Services != nil {
		out[1] = strings.Join(n.Services.CIDRBlocks, ",")
	}
	out[2] = n.ServiceDomain
	return out
}

// atOnce says whether head's change of a cluster (b base's, h head's)
// reaches it without a wave: it is new, or its class's revision stays
// (the change is in its own files).
func atOnce(b, h *DesiredCluster, bd, hd *Desired) bool {
	if h == nil {
		return false
	}
	if b == nil {
		return true
	}
	bc, hc := bd.Class(b.Class), hd.Class(h.Class)
	return b.Class == h.Class && bc != nil && hc != nil && bc.Revision == hc.Revision
}

// newRules names the rules head gives a cluster (b base's, h head's):
// health checks, the versions a chained upgrade passes, each pool's
// strategy, rollout.after, deletion.order, minReadySeconds, machineNaming,
// remediation.maxInFlight and its machines' labels and annotations (nil:
// none changes, or the cluster takes no part). A change of its class's
// revision brings them: the cluster's admission records them, so they
// reach it when its wave admits it, machines or not. own: the revision
// stays, so they come from its own files (a MachineHealthCheck naming it,
// its topology's strategy or healthCheck), and the daemon admits it again
// with them at once, as it does a template change of its own.
func newRules(b, h *DesiredCluster, bd, hd *Desired) (rules []string, own bool) {
	if b == nil || h == nil || b.Class != h.Class || h.Paused || len(h.Problems) > 0 {
		return nil, false
	}
	bc, hc := bd.Class(b.Class), hd.Class(h.Class)
	if bc == nil || hc == nil {
		return nil, false
	}
	own = bc.Revision == hc.Revision
	var out []string
	if !slices.EqualFunc(b.HealthChecks, h.HealthChecks, HealthCheck.same) {
		out = append(out, "health checks")
	}
	if !slices.Equal(b.KubernetesVersions, h.KubernetesVersions) {
		out = append(out, "kubernetesVersions")
	}
	for _, p := range h.pools() {
		_, bp := b.pool(p.Name)
		if bp == nil {
			continue
		}
		hr, br := p.rules(), bp.rules()
		var what []string
		for _, f := range []struct {
			name string
			same bool
		}{
			{"strategy", hr.Strategy.equal(br.Strategy)},
			{"rollout.after", hr.RolloutAfter.Equal(br.RolloutAfter)},
			{"deletion.order", hr.DeletionOrder == br.DeletionOrder},
			{"minReadySeconds", hr.MinReady == br.MinReady},
			{"machineNaming", hr.Naming == br.Naming},
			{"remediation.maxInFlight", sameIntOrPercent(hr.MaxInFlight, br.MaxInFlight)},
			{"machine labels", maps.Equal(hr.Labels, br.Labels)},
			{"machine annotations", maps.Equal(hr.Annotations, br.Annotations)},
		} {
			if !f.same {
				what = append(what, f.name)
			}
		}
		if len(what) > 0 {
			out = append(out, PoolName(p.Name)+" "+strings.Join(what, ", "))
		}
	}
	return out, own
}

// admittedTo says whether a cluster whose place in its class's rollout is
// cr is admitted to run's revision, so that a change of its own files
// admits it again at once; one never admitted is too, unless the rollout
// is halted, as Rollouts admits it.
func admittedTo(run *running, cr ClusterRollout) bool {
	if cr.Revision == "" {
		return !run.Halted
	}
	return cr.Revision == run.Revision
}

// rulesReason says that a class change, or one of its own files, gives an
// unchanged cluster new rules, and when they reach it.
func rulesReason(u *UnchangedCluster) string {
	if u.Own && u.WaveIndex > 0 {
		return fmt.Sprintf("no machine of it changes, but its own new rules (%s) reach it in wave %s, when class %s's rollout under way admits it: until then it keeps the rules it was admitted with",
			strings.Join(u.NewRules, "; "), waveName(u.Wave, u.WaveIndex, u.Waves), u.Class)
	}
	if u.Own {
		return fmt.Sprintf("no machine of it changes, but its own new rules (%s) apply at once, in no wave: the change is in its own files, and the daemon admits it again with them",
			strings.Join(u.NewRules, "; "))
	}
	when := "when the rollout admits it, at once (the class declares no waves)"
	if u.WaveIndex > 0 {
		when = "in wave " + waveName(u.Wave, u.WaveIndex, u.Waves) + ", when the rollout admits it"
	}
	return fmt.Sprintf("no machine of it changes, but class %s's new rules (%s) reach it %s: the daemon records them with its admission and acts on them from then, not before",
		u.Class, strings.Join(u.NewRules, "; "), when)
}

// waveName is a wave as plan names it: "2/3 staging", or the implicit
// wave's words.
func waveName(name string, index, waves int) string {
	if index > waves {
		return fmt.Sprintf("last, after wave %d (no wave selects it)", waves)
	}
	return fmt.Sprintf("%d/%d %s", index, waves, name)
}

// hold is how the class's running rollout holds a cluster in a preview
// (holdOf), with base's expansion of it.
type hold struct {
	kind int
	why  string
	base *DesiredCluster
	// admitted: the rollout under way admits the cluster at the merge,
	// by the change's gate (gatesAtMerge), and why.
	admitted string
}

// live counts the machines of ms not Deleted.
func live(ms []ObservedMachine) int {
	n := 0
	for i := range ms {
		if ms[i].Phase != wire.PhaseDeleted {
			n++
		}
	}
	return n
}

// unchangedReason says why an edit of a cluster's inputs changes nothing
// it runs.
func unchangedReason(h *DesiredCluster, diff []FieldChange, refused bool) string {
	if refused {
		return "the change is refused (see the errors); the cluster keeps running base"
	}
	if h != nil && h.Paused {
		return fmt.Sprintf("it is paused (spec.paused is true in %s): no machine is created, replaced or deleted until it is unpaused; its class's rollout passes it over, and it takes the change once unpaused", h.Source)
	}
	classVersion := false
	for _, c := range diff {
		if h != nil && c.Object == "class "+h.Class && c.Path == "spec.version" {
			classVersion = true
		}
	}
	if h != nil && classVersion && h.VersionField == "spec.topology.version" {
		return fmt.Sprintf("it pins spec.topology.version %s, so class %s's new spec.version does not reach it", h.Version, h.Class)
	}
	return "no machine template, version, replica count or rollout.after it uses changes"
}

// assumeConverged invents the machines base describes for cluster dc (nil:
// none), for a preview without observed state.
func assumeConverged(dc *DesiredCluster) []ObservedMachine {
	if dc == nil {
		return nil
	}
	n := dc.ControlPlane.Replicas
	for _, p := range dc.Deployments {
		n += p.Replicas
	}
	ms := make([]ObservedMachine, 0, n)
	for i := -1; i < len(dc.Deployments); i++ {
		p := &dc.ControlPlane
		if i >= 0 {
			p = &dc.Deployments[i]
		}
		// Made, as base says, no earlier than its rollout.after: a
		// later one in head replaces them, an earlier one does not.
		for range p.Replicas {
			ms = append(ms, ObservedMachine{Cluster: dc.Name, Deployment: p.Name, Role: p.Role,
				Version: p.Version, TemplateHash: p.TemplateHash, Phase: wire.PhaseRunning, Created: p.RolloutAfter})
		}
	}
	return ms
}

// waitingAtMerge says, of the clusters of head whose class's revision head
// changes, which the rollout it starts does not admit at the merge (they
// wait for their wave, or for a slot in it) and which it admits done at
// once (none of their machines changes: only their sizes, applied now).
// The gates are the planner's (Rollouts), each cluster of base taken
// as done on base's revision with base's templates and rules (a rollout
// under way as finished). Only a size changed with the class matters: a
// class change alone asks for no gate (a sixth of a 10,000-cluster class
// bump's preview, measured).
//
// A cluster the status branch (obs) shows admitted to head's revision —
// the revert of a class change that halted, which brings back the
// revision that cluster never left — is on that revision at the merge,
// not on base's: the rollout admits it at once, done when its machines
// run head's templates (by, its observed machines), moving at once when
// its own change is in them; only one that failed on it waits for its
// wave.
func waitingAtMerge(bd, hd *Desired, obs *ObservedRollouts, by map[string][]ObservedMachine) map[string]int {
	onHead := func(h *DesiredCluster) bool {
		if obs == nil {
			return false
		}
		c, ok := obs.Clusters[h.Name]
		return ok && hd.Class(h.Class) != nil && c.Revision == hd.Class(h.Class).Revision && c.State != AdmissionFailed
	}
	resized := false
	for _, h := range hd.Clusters {
		b := bd.Cluster(h.Name)
		if b != nil && b.Class == h.Class && bd.Class(b.Class) != nil && hd.Class(h.Class) != nil &&
			bd.Class(b.Class).Revision != hd.Class(h.Class).Revision && (!sameSizes(b, h) || onHead(h)) {
			resized = true
			break
		}
	}
	if !resized {
		return nil
	}
	sums := map[string]Summary{}
	for _, h := range hd.Clusters {
		b, hc := bd.Cluster(h.Name), hd.Class(h.Class)
		if b == nil || hc == nil || bd.Class(b.Class) == nil || bd.Class(b.Class).Revision == hc.Revision {
			sums[h.Name] = Summary{Cluster: h.Name, Class: h.Class, Wave: h.Wave, Fresh: true, Skip: b != nil}
			continue
		}
		rev := bd.Class(b.Class).Revision
		current := newAdmission(b, rev, AdmissionDone, time.Time{}).current(h)
		if onHead(h) {
			rev, current = hc.Revision, runsTemplates(h, by[h.Name])
		}
		sums[h.Name] = Summary{Cluster: h.Name, Class: h.Class, Wave: h.Wave, Paused: h.Paused, Skip: h.Paused || len(h.Problems) > 0,
			Revision: rev, State: AdmissionDone, Current: current}
	}
	g := Rollouts(hd, sums, nil, time.Time{})
	out := map[string]int{}
	for n, sum := range sums {
		switch {
		case g.For(n).Waiting:
			out[n] = mergeWaits
		case !sum.Skip && sum.Revision != "" && hd.Class(sum.Class) != nil && sum.Revision == hd.Class(sum.Class).Revision && !sum.Fresh:
			out[n] = mergeOnRevision // it runs head's revision: admitted at once
		case sum.Current && !sum.Skip:
			out[n] = mergeAtOnce // the class change reaches none of its machines
		}
	}
	return out
}

// How the rollout head starts takes a cluster at the merge
// (waitingAtMerge).
const (
	mergeWaits      = 1 + iota // waits for its wave: its templates wait, its sizes apply
	mergeAtOnce                // admitted at once, done: the class change moves none of its machines
	mergeOnRevision            // admitted at once: it runs head's revision already (a revert brings it back)
)

// runsTemplates says whether every live machine of ms runs the template
// and version of its pool in h: a cluster admitted to head's revision
// then has nothing of its own to move.
func runsTemplates(h *DesiredCluster, ms []ObservedMachine) bool {
	for i := range ms {
		m := &ms[i]
		if m.Phase == wire.PhaseDeleted {
			continue
		}
		_, p := h.pool(m.Deployment)
		if p == nil || m.TemplateHash != p.TemplateHash || m.Version != p.Version {
			return false
		}
	}
	return true
}

func compareCluster(name string, b, h *DesiredCluster, hd *Desired, ms []ObservedMachine, hold hold, waits bool) (*ClusterChange, []Problem) {
	cc := &ClusterChange{Name: name, Change: ChangeChanged}
	// Machines are large: the comparison points at them.
	live := make([]*ObservedMachine, 0, len(ms))
	for i := range ms {
		if ms[i].Phase != wire.PhaseDeleted {
			live = append(live, &ms[i])
		}
	}
	if h == nil {
		cc.Change, cc.Class, cc.Deleted = ChangeRemoved, b.Class, len(live)
		for _, m := range live {
			if m.Name != "" {
				cc.Machines = append(cc.Machines, m.Name)
			}
		}
		if len(live) == 0 {
			return nil, nil
		}
		return cc, nil
	}
	cc.Class, cc.Wave, cc.WaveIndex, cc.ToVersion, cc.Paused = h.Class, h.WaveName, h.Wave+1, h.Version, h.Paused
	cc.Admitted = hold.admitted
	if class := hd.Class(h.Class); class != nil {
		cc.Waves = len(class.Waves) - 1 // declared; the implicit one comes after
		if len(class.Waves) == 1 {
			cc.Wave, cc.WaveIndex, cc.Waves = "", 0, 0 // no waves declared
		}
	}
	if b == nil {
		cc.Change = ChangeAdded
	}
	var errs []Problem
	cpVer := ""
	for _, m := range live {
		if m.Deployment == "" && (cpVer == "" || compareVersions(m.Version, cpVer) < 0) {
			cpVer = m.Version
		}
	}
	if cpVer != "" {
		cc.FromVersion = cpVer
		chain, verr := upgradeChain(cpVer, h.Version, h.KubernetesVersions)
		if verr != nil {
			errs = append(errs, Problem{Source: h.VersionSource, Field: h.VersionField, Message: "cluster " + name + ": " + verr.message})
			cc.Refused = "the version change is refused (see the errors)"
		} else if len(chain) > 1 {
			cc.Chain = chain[:len(chain)-1]
		}
	}
	if len(h.Problems) > 0 {
		cc.Refused = "the cluster has problems (see the errors)"
	}
	if cc.Refused != "" {
		// The planner gives a blocked cluster no step at all: list none.
		if b != nil && cc.FromVersion == cc.ToVersion && b.Paused == h.Paused && samePools(b, h) {
			return nil, errs
		}
		return cc, errs
	}
	if h.Paused {
		// A paused cluster gets no step either: nothing is replaced,
		// created or deleted until it is unpaused. One paused in base too
		// is unchanged (Untouched says why when the change edits it); one
		// the change pauses is listed.
		if b != nil && b.Paused {
			return nil, errs
		}
		return cc, errs
	}
	switch hold.kind {
	case holdUnchanged:
		return nil, errs
	case holdAll:
		// No step at all until the halt is released.
		cc.Held = hold.why
		return cc, errs
	case holdTemplates:
		cc.Held = hold.why
	}
	byPool := map[string][]*ObservedMachine{}
	for _, m := range live {
		byPool[m.Deployment] = append(byPool[m.Deployment], m)
	}
	pools := make([]*Pool, 0, 1+len(h.Deployments))
	pools = append(pools, &h.ControlPlane)
	for i := range h.Deployments {
		pools = append(pools, &h.Deployments[i])
	}
	seen := map[string]bool{}
	for _, p := range pools {
		seen[p.Name] = true
		var bp *Pool
		if b != nil {
			_, bp = b.pool(p.Name)
		}
		// A rollout.after the change sets or moves replaces the machines
		// made before it, as a template change does; one it leaves as it
		// is replaces nothing the change does.
		after := movedRolloutAfter(bp, p)
		// A pool's machines mostly run one version: its replacement count
		// is worked out once.
		lastFrom, lastN := "", 0
		pc := PoolChange{Name: PoolName(p.Name), FromReplicas: len(byPool[p.Name]), ToReplicas: p.Replicas, OnDelete: p.Strategy.Type == v1alpha1.StrategyOnDelete}
		// The machines a smaller pool loses are those its scale-down
		// takes first; the others it must replace are replaced.
		due := func(m *ObservedMachine) bool { return !after.IsZero() && m.Created.Before(after) }
		ms := scaleDownOrder(byPool[p.Name], p, hold, due)
		drop, byAfter := max(0, len(ms)-p.Replicas), false
		for i, m := range ms {
			due := due(m)
			outdated := m.TemplateHash != p.TemplateHash || due
			switch {
			case i < drop:
				if m.Name != "" {
					cc.DeletedMachines = append(cc.DeletedMachines, m.Name)
				}
			case outdated && hold.kind == holdTemplates:
				// Its template waits with the cluster: counted only
				// when the change is what changes it.
				if due || changesTemplate(hold.base, p) {
					pc.Held++
					byAfter = byAfter || due
				}
			case outdated:
				byAfter = byAfter || due
				if m.Version != lastFrom || lastN == 0 {
					lastFrom, lastN = m.Version, replacements(m.Version, p.Version, h.KubernetesVersions)
				}
				pc.Replaced += lastN
				if m.Name != "" {
					cc.Machines = append(cc.Machines, m.Name)
				}
			}
		}
		if byAfter {
			pc.RolloutAfter = after
		}
		if waits && bp != nil && pc.FromReplicas != pc.ToReplicas {
			// Its size is not held: machines made now, from the template
			// it runs, are replaced in its wave. A pool base lacks waits.
			pc.ResizedAtOnce = true
			if n := p.Replicas - pc.FromReplicas; n > 0 && (bp.TemplateHash != p.TemplateHash || bp.Version != p.Version) {
				pc.Replaced += n * replacements(bp.Version, p.Version, h.KubernetesVersions)
			}
		}
		if pc.Replaced+pc.Held > 0 && !pc.OnDelete && bp != nil && !bp.strategy.equal(p.strategy) {
			pc.Strategy = fmt.Sprintf("maxSurge %d, maxUnavailable %d", p.Strategy.MaxSurge, p.Strategy.MaxUnavailable)
		}
		cc.Created += max(0, p.Replicas-pc.FromReplicas)
		cc.Deleted += max(0, pc.FromReplicas-p.Replicas)
		cc.Replaced += pc.Replaced
		if pc.FromReplicas != pc.ToReplicas || pc.Replaced > 0 || pc.Held > 0 {
			cc.Pools = append(cc.Pools, pc)
		}
		if pc.OnDelete && pc.Replaced > 0 {
			cc.Warnings = append(cc.Warnings, onDeleteWarning(pc.Name, cc, hd.Class(h.Class) != nil && len(hd.Class(h.Class).Waves) > 1))
		}
	}
	for _, dep := range sortedKeys(byPool) {
		if !seen[dep] {
			n := len(byPool[dep])
			cc.Pools = append(cc.Pools, PoolChange{Name: dep, FromReplicas: n})
			cc.Deleted += n
			for _, m := range byPool[dep] {
				if m.Name != "" {
					cc.DeletedMachines = append(cc.DeletedMachines, m.Name)
				}
			}
		}
	}
	if b != nil && len(cc.Pools) == 0 && cc.FromVersion == cc.ToVersion && b.Paused == h.Paused && cc.Admitted == "" {
		return nil, errs
	}
	sort.Strings(cc.Machines)
	sort.Strings(cc.DeletedMachines)
	return cc, errs
}

// movedRolloutAfter is head's rollout.after of pool p when it differs from
// base's (bp; nil: the pool is new), else zero: the time before which the
// change makes the pool's machines outdated.
func movedRolloutAfter(bp, p *Pool) time.Time {
	if p.RolloutAfter.IsZero() || bp != nil && bp.RolloutAfter.Equal(p.RolloutAfter) {
		return time.Time{}
	}
	return p.RolloutAfter
}

// scaleDownOrder returns a pool's live machines in the order the planner
// takes them when the pool has more than its replicas (planDeployment,
// planControlPlane): a rolling pool's machines of another template first
// (they all go), an OnDelete pool's unready ones first; then, as
// deleteOrder, unready before ready, another template before the pool's,
// and the pool's deletion.order. The template is the one the cluster moves
// to: base's while a running rollout holds its templates; a machine due
// for the change's rollout.after is of another template.
func scaleDownOrder(ms []*ObservedMachine, p *Pool, hold hold, due func(*ObservedMachine) bool) []*ObservedMachine {
	cur := p.TemplateHash
	if hold.kind == holdTemplates && hold.base != nil {
		if _, bp := hold.base.pool(p.Name); bp != nil {
			cur = bp.TemplateHash
		}
	}
	rolling := p.Name == "" || p.Strategy.Type != v1alpha1.StrategyOnDelete
	out := slices.Clone(ms)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		oa, ob := a.TemplateHash != cur || due(a), b.TemplateHash != cur || due(b)
		if rolling && oa != ob {
			return oa
		}
		// The status branch records no heartbeats: a Running machine not
		// marked unhealthy is ready.
		if ra, rb := a.Phase == wire.PhaseRunning && a.Healthy, b.Phase == wire.PhaseRunning && b.Healthy; ra != rb {
			return !ra
		}
		if oa != ob {
			return oa
		}
		switch p.DeletionOrder {
		case v1alpha1.DeleteNewest:
			return older(b, a)
		case v1alpha1.DeleteRandom:
			if la, lb := lot(a.Name), lot(b.Name); la != lb {
				return la < lb
			}
		}
		return older(a, b)
	})
	return out
}

// changesTemplate says whether head's pool p has another template than
// base's (b; nil: the cluster is new) has.
func changesTemplate(b *DesiredCluster, p *Pool) bool {
	if b == nil {
		return true
	}
	_, bp := b.pool(p.Name)
	return bp == nil || bp.TemplateHash != p.TemplateHash || bp.Version != p.Version
}

// replacements is how many times a machine at version from is replaced to
// reach version to: once per minor version it passes through, and once when
// only its template (or patch version) changes.
func replacements(from, to string, listed []string) int {
	chain, err := upgradeChain(from, to, listed)
	if err != nil || len(chain) == 0 {
		return 1
	}
	return len(chain)
}

// sameSizes says whether base and head give each pool of a cluster the
// same replicas (a pool only one of them has is not a size: a pool base
// lacks waits with the cluster's wave).
func sameSizes(b, h *DesiredCluster) bool {
	for _, p := range h.pools() {
		if _, bp := b.pool(p.Name); bp != nil && bp.Replicas != p.Replicas {
			return false
		}
	}
	return true
}

// samePools says whether base and head want the same replicas of the same
// pools, with the same templates and rollout.after: a refused cluster
// whose pools are unchanged too is not a change.
func samePools(b, h *DesiredCluster) bool {
	if len(b.Deployments) != len(h.Deployments) || b.ControlPlane.Replicas != h.ControlPlane.Replicas ||
		b.ControlPlane.TemplateHash != h.ControlPlane.TemplateHash {
		return false
	}
	for i := range b.Deployments {
		bp, hp := &b.Deployments[i], &h.Deployments[i]
		if bp.Name != hp.Name || bp.Replicas != hp.Replicas || bp.TemplateHash != hp.TemplateHash || !bp.RolloutAfter.Equal(hp.RolloutAfter) {
			return false
		}
	}
	return true
}

// onDeleteWarning tells the reviewer that an OnDelete pool's machines are
// replaced only when someone deletes them, and what waits for them.
func onDeleteWarning(pool string, cc *ClusterChange, waves bool) string {
	held := "the cluster's rollout"
	if len(cc.Chain) > 0 {
		held = "the chained upgrade (the control plane takes its next minor only when every worker caught up)"
	}
	if waves {
		held += " and every later wave"
	}
	return fmt.Sprintf("pool %s is OnDelete: its machines are replaced only when someone deletes them; until then it holds %s", pool, held)
}
