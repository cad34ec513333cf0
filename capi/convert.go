package capi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

func meta(d *doc) v1alpha1.ObjectMeta {
	m := v1alpha1.ObjectMeta{Name: d.name}
	m.Labels = strMap(obj(d.m, "metadata", "labels"))
	m.Annotations = strMap(obj(d.m, "metadata", "annotations"))
	return m
}

func strMap(m map[string]any) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

func machineMetadata(m map[string]any) v1alpha1.MachineMetadata {
	return v1alpha1.MachineMetadata{Labels: strMap(obj(m, "labels")), Annotations: strMap(obj(m, "annotations"))}
}

func typeMeta(kind string) v1alpha1.TypeMeta {
	return v1alpha1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: kind}
}

// class converts a ClusterClass.
func (im *importer) class(d *doc) *v1alpha1.ClusterClass {
	im.consume(d, "apiVersion")
	im.consume(d, "kind")
	im.consume(d, "metadata", "name")
	im.consume(d, "metadata", "labels")
	im.consume(d, "metadata", "annotations")
	cc := &v1alpha1.ClusterClass{TypeMeta: typeMeta(v1alpha1.KindClusterClass), Metadata: meta(d)}
	cc.Metadata.Name = im.ref(im.classNames, d.namespace, d.name)
	im.note("classes/"+cc.Metadata.Name+".yaml", d)
	for _, v := range list(d.m, "spec", "kubernetesVersions") {
		cc.Spec.KubernetesVersions = append(cc.Spec.KubernetesVersions, fmt.Sprint(v))
	}
	im.consume(d, "spec", "kubernetesVersions")

	// The control plane: its machines come from machineInfrastructure.
	cp := []string{"spec", "controlPlane"}
	infra := append(slices.Clone(cp), "machineInfrastructure", "ref")
	if !d.v1beta1() {
		infra = append(slices.Clone(cp), "machineInfrastructure", "templateRef")
	}
	cc.Spec.ControlPlane.MachineTemplate = im.machineTemplate(d, infra)
	cc.Spec.ControlPlane.Metadata = machineMetadata(obj(d.m, append(cp, "metadata")...))
	im.consume(d, append(slices.Clone(cp), "metadata")...)
	if h := im.healthRules(d, healthPath(d, cp), false); h != nil {
		cc.Spec.ControlPlane.HealthCheck = h
	}
	infraKinds := map[string]bool{str(obj(d.m, infra...), "kind"): true}

	for i, w := range list(d.m, "spec", "workers", "machineDeployments") {
		wm, _ := w.(map[string]any)
		p := []string{"spec", "workers", "machineDeployments", strconv.Itoa(i)}
		mdc := v1alpha1.MachineDeploymentClass{Class: str(wm, "class")}
		im.consume(d, append(slices.Clone(p), "class")...)
		tref := append(slices.Clone(p), "template", "infrastructure", "ref")
		if !d.v1beta1() {
			tref = append(slices.Clone(p), "infrastructure", "templateRef")
		}
		infraKinds[str(obj(d.m, tref...), "kind")] = true
		mdc.Template = im.machineTemplate(d, tref)
		mdc.Metadata = machineMetadata(obj(wm, "template", "metadata"))
		im.consume(d, append(slices.Clone(p), "template", "metadata")...)
		if !d.v1beta1() {
			mdc.Metadata = machineMetadata(obj(wm, "metadata"))
			im.consume(d, append(slices.Clone(p), "metadata")...)
		}
		mdc.PoolLifecycle = im.lifecycle(d, p)
		if h := im.healthRules(d, healthPath(d, p), true); h != nil {
			mdc.HealthCheck = h
		}
		cc.Spec.Workers.MachineDeployments = append(cc.Spec.Workers.MachineDeployments, mdc)
	}
	for i, v := range list(d.m, "spec", "variables") {
		vm, _ := v.(map[string]any)
		p := []string{"spec", "variables", strconv.Itoa(i)}
		cv := v1alpha1.ClassVariable{Name: str(vm, "name")}
		cv.Required, _ = vm["required"].(bool)
		if s := obj(vm, "schema", "openAPIV3Schema"); s != nil {
			cv.Schema = &v1alpha1.VariableSchema{OpenAPIV3Schema: s}
		}
		for _, f := range []string{"name", "required"} {
			im.consume(d, append(slices.Clone(p), f)...)
		}
		im.consume(d, append(slices.Clone(p), "schema", "openAPIV3Schema")...)
		cc.Spec.Variables = append(cc.Spec.Variables, cv)
	}
	delete(infraKinds, "")
	for i, pt := range list(d.m, "spec", "patches") {
		if p, ok := im.patch(d, i, pt, infraKinds); ok {
			cc.Spec.Patches = append(cc.Spec.Patches, p)
		}
	}
	return cc
}

// healthPath is where a control plane's or worker class's health check is
// written: machineHealthCheck in v1beta1, healthCheck in v1beta2.
func healthPath(d *doc, p []string) []string {
	if d.v1beta1() {
		return append(slices.Clone(p), "machineHealthCheck")
	}
	return append(slices.Clone(p), "healthCheck")
}

// healthRules converts health rules at p: v1beta1's MachineHealthCheck
// class (nodeStartupTimeout, unhealthyConditions, maxUnhealthy,
// unhealthyRange) or v1beta2's (checks, remediation). Conditions other
// than the node's Ready are dropped, and so is Ready Unknown for a
// provider that sends no heartbeats.
func (im *importer) healthRules(d *doc, p []string, worker bool) *v1alpha1.HealthRules {
	m := obj(d.m, p...)
	if m == nil {
		return nil
	}
	at := func(f ...string) []string { return append(slices.Clone(p), f...) }
	var h v1alpha1.HealthRules
	var conds []any
	condPath := at("checks", "unhealthyNodeConditions")
	timeoutKey := "timeoutSeconds"
	if d.v1beta1() {
		if s, ok := seconds(m["nodeStartupTimeout"]); ok {
			h.Checks.NodeStartupTimeoutSeconds = &s
			im.report(d, at("nodeStartupTimeout"), "changed", fmt.Sprintf("checks.nodeStartupTimeoutSeconds: %d", s))
		}
		conds, condPath, timeoutKey = list(m, "unhealthyConditions"), at("unhealthyConditions"), "timeout"
		if v := intOrPercent(m["maxUnhealthy"]); v != nil {
			h.Remediation.TriggerIf = &v1alpha1.RemediationTrigger{UnhealthyLessThanOrEqualTo: v}
			im.report(d, at("maxUnhealthy"), "changed", "remediation.triggerIf.unhealthyLessThanOrEqualTo")
		}
		if r := str(m, "unhealthyRange"); r != "" {
			if h.Remediation.TriggerIf == nil {
				h.Remediation.TriggerIf = &v1alpha1.RemediationTrigger{}
			}
			h.Remediation.TriggerIf.UnhealthyInRange = r
			im.report(d, at("unhealthyRange"), "changed", "remediation.triggerIf.unhealthyInRange")
		}
	} else {
		if s, ok := get(m, "checks", "nodeStartupTimeoutSeconds").(int); ok {
			h.Checks.NodeStartupTimeoutSeconds = &s
		}
		im.consume(d, at("checks", "nodeStartupTimeoutSeconds")...)
		conds = list(m, "checks", "unhealthyNodeConditions")
		t := obj(m, "remediation", "triggerIf")
		if t != nil {
			h.Remediation.TriggerIf = &v1alpha1.RemediationTrigger{UnhealthyLessThanOrEqualTo: intOrPercent(t["unhealthyLessThanOrEqualTo"]),
				UnhealthyInRange: str(t, "unhealthyInRange")}
			im.consume(d, at("remediation", "triggerIf")...)
		}
		if worker {
			h.Remediation.MaxInFlight = intOrPercent(get(m, "remediation", "maxInFlight"))
			im.consume(d, at("remediation", "maxInFlight")...)
		}
	}
	for i, c := range conds {
		cm, _ := c.(map[string]any)
		cp := append(slices.Clone(condPath), strconv.Itoa(i))
		typ, status := str(cm, "type"), fmt.Sprint(cm["status"])
		secs, ok := seconds(cm[timeoutKey])
		switch {
		case typ != v1alpha1.ConditionReady:
			im.report(d, cp, "dropped", fmt.Sprintf("gitfleet's machines report only the node condition Ready, not %s", typ))
		case status == v1alpha1.ConditionUnknown && !im.heartbeats:
			im.report(d, cp, "dropped", fmt.Sprintf("provider %s sends no heartbeats, so Ready would turn Unknown on every machine and replace it over and over", im.opts.Provider))
		case status != v1alpha1.ConditionUnknown && status != v1alpha1.ConditionStatusFalse:
			im.report(d, cp, "dropped", fmt.Sprintf("Ready %s is not unhealthy", status))
		case !ok || secs < 1:
			im.report(d, cp, "dropped", fmt.Sprintf("timeout %v is not a number of seconds >= 1", cm[timeoutKey]))
		default:
			h.Checks.UnhealthyNodeConditions = append(h.Checks.UnhealthyNodeConditions,
				v1alpha1.UnhealthyNodeCondition{Type: typ, Status: status, TimeoutSeconds: secs})
			if timeoutKey == "timeout" {
				im.report(d, cp, "changed", fmt.Sprintf("checks.unhealthyNodeConditions: {type: Ready, status: %s, timeoutSeconds: %d}", status, secs))
			} else {
				im.consume(d, cp...)
			}
		}
	}
	return &h
}

// lifecycle converts a worker's strategy/rollout, deletion order and
// minReadySeconds at p.
func (im *importer) lifecycle(d *doc, p []string) v1alpha1.PoolLifecycle {
	at := func(f ...string) []string { return append(slices.Clone(p), f...) }
	var l v1alpha1.PoolLifecycle
	sp := at("rollout", "strategy")
	if d.v1beta1() {
		sp = at("strategy")
	}
	if s := obj(d.m, sp...); s != nil {
		st := &v1alpha1.MachineDeploymentStrategy{Type: str(s, "type")}
		if ru := obj(s, "rollingUpdate"); ru != nil {
			st.RollingUpdate = &v1alpha1.RollingUpdateStrategy{MaxSurge: intOrPercent(ru["maxSurge"]), MaxUnavailable: intOrPercent(ru["maxUnavailable"])}
			if dp := str(ru, "deletePolicy"); dp != "" {
				l.Deletion = &v1alpha1.MachineDeletion{Order: dp}
				im.report(d, append(slices.Clone(sp), "rollingUpdate", "deletePolicy"), "changed", "deletion.order: "+dp)
			}
		}
		for _, f := range []string{"type", "rollingUpdate/maxSurge", "rollingUpdate/maxUnavailable"} {
			im.consume(d, append(slices.Clone(sp), strings.Split(f, "/")...)...)
		}
		l.Rollout = &v1alpha1.MachineRollout{Strategy: st}
		if d.v1beta1() {
			im.report(d, sp, "changed", "rollout.strategy")
		}
	}
	if o := str(d.m, at("deletion", "order")...); o != "" {
		l.Deletion = &v1alpha1.MachineDeletion{Order: o}
		im.consume(d, at("deletion", "order")...)
	}
	if s, ok := get(d.m, at("minReadySeconds")...).(int); ok {
		l.MinReadySeconds = &s
		im.consume(d, at("minReadySeconds")...)
	}
	if t := str(d.m, at("machineNaming", "template")...); t != "" {
		l.MachineNaming = &v1alpha1.MachineNaming{Template: t}
		im.consume(d, at("machineNaming", "template")...)
	}
	return l
}

// patch converts an inline patch; definitions for other objects than the
// machine templates (kubeadm, infrastructure cluster) are dropped, JSON
// patch paths rewritten from /spec/template/spec/<f> to /spec/<f>, and
// those writing a field the provider lacks dropped. ok is false when
// nothing is left.
func (im *importer) patch(d *doc, i int, v any, infraKinds map[string]bool) (v1alpha1.ClassPatch, bool) {
	pm, _ := v.(map[string]any)
	p := []string{"spec", "patches", strconv.Itoa(i)}
	at := func(f ...string) []string { return append(slices.Clone(p), f...) }
	cp := v1alpha1.ClassPatch{Name: str(pm, "name"), Description: str(pm, "description"), EnabledIf: str(pm, "enabledIf")}
	for _, f := range []string{"name", "description", "enabledIf"} {
		im.consume(d, at(f)...)
	}
	if pm["external"] != nil {
		im.report(d, p, "dropped", "external patches call a runtime extension, which gitfleet has not")
		return cp, false
	}
	for j, dv := range list(pm, "definitions") {
		dm, _ := dv.(map[string]any)
		dp := at("definitions", strconv.Itoa(j))
		sel := obj(dm, "selector")
		kind := str(sel, "kind")
		if !infraKinds[kind] {
			im.report(d, dp, "dropped", fmt.Sprintf("it patches %s, which has no place in gitfleet (only the machine templates' kinds are patched: %s)", kind, strings.Join(sortedBools(infraKinds), ", ")))
			continue
		}
		def := v1alpha1.PatchDefinition{Selector: v1alpha1.PatchSelector{APIVersion: str(sel, "apiVersion"), Kind: kind}}
		mr := obj(sel, "matchResources")
		def.Selector.MatchResources.ControlPlane, _ = mr["controlPlane"].(bool)
		if names := list(mr, "machineDeploymentClass", "names"); len(names) > 0 {
			def.Selector.MatchResources.MachineDeploymentClass = &v1alpha1.MachineClassMatcher{}
			for _, n := range names {
				def.Selector.MatchResources.MachineDeploymentClass.Names = append(def.Selector.MatchResources.MachineDeploymentClass.Names, fmt.Sprint(n))
			}
		}
		sp := append(slices.Clone(dp), "selector")
		for _, f := range []string{"apiVersion", "kind", "matchResources/controlPlane", "matchResources/machineDeploymentClass"} {
			im.consume(d, append(slices.Clone(sp), strings.Split(f, "/")...)...)
		}
		for k, ov := range list(dm, "jsonPatches") {
			om, _ := ov.(map[string]any)
			op := append(slices.Clone(dp), "jsonPatches", strconv.Itoa(k))
			jp := v1alpha1.JSONPatch{Op: str(om, "op"), Path: str(om, "path"), Value: om["value"]}
			rest, found := strings.CutPrefix(jp.Path, "/spec/template/spec/")
			field, _, _ := strings.Cut(rest, "/")
			switch {
			case !found:
				im.report(d, op, "dropped", fmt.Sprintf("path %s is outside the machine template's spec (/spec/template/spec/...)", jp.Path))
				continue
			case !slices.Contains(im.fields, field):
				im.report(d, op, "dropped", fmt.Sprintf("provider %s's spec has no field %q", im.opts.Provider, field))
				continue
			}
			jp.Path = "/spec/" + rest
			if vf := obj(om, "valueFrom"); vf != nil {
				jp.ValueFrom = &v1alpha1.ValueFrom{Variable: str(vf, "variable"), Template: str(vf, "template")}
			}
			im.report(d, append(slices.Clone(op), "path"), "changed", "path "+jp.Path+": gitfleet patches the machine template {provider, spec}")
			for _, f := range []string{"op", "value", "valueFrom"} {
				im.consume(d, append(slices.Clone(op), f)...)
			}
			def.JSONPatches = append(def.JSONPatches, jp)
		}
		if len(def.JSONPatches) > 0 {
			cp.Definitions = append(cp.Definitions, def)
		}
	}
	if len(cp.Definitions) == 0 {
		im.report(d, p, "dropped", "no definition is left for the machine templates")
		return cp, false
	}
	return cp, true
}

func sortedBools(m map[string]bool) []string {
	var out []string
	for k, ok := range m {
		if ok && k != "" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// cluster converts a Cluster with a topology.
func (im *importer) cluster(d *doc) *v1alpha1.Cluster {
	for _, f := range [][]string{{"apiVersion"}, {"kind"}, {"metadata", "name"}, {"metadata", "labels"}, {"metadata", "annotations"}, {"spec", "paused"}} {
		im.consume(d, f...)
	}
	c := &v1alpha1.Cluster{TypeMeta: typeMeta(v1alpha1.KindCluster), Metadata: meta(d)}
	c.Metadata.Name = im.ref(im.clusterNames, d.namespace, d.name)
	im.note("clusters/"+c.Metadata.Name+".yaml", d)
	c.Spec.Paused, _ = get(d.m, "spec", "paused").(bool)
	if n := obj(d.m, "spec", "clusterNetwork"); n != nil {
		cn := &v1alpha1.ClusterNetwork{ServiceDomain: str(n, "serviceDomain")}
		if b := list(n, "pods", "cidrBlocks"); b != nil {
			cn.Pods = &v1alpha1.NetworkRanges{CIDRBlocks: stringList(b)}
		}
		if b := list(n, "services", "cidrBlocks"); b != nil {
			cn.Services = &v1alpha1.NetworkRanges{CIDRBlocks: stringList(b)}
		}
		for _, f := range []string{"serviceDomain", "pods", "services"} {
			im.consume(d, "spec", "clusterNetwork", f)
		}
		c.Spec.ClusterNetwork = cn
	}
	t := []string{"spec", "topology"}
	at := func(f ...string) []string { return append(slices.Clone(t), f...) }
	class, classNS := str(d.m, at("classRef", "name")...), str(d.m, at("classRef", "namespace")...)
	im.consume(d, at("classRef", "name")...)
	if d.v1beta1() {
		class, classNS = str(d.m, at("class")...), str(d.m, at("classNamespace")...)
		im.report(d, at("class"), "changed", "topology.classRef.name")
	}
	if classNS == "" {
		classNS = d.namespace
	}
	c.Spec.Topology.ClassRef.Name = im.ref(im.classNames, classNS, class)
	c.Spec.Topology.Version = str(d.m, at("version")...)
	im.consume(d, at("version")...)
	if r, ok := get(d.m, at("controlPlane", "replicas")...).(int); ok {
		c.Spec.Topology.ControlPlane.Replicas = &r
		im.consume(d, at("controlPlane", "replicas")...)
	}
	c.Spec.Topology.ControlPlane.Metadata = machineMetadata(obj(d.m, at("controlPlane", "metadata")...))
	im.consume(d, at("controlPlane", "metadata")...)
	c.Spec.Topology.ControlPlane.HealthCheck = im.topologyHealth(d, at("controlPlane"), false)
	for i, w := range list(d.m, at("workers", "machineDeployments")...) {
		wm, _ := w.(map[string]any)
		p := at("workers", "machineDeployments", strconv.Itoa(i))
		md := v1alpha1.MachineDeploymentTopology{Class: str(wm, "class"), Name: str(wm, "name"), FailureDomain: str(wm, "failureDomain")}
		if r, ok := wm["replicas"].(int); ok {
			md.Replicas = &r
		}
		for _, f := range []string{"class", "name", "failureDomain", "replicas"} {
			im.consume(d, append(slices.Clone(p), f)...)
		}
		md.Metadata = machineMetadata(obj(wm, "metadata"))
		im.consume(d, append(slices.Clone(p), "metadata")...)
		md.PoolLifecycle = im.lifecycle(d, p)
		md.HealthCheck = im.topologyHealth(d, p, true)
		c.Spec.Topology.Workers.MachineDeployments = append(c.Spec.Topology.Workers.MachineDeployments, md)
	}
	for i, v := range list(d.m, at("variables")...) {
		vm, _ := v.(map[string]any)
		p := at("variables", strconv.Itoa(i))
		c.Spec.Topology.Variables = append(c.Spec.Topology.Variables, v1alpha1.ClusterVariable{Name: str(vm, "name"), Value: vm["value"]})
		im.consume(d, append(slices.Clone(p), "name")...)
		im.consume(d, append(slices.Clone(p), "value")...)
	}
	return c
}

func stringList(l []any) []string {
	out := make([]string, len(l))
	for i, v := range l {
		out[i] = fmt.Sprint(v)
	}
	return out
}

// topologyHealth converts a cluster's health check override of its control
// plane or a pool: v1beta1's machineHealthCheck {enable, ...} or v1beta2's
// healthCheck {enabled, checks, remediation}.
func (im *importer) topologyHealth(d *doc, p []string, worker bool) *v1alpha1.TopologyHealthCheck {
	hp := healthPath(d, p)
	m := obj(d.m, hp...)
	if m == nil {
		return nil
	}
	th := &v1alpha1.TopologyHealthCheck{}
	key := "enabled"
	if d.v1beta1() {
		key = "enable"
	}
	if b, ok := m[key].(bool); ok {
		th.Enabled = &b
		im.consume(d, append(slices.Clone(hp), key)...)
	}
	if h := im.healthRules(d, hp, worker); h != nil {
		th.HealthRules = *h
	}
	return th
}

// machineDeployment converts a standalone MachineDeployment; one a
// topology manages is skipped (the cluster's topology makes it).
func (im *importer) machineDeployment(d *doc) *v1alpha1.MachineDeployment {
	if str(d.m, "metadata", "labels", "topology.cluster.x-k8s.io/owned") != "" || str(d.m, "metadata", "labels", "topology.cluster.x-k8s.io/deployment-name") != "" {
		im.report(d, nil, "dropped", "its cluster's topology makes it")
		return nil
	}
	for _, f := range [][]string{{"apiVersion"}, {"kind"}, {"metadata", "name"}, {"metadata", "namespace"}, {"metadata", "labels"}, {"metadata", "annotations"}} {
		im.consume(d, f...)
	}
	md := &v1alpha1.MachineDeployment{TypeMeta: typeMeta(v1alpha1.KindMachineDeployment), Metadata: meta(d)}
	md.Spec.ClusterName = im.ref(im.clusterNames, d.namespace, str(d.m, "spec", "clusterName"))
	im.note("clusters/"+md.Spec.ClusterName+".yaml", d)
	if r, ok := get(d.m, "spec", "replicas").(int); ok {
		md.Spec.Replicas = &r
	}
	md.Spec.Version = str(d.m, "spec", "template", "spec", "version")
	md.Spec.FailureDomain = str(d.m, "spec", "template", "spec", "failureDomain")
	for _, f := range [][]string{{"spec", "clusterName"}, {"spec", "replicas"}, {"spec", "template", "spec", "version"}, {"spec", "template", "spec", "failureDomain"}} {
		im.consume(d, f...)
	}
	ref := []string{"spec", "template", "spec", "infrastructureRef"}
	md.Spec.Template = im.machineTemplate(d, ref)
	md.Spec.PoolLifecycle = im.lifecycle(d, []string{"spec"})
	mp := []string{"spec", "remediation", "maxInFlight"}
	if d.v1beta1() {
		mp = []string{"spec", "strategy", "remediation", "maxInFlight"}
	}
	if v := get(d.m, mp...); v != nil {
		md.Spec.Remediation = &v1alpha1.MachineDeploymentRemediation{MaxInFlight: intOrPercent(v)}
		im.consume(d, mp...)
		if d.v1beta1() {
			im.report(d, mp, "changed", "remediation.maxInFlight")
		}
	}
	if s, ok := get(d.m, "spec", "template", "spec", "minReadySeconds").(int); ok {
		md.Spec.MinReadySeconds = &s
		im.consume(d, "spec", "template", "spec", "minReadySeconds")
	}
	return md
}

// healthCheck converts a MachineHealthCheck: Cluster API's machine labels
// in its selector become gitfleet's.
func (im *importer) healthCheck(d *doc) *v1alpha1.MachineHealthCheck {
	for _, f := range [][]string{{"apiVersion"}, {"kind"}, {"metadata", "name"}, {"metadata", "namespace"}, {"metadata", "labels"}, {"metadata", "annotations"}} {
		im.consume(d, f...)
	}
	hc := &v1alpha1.MachineHealthCheck{TypeMeta: typeMeta(v1alpha1.KindMachineHealthCheck), Metadata: meta(d)}
	hc.Spec.ClusterName = im.ref(im.clusterNames, d.namespace, str(d.m, "spec", "clusterName"))
	im.consume(d, "spec", "clusterName")
	im.note("clusters/"+hc.Spec.ClusterName+".yaml", d)
	sel := obj(d.m, "spec", "selector", "matchLabels")
	if len(sel) > 0 {
		hc.Spec.Selector.MatchLabels = map[string]string{}
	}
	for _, k := range sortedKeys(sel) {
		p := []string{"spec", "selector", "matchLabels", k}
		switch k {
		case "cluster.x-k8s.io/cluster-name":
			hc.Spec.Selector.MatchLabels[v1alpha1.LabelCluster] = im.ref(im.clusterNames, d.namespace, fmt.Sprint(sel[k]))
			im.report(d, p, "changed", v1alpha1.LabelCluster)
		case "cluster.x-k8s.io/control-plane":
			hc.Spec.Selector.MatchLabels[v1alpha1.LabelControlPlane] = "true"
			im.report(d, p, "changed", v1alpha1.LabelControlPlane+": \"true\"")
		case "cluster.x-k8s.io/deployment-name", "topology.cluster.x-k8s.io/deployment-name":
			hc.Spec.Selector.MatchLabels[v1alpha1.LabelDeployment] = fmt.Sprint(sel[k])
			im.report(d, p, "changed", v1alpha1.LabelDeployment)
		default:
			hc.Spec.Selector.MatchLabels[k] = fmt.Sprint(sel[k])
			im.consume(d, p...)
		}
	}
	if h := im.healthRulesAt(d); h != nil {
		hc.Spec.HealthRules = *h
	}
	return hc
}

// healthRulesAt converts a MachineHealthCheck's own rules: in v1beta1 they
// are spec's fields, in v1beta2 spec.checks and spec.remediation.
func (im *importer) healthRulesAt(d *doc) *v1alpha1.HealthRules {
	return im.healthRules(d, []string{"spec"}, false)
}
