package schemas

import (
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gitfleet/gitfleet/schemas/patch"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// semanticChecks are the per-object rules CUE expresses poorly: odd
// control-plane counts, overlapping ranges, strategies that can never make
// progress, and providers without a schema.
func semanticChecks(path string, d *doc, value any) []Error {
	var errs []Error
	add := func(field, format string, args ...any) {
		errs = append(errs, d.errorAt(path, field, fmt.Sprintf(format, args...)))
	}
	switch o := value.(type) {
	case *v1alpha1.ClusterClass:
		checkTemplate(add, "spec.controlPlane.machineTemplate", o.Spec.ControlPlane.MachineTemplate)
		checkMachineMetadata(add, "spec.controlPlane.metadata", o.Spec.ControlPlane.Metadata)
		if h := o.Spec.ControlPlane.HealthCheck; h != nil {
			checkHealthRules(add, "spec.controlPlane.healthCheck", *h)
			if !patchesProvider(o, patch.Target{ControlPlane: true}) { // else each cluster's (checkClassBeat)
				checkSilent(add, "spec.controlPlane.healthCheck", "the control plane", templateBeat(o.Spec.ControlPlane.MachineTemplate), h)
			}
			if !patchesBeat(o, patch.Target{ControlPlane: true}) { // else each cluster's (checkClassBeat)
				checkBeatTimeout(add, "spec.controlPlane.healthCheck", "the control plane", beat{every: heartbeatEvery(o.Spec.ControlPlane.MachineTemplate)}, h)
			}
		}
		for i, md := range o.Spec.Workers.MachineDeployments {
			p := fmt.Sprintf("spec.workers.machineDeployments[%d]", i)
			checkTemplate(add, p+".template", md.Template)
			checkMachineMetadata(add, p+".metadata", md.Metadata)
			checkNaming(add, p, md.MachineNaming, "cluster", md.Class)
			checkStrategy(add, p+".rollout.strategy", v1alpha1.StrategyOf(md.Rollout))
			if h := md.HealthCheck; h != nil {
				checkHealthRules(add, p+".healthCheck", *h)
				if !patchesProvider(o, classTarget(md.Class)) { // else each cluster's (checkClassBeat)
					checkSilent(add, p+".healthCheck", "worker class "+md.Class, templateBeat(md.Template), h)
				}
				if !patchesBeat(o, classTarget(md.Class)) { // else each cluster's (checkClassBeat)
					checkBeatTimeout(add, p+".healthCheck", "worker class "+md.Class, beat{every: heartbeatEvery(md.Template)}, h)
				}
			}
		}
		checkRollout(add, o.Spec.Rollout)
		checkVersions(add, o.Spec.Version, o.Spec.KubernetesVersions)
	case *v1alpha1.Cluster:
		if r := o.Spec.Topology.ControlPlane.Replicas; r != nil && *r%2 == 0 {
			add("spec.topology.controlPlane.replicas", "%d control-plane machines cannot keep etcd quorum through a failure: use an odd count (1, 3 or 5)", *r)
		}
		checkNetwork(add, o.Spec.ClusterNetwork)
		checkMachineNames(add, "metadata.name", o.Metadata.Name, controlPlanePool)
		checkMachineMetadata(add, "spec.topology.controlPlane.metadata", o.Spec.Topology.ControlPlane.Metadata)
		if h := o.Spec.Topology.ControlPlane.HealthCheck; h != nil {
			checkHealthRules(add, "spec.topology.controlPlane.healthCheck", h.HealthRules)
		}
		for i, md := range o.Spec.Topology.Workers.MachineDeployments {
			if h := md.HealthCheck; h != nil {
				checkHealthRules(add, fmt.Sprintf("spec.topology.workers.machineDeployments[%d].healthCheck", i), h.HealthRules)
			}
			checkMachineMetadata(add, fmt.Sprintf("spec.topology.workers.machineDeployments[%d].metadata", i), md.Metadata)
			p := fmt.Sprintf("spec.topology.workers.machineDeployments[%d]", i)
			checkAutoscale(add, p+".metadata.annotations", p+".replicas", md.Replicas, md.Metadata.Annotations)
			checkNaming(add, p, md.MachineNaming, o.Metadata.Name, md.Name)
			checkStrategy(add, fmt.Sprintf("spec.topology.workers.machineDeployments[%d].rollout.strategy", i), v1alpha1.StrategyOf(md.Rollout))
			checkMachineNames(add, fmt.Sprintf("spec.topology.workers.machineDeployments[%d].name", i), o.Metadata.Name, md.Name)
		}
	case *v1alpha1.MachineDeployment:
		checkTemplate(add, "spec.template", o.Spec.Template)
		checkStrategy(add, "spec.rollout.strategy", v1alpha1.StrategyOf(o.Spec.Rollout))
		checkAutoscale(add, "metadata.annotations", "spec.replicas", o.Spec.Replicas, o.Metadata.Annotations)
		checkNaming(add, "spec", o.Spec.MachineNaming, o.Spec.ClusterName, o.Metadata.Name)
		if r := o.Spec.Remediation; r != nil {
			checkMaxInFlight(add, "spec.remediation.maxInFlight", r.MaxInFlight)
		}
		if strings.Contains(o.Metadata.Name, ".") {
			add("metadata.name", "%q has a dot: a MachineDeployment's name goes into machine names, NATS subjects and file names; use lowercase letters, digits and '-'", o.Metadata.Name)
		} else {
			checkMachineNames(add, "metadata.name", o.Spec.ClusterName, o.Metadata.Name)
		}
	case *v1alpha1.MachineHealthCheck:
		checkHealthRules(add, "spec", o.Spec.HealthRules)
	}
	return errs
}

// Machine names are <cluster>-<pool>-<5 random characters>, at most 63
// characters (a DNS label: they become host names, NATS subject tokens and
// folder names); the control plane's pool is "control-plane".
const (
	maxMachineName    = 63
	controlPlanePool  = "control-plane"
	machineNameSuffix = 1 + 5 // "-" and the random part
)

// checkMachineNames refuses a cluster or pool name whose machines' names
// would not fit, and says the budget.
func checkMachineNames(add addFunc, field, cluster, pool string) {
	if cluster == "" || pool == "" {
		return
	}
	budget := maxMachineName - machineNameSuffix - 1 // the "-" between cluster and pool
	if n := len(cluster) + len(pool); n > budget {
		if pool == controlPlanePool {
			add(field, "cluster name %q is %d characters: at most %d, since its control-plane machines are named <cluster>-control-plane-<5 characters> and a machine name is at most %d",
				cluster, len(cluster), budget-len(controlPlanePool), maxMachineName)
			return
		}
		add(field, "cluster %q and pool %q are %d characters together: at most %d, since machine names are <cluster>-<pool>-<5 characters> and at most %d; shorten the pool's name",
			cluster, pool, n, budget, maxMachineName)
	}
}

// checkPercent refuses a percentage above 100%: a share of more than every
// machine (or cluster) means nothing. least is the smallest percentage the
// field takes, for the fix (0, or 1 where 0% would never do anything).
func checkPercent(add addFunc, field string, v *v1alpha1.IntOrPercent, least int) {
	if v != nil && v.Percent && v.Value > 100 {
		add(field, "%s is more than 100%%: use a percentage from %d%% to 100%%, or a count", v, least)
	}
}

// checkVersions: the versions an upgrade may pass through are listed in
// ascending order, skip no minor version, and include the class's own.
func checkVersions(add addFunc, classVersion string, listed []string) {
	if len(listed) == 0 {
		return
	}
	var prev v1alpha1.Version
	havePrev, found := false, false
	for i, s := range listed {
		v, ok := v1alpha1.ParseVersion(s)
		if !ok {
			continue // CUE reported it
		}
		found = found || s == classVersion
		field := fmt.Sprintf("spec.kubernetesVersions[%d]", i)
		switch {
		case !havePrev:
		case v.Compare(prev) < 0:
			add(field, "%s comes after %s: list the versions in ascending order", s, prev)
		case v.Major != prev.Major || v.Minor > prev.Minor+1:
			add(field, "%s skips a minor version after %s: an upgrade passes every minor version, so list one of each in between (e.g. v%d.%d.0)", s, prev, prev.Major, prev.Minor+1)
		}
		if !havePrev || v.Compare(prev) > 0 {
			prev, havePrev = v, true
		}
	}
	if _, ok := v1alpha1.ParseVersion(classVersion); ok && !found {
		add("spec.kubernetesVersions", "does not list the class's version %s: add it, so upgrades can pass through it", classVersion)
	}
}

type addFunc func(field, format string, args ...any)

func checkTemplate(add addFunc, field string, t v1alpha1.MachineTemplate) {
	if prov, ok := allowedShapes().providers[t.Provider]; ok {
		if value, why, short := heartbeatTooShort(prov, t.Spec); short {
			add(field+".spec.heartbeatInterval", "%q %s", value, why)
		}
	}
	known := knownProviders()
	for _, p := range known {
		if p == t.Provider {
			return
		}
	}
	msg := fmt.Sprintf("unknown provider %q; known providers: %s", t.Provider, strings.Join(known, ", "))
	if s := suggest(t.Provider, known); s != "" {
		msg = fmt.Sprintf("unknown provider %q; did you mean %q? (known providers: %s)", t.Provider, s, strings.Join(known, ", "))
	}
	add(field+".provider", "%s", msg)
}

// heartbeatTooShort says why a template's heartbeatInterval, value, is
// refused: shorter than wire.MinHeartbeatInterval (the schema cannot
// compare durations). A value that is no duration at all, or a field the
// provider lacks, is the schema's to report.
func heartbeatTooShort(prov *shape, spec map[string]any) (value, why string, short bool) {
	if _, has := prov.fields["heartbeatInterval"]; !has {
		return "", "", false
	}
	value, _ = spec["heartbeatInterval"].(string)
	d, err := time.ParseDuration(value)
	if err != nil || d >= wire.MinHeartbeatInterval {
		return "", "", false
	}
	return value, fmt.Sprintf("is shorter than %v: every machine sends the leader a heartbeat each interval; use %v or more (2s when unset)", wire.MinHeartbeatInterval, wire.MinHeartbeatInterval), true
}

func checkStrategy(add addFunc, field string, s *v1alpha1.MachineDeploymentStrategy) {
	if s == nil || s.Type == v1alpha1.StrategyOnDelete || s.RollingUpdate == nil {
		return
	}
	ru := s.RollingUpdate
	checkPercent(add, field+".rollingUpdate.maxSurge", ru.MaxSurge, 0)
	checkPercent(add, field+".rollingUpdate.maxUnavailable", ru.MaxUnavailable, 0)
	if ru.MaxSurge.Scaled(100, true, 1) == 0 && ru.MaxUnavailable.Scaled(100, false, 0) == 0 {
		add(field+".rollingUpdate", "maxSurge and maxUnavailable are both 0, so no machine can ever be replaced: set maxSurge: 1 (or maxUnavailable: 1)")
	}
}

// checkRollout: wave names are unique and every wave can make progress.
func checkRollout(add addFunc, r *v1alpha1.RolloutSpec) {
	if r == nil {
		return
	}
	names := map[string]bool{}
	for i, w := range r.Waves {
		p := fmt.Sprintf("spec.rollout.waves[%d]", i)
		if names[w.Name] {
			add(p+".name", "duplicate wave %q: rename one", w.Name)
		}
		names[w.Name] = true
		checkPercent(add, p+".maxConcurrent", w.MaxConcurrent, 1)
		if w.MaxConcurrent != nil && w.MaxConcurrent.Value == 0 {
			add(p+".maxConcurrent", "%s would never start a cluster of this wave: use at least 1 (or \"10%%\")", w.MaxConcurrent)
		}
	}
}

// checkNetwork reports pod and service ranges that overlap each other.
func checkNetwork(add addFunc, n *v1alpha1.ClusterNetwork) {
	if n == nil {
		return
	}
	type block struct {
		field  string
		prefix netip.Prefix
	}
	var blocks []block
	for _, r := range []struct {
		name   string
		ranges *v1alpha1.NetworkRanges
	}{{"pods", n.Pods}, {"services", n.Services}} {
		if r.ranges == nil {
			continue
		}
		for i, c := range r.ranges.CIDRBlocks {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				continue // CUE reported it
			}
			blocks = append(blocks, block{fmt.Sprintf("spec.clusterNetwork.%s.cidrBlocks[%d]", r.name, i), p.Masked()})
		}
	}
	for i, a := range blocks {
		for _, b := range blocks[:i] {
			if a.prefix.Overlaps(b.prefix) {
				add(a.field, "%s overlaps %s (%s): pod and service ranges must not overlap; choose another range", a.prefix, b.prefix, b.field)
			}
		}
	}
}

// checkHealthRules: the conditions are ones gitfleet's machines report, and
// the remediation bounds parse. field is where the rules are written
// ("spec" in a MachineHealthCheck, "...healthCheck" in a topology or class).
func checkHealthRules(add addFunc, field string, h v1alpha1.HealthRules) {
	seen := map[string]bool{}
	for i, c := range h.Checks.UnhealthyNodeConditions {
		p := fmt.Sprintf("%s.checks.unhealthyNodeConditions[%d]", field, i)
		if c.Type != v1alpha1.ConditionReady {
			add(p+".type", "%q is not a condition gitfleet's machines report: use Ready (status Unknown: heartbeats stopped; False: the machine says it is not healthy)", c.Type)
			continue
		}
		if seen[c.Status] {
			add(p+".status", "Ready %s is listed twice: keep one", c.Status)
		}
		seen[c.Status] = true
	}
	checkMaxInFlight(add, field+".remediation.maxInFlight", h.Remediation.MaxInFlight)
	if t := h.Remediation.TriggerIf; t != nil {
		checkPercent(add, field+".remediation.triggerIf.unhealthyLessThanOrEqualTo", t.UnhealthyLessThanOrEqualTo, 0)
		if _, _, ok := t.Range(); t.UnhealthyInRange != "" && !ok {
			add(field+".remediation.triggerIf.unhealthyInRange", "%q is not a range like \"[3-5]\": write [min-max] with min <= max", t.UnhealthyInRange)
		}
	}
}

// checkSilent: health rules with the condition Ready Unknown (no heartbeat)
// must not check machines of a provider that sends no heartbeats; they
// would be found unhealthy once the timeout passed, and replaced over and
// over. b.provider is the provider that makes them, after the class's
// patches: the error names the patch that wrote it, if one did.
func checkSilent(add addFunc, field, what string, b beat, h *v1alpha1.HealthRules) {
	if !silentProviders()[b.provider] {
		return
	}
	origin, fix := providerOrigin(b)
	for i, u := range h.Checks.UnhealthyNodeConditions {
		if u.Type == v1alpha1.ConditionReady && u.Status == v1alpha1.ConditionUnknown {
			add(fmt.Sprintf("%s.checks.unhealthyNodeConditions[%d]", field, i),
				"checks %s, whose machines provider %s makes%s, which sends no heartbeats: their Ready condition would turn Unknown after %ds and they would be replaced over and over; remove the Ready Unknown condition, or %s",
				what, b.provider, origin, u.TimeoutSeconds, fix)
			return
		}
	}
}

// providerOrigin words where the provider of b comes from when a patch
// wrote it (" (set by patch \"p\" from variable v)"; "" when the template
// does), and how to give the machines one that sends heartbeats.
func providerOrigin(b beat) (origin, fix string) {
	switch {
	case b.providerVar != "":
		return fmt.Sprintf(" (set by patch %q from variable %s)", b.providerPatch, b.providerVar),
			fmt.Sprintf("set variable %s to a provider that sends heartbeats", b.providerVar)
	case b.providerPatch != "":
		return fmt.Sprintf(" (set by patch %q)", b.providerPatch),
			fmt.Sprintf("have patch %q write a provider that sends heartbeats", b.providerPatch)
	}
	return "", "use a provider that sends heartbeats"
}

// heartbeatEvery is how often the machines of template t send heartbeats:
// its spec's heartbeatInterval, or the default; 0 for a provider that
// sends none, or an interval the schema refuses.
func heartbeatEvery(t v1alpha1.MachineTemplate) time.Duration {
	prov, ok := allowedShapes().providers[t.Provider]
	if !ok || silentProviders()[t.Provider] {
		return 0
	}
	if _, has := prov.fields["heartbeatInterval"]; !has {
		return 0
	}
	value, set := t.Spec["heartbeatInterval"]
	if !set {
		return wire.DefaultHeartbeatInterval
	}
	s, _ := value.(string)
	d, err := time.ParseDuration(s)
	if err != nil || d < wire.MinHeartbeatInterval {
		return 0 // the schema's or heartbeatTooShort's to report
	}
	return d
}

// checkBeatTimeout: a Ready Unknown condition waits at least two of the
// checked machines' heartbeat intervals. A shorter timeout finds a healthy
// machine silent between two heartbeats, or after one late one, and has it
// replaced over and over. b is the interval the machines get (every 0:
// nothing to check), after the class's patches: the error names the patch
// that wrote it, if one did.
func checkBeatTimeout(add addFunc, field, what string, b beat, h *v1alpha1.HealthRules) {
	if b.every == 0 {
		return
	}
	every, fix := b.every.String(), "a shorter spec.heartbeatInterval"
	switch {
	case b.variable != "":
		every += fmt.Sprintf(", set by patch %q from variable %s", b.patch, b.variable)
		fix = "a shorter " + b.variable
	case b.patch != "":
		every += fmt.Sprintf(", set by patch %q", b.patch)
		fix = fmt.Sprintf("a shorter spec.heartbeatInterval in patch %q", b.patch)
	}
	for i, u := range h.Checks.UnhealthyNodeConditions {
		if u.Type != v1alpha1.ConditionReady || u.Status != v1alpha1.ConditionUnknown || u.TimeoutSeconds <= 0 {
			continue
		}
		if least := 2 * b.every; time.Duration(u.TimeoutSeconds)*time.Second < least {
			secs := int((least + time.Second - 1) / time.Second)
			add(fmt.Sprintf("%s.checks.unhealthyNodeConditions[%d].timeoutSeconds", field, i),
				"%d is shorter than two heartbeats of %s (one every %s): its machines would be found silent between heartbeats and replaced over and over; use %d or more, or %s",
				u.TimeoutSeconds, what, every, secs, fix)
		}
	}
}

// checkMachineMetadata: machine labels and annotations have Kubernetes'
// key syntax, label values its value syntax, and no label is under
// gitfleet.io/, whose labels gitfleet sets itself (a health check or a
// wave selects on them).
func checkMachineMetadata(add addFunc, field string, m v1alpha1.MachineMetadata) {
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		switch v := m.Labels[k]; {
		case strings.HasPrefix(k, "gitfleet.io/"):
			add(field+".labels."+k, "labels under gitfleet.io/ are set by gitfleet (%s, %s, %s): use another prefix, like example.com/%s",
				v1alpha1.LabelCluster, v1alpha1.LabelControlPlane, v1alpha1.LabelDeployment, strings.TrimPrefix(k, "gitfleet.io/"))
		case !qualifiedName(k):
			add(field+".labels."+k, "%q is not a label key: an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", k)
		case v != "" && !labelValue.MatchString(v):
			add(field+".labels."+k, "%q is not a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (or empty)", v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.Annotations)) {
		if !qualifiedName(k) {
			add(field+".annotations."+k, "%q is not an annotation key: an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", k)
		}
	}
}

var (
	labelValue = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	dnsPrefix  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// qualifiedName reports whether k is a Kubernetes qualified name:
// [prefix/]name, the prefix a DNS subdomain of at most 253 characters.
func qualifiedName(k string) bool {
	prefix, name, found := strings.Cut(k, "/")
	if !found {
		prefix, name = "", k
	} else if prefix == "" || len(prefix) > 253 || !dnsPrefix.MatchString(prefix) {
		return false
	}
	return labelValue.MatchString(name)
}

// checkMaxInFlight: a remediation's maxInFlight (at field) is a count or
// a percentage up to 100%, and not 0.
func checkMaxInFlight(add addFunc, field string, m *v1alpha1.IntOrPercent) {
	checkPercent(add, field, m, 1)
	if m != nil && m.Value == 0 {
		add(field, "0 would never replace an unhealthy machine: use at least 1 (or 1%%), or leave it unset for no bound")
	}
}

// checkAutoscale: the autoscaler annotations of a pool (written at
// annotField) are both set, counts, min <= max, and the pool writes no
// replicas (the daemon owns them, as Cluster API's topology leaves them to
// the autoscaler).
func checkAutoscale(add addFunc, annotField, replicasField string, replicas *int, annotations map[string]string) {
	_, _, ok, err := v1alpha1.AutoscaleBounds(annotations)
	switch {
	case !ok:
	case err != nil:
		add(annotField, "%v", err)
	case replicas != nil:
		add(replicasField, "is set, but the autoscaler annotations make the daemon size this pool (gitfleet scale): remove replicas, or the annotations")
	}
}

// checkNaming: a machineNaming template (at pool+".machineNaming") parses,
// uses {{ .random }}, and makes a DNS label of at most 63 characters for
// this cluster and pool (a class's is tried with a short cluster name).
func checkNaming(add addFunc, pool string, n *v1alpha1.MachineNaming, cluster, name string) {
	if n == nil {
		return
	}
	if _, err := patch.MachineName(n.Template, cluster, name, "xxxxx"); err != nil {
		add(pool+".machineNaming.template", "%v", err)
	}
}
