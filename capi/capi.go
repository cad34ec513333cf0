// Package capi converts Cluster API YAML (cluster.x-k8s.io v1beta1 and
// v1beta2: Cluster with a topology, ClusterClass, MachineDeployment,
// MachineHealthCheck, and the infrastructure machine templates they refer
// to) into gitfleet's fleet files, and reports every field it dropped or
// changed, with the file and line it was written on. docs/import.md says
// what becomes of what.
package capi

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// Input is one file to convert.
type Input struct {
	Path string
	Data []byte
}

// Options say how to convert.
type Options struct {
	// Provider makes every machine template: fields of the infrastructure
	// templates it has are kept, the rest dropped.
	Provider string
}

// Finding is one field of the input that was dropped or changed.
type Finding struct {
	File   string
	Line   int
	Object string // Kind/name
	Field  string // "" for the whole document
	What   string // "dropped" or "changed"
	Why    string
}

func (f Finding) String() string {
	field := ""
	if f.Field != "" {
		field = " " + f.Field
	}
	return fmt.Sprintf("%s:%d: %s%s: %s: %s", f.File, f.Line, f.Object, field, f.What, f.Why)
}

// Result is the fleet files made, by repository path, and the findings,
// in input order.
type Result struct {
	Files    map[string][]byte
	Findings []Finding
}

// Import converts the inputs.
func Import(inputs []Input, opts Options) (*Result, error) {
	fields, ok := schemas.ProviderFields(opts.Provider)
	if !ok {
		return nil, fmt.Errorf("unknown provider %q: use one of %s", opts.Provider, strings.Join(schemas.Providers(), ", "))
	}
	im := &importer{opts: opts, fields: fields, heartbeats: schemas.SendsHeartbeats(opts.Provider),
		templates: map[string]*doc{}, consumed: map[*doc]map[string]bool{}, classNames: map[string]string{}, clusterNames: map[string]string{}}
	var docs []*doc
	for _, in := range inputs {
		ds, err := readDocs(in.Path, in.Data)
		if err != nil {
			return nil, err
		}
		docs = append(docs, ds...)
	}
	var classes, clusters, mds, mhcs []*doc
	for _, d := range docs {
		switch {
		case !isClusterAPI(d.apiVersion):
			im.report(d, nil, "dropped", fmt.Sprintf("%s %s is not Cluster API", d.apiVersion, d.kind))
		case d.group() == "cluster.x-k8s.io" && d.kind == "ClusterClass":
			classes = append(classes, d)
		case d.group() == "cluster.x-k8s.io" && d.kind == "Cluster":
			clusters = append(clusters, d)
		case d.group() == "cluster.x-k8s.io" && d.kind == "MachineDeployment":
			mds = append(mds, d)
		case d.group() == "cluster.x-k8s.io" && d.kind == "MachineHealthCheck":
			mhcs = append(mhcs, d)
		default:
			im.templates[d.kind+"/"+d.namespace+"/"+d.name] = d
		}
	}
	im.names(classes, im.classNames)
	im.names(clusters, im.clusterNames)

	res := &Result{Files: map[string][]byte{}}
	out := map[string][]any{} // file -> objects
	var order []string
	add := func(file string, o any) {
		if out[file] == nil {
			order = append(order, file)
		}
		out[file] = append(out[file], o)
	}
	for _, d := range classes {
		cc := im.class(d)
		add("classes/"+cc.Metadata.Name+".yaml", cc)
	}
	for _, d := range clusters {
		c := im.cluster(d)
		add("clusters/"+c.Metadata.Name+".yaml", c)
	}
	for _, d := range mds {
		if md := im.machineDeployment(d); md != nil {
			add("clusters/"+md.Spec.ClusterName+".yaml", md)
		}
	}
	for _, d := range mhcs {
		hc := im.healthCheck(d)
		add("clusters/"+hc.Spec.ClusterName+".yaml", hc)
	}
	for _, d := range docs {
		if _, ok := im.templates[d.kind+"/"+d.namespace+"/"+d.name]; ok && isClusterAPI(d.apiVersion) && !im.used(d) {
			im.report(d, nil, "dropped", "gitfleet has no place for a "+d.kind+": its machine templates are {provider, spec}, and it has no kubeadm, infrastructure-cluster or bootstrap objects")
		}
	}
	for _, d := range docs {
		im.unconsumed(d)
	}
	for _, file := range order {
		data, err := render(out[file], sources(im, file))
		if err != nil {
			return nil, err
		}
		res.Files[file] = data
	}
	res.Findings = im.sorted(docs)
	return res, nil
}

// sources lists the input files an output file was made from, for its
// header comment.
func sources(im *importer, file string) []string { return im.from[file] }

type importer struct {
	opts       Options
	fields     []string // the provider's spec fields
	heartbeats bool     // the provider's machines send heartbeats
	templates  map[string]*doc
	// consumed marks, per document, the fields read (converted, or
	// dropped with a finding of their own); the rest are reported dropped.
	consumed     map[*doc]map[string]bool
	findings     []Finding
	classNames   map[string]string // namespace/name -> gitfleet name
	clusterNames map[string]string
	from         map[string][]string
}

func (d *doc) group() string {
	g, _, _ := strings.Cut(d.apiVersion, "/")
	return g
}

func (d *doc) v1beta1() bool { return strings.HasSuffix(d.apiVersion, "/v1beta1") }

func (d *doc) object() string { return d.kind + "/" + d.name }

func isClusterAPI(apiVersion string) bool {
	g, _, _ := strings.Cut(apiVersion, "/")
	return g == "cluster.x-k8s.io" || strings.HasSuffix(g, ".cluster.x-k8s.io")
}

func (im *importer) report(d *doc, p []string, what, why string) {
	im.findings = append(im.findings, Finding{File: d.file, Line: d.line(p...), Object: d.object(), Field: fieldPath(p...), What: what, Why: why})
	im.consume(d, p...)
}

// consume marks a field (and all below it) as dealt with.
func (im *importer) consume(d *doc, p ...string) {
	if im.consumed[d] == nil {
		im.consumed[d] = map[string]bool{}
	}
	im.consumed[d][strings.Join(p, "/")] = true
}

func (im *importer) used(d *doc) bool { return im.consumed[d][""] }

// note records that file was made from d's file.
func (im *importer) note(file string, d *doc) {
	if im.from == nil {
		im.from = map[string][]string{}
	}
	if !slices.Contains(im.from[file], d.file) {
		im.from[file] = append(im.from[file], d.file)
	}
}

// reasons say why a field common in Cluster API YAML has no gitfleet
// equivalent; other dropped fields say "gitfleet has no place for it".
var reasons = map[string]string{
	"metadata/namespace":                                 "gitfleet has no namespaces (a name is folded with its namespace only when two objects would collide)",
	"spec/controlPlaneEndpoint":                          "gitfleet's machines find their control plane themselves",
	"spec/infrastructureRef":                             "gitfleet has no infrastructure cluster",
	"spec/controlPlaneRef":                               "gitfleet makes the control plane from the class",
	"spec/infrastructure":                                "gitfleet has no infrastructure cluster",
	"spec/clusterNetwork/apiServerPort":                  "gitfleet's control-plane endpoint is chosen by the machines",
	"spec/topology/classNamespace":                       "gitfleet has no namespaces",
	"spec/topology/classRef/namespace":                   "gitfleet has no namespaces",
	"spec/controlPlane/ref":                              "kubeadm control-plane settings have no place in gitfleet: the control plane's machines come from machineInfrastructure",
	"spec/controlPlane/templateRef":                      "kubeadm control-plane settings have no place in gitfleet: the control plane's machines come from machineInfrastructure",
	"spec/availabilityGates":                             "gitfleet has no availability gates",
	"spec/selector":                                      "gitfleet selects a MachineDeployment's machines by its name",
	"spec/template/metadata":                             "gitfleet's standalone MachineDeployments take no machine metadata",
	"spec/template/spec/bootstrap":                       "gitfleet makes bootstrap data itself",
	"spec/template/spec/clusterName":                     "the MachineDeployment's clusterName is used",
	"spec/remediationTemplate":                           "gitfleet remediates by replacing the machine",
	"spec/remediation/templateRef":                       "gitfleet remediates by replacing the machine",
	"spec/checks/unhealthyMachineConditions":             "gitfleet's machines report node conditions only",
	"spec/workers/machineDeployments/template/bootstrap": "gitfleet makes bootstrap data itself",
	"spec/workers/machineDeployments/bootstrap":          "gitfleet makes bootstrap data itself",
	"spec/workers/machinePools":                          "gitfleet has no machine pools",
	"spec/workers/machineDeployments/namingStrategy":     "gitfleet names machines <cluster>-<pool>-<random>",
	"spec/workers/machineDeployments/naming":             "gitfleet names machines <cluster>-<pool>-<random>",
	"spec/controlPlane/namingStrategy":                   "gitfleet names machines <cluster>-control-plane-<random>",
	"spec/controlPlane/naming":                           "gitfleet names machines <cluster>-control-plane-<random>",
}

var indexRE = regexp.MustCompile(`/[0-9]+(/|$)`)

// unconsumed reports the fields of d that no conversion read.
func (im *importer) unconsumed(d *doc) {
	c := im.consumed[d]
	if c[""] {
		return
	}
	var walk func(v any, p []string)
	walk = func(v any, p []string) {
		key := strings.Join(p, "/")
		if c[key] {
			return
		}
		partial := false
		for k := range c {
			if key == "" || strings.HasPrefix(k, key+"/") {
				partial = true
				break
			}
		}
		if !partial && len(p) > 0 {
			why := reasons[indexRE.ReplaceAllString(key, "$1")]
			if why == "" {
				why = reasons[strings.Join(p[:min(len(p), 2)], "/")]
			}
			if why == "" {
				why = "gitfleet has no place for it"
			}
			im.findings = append(im.findings, Finding{File: d.file, Line: d.line(p...), Object: d.object(), Field: fieldPath(p...), What: "dropped", Why: why})
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(x) {
				walk(x[k], append(slices.Clone(p), k))
			}
		case []any:
			for i, e := range x {
				walk(e, append(slices.Clone(p), strconv.Itoa(i)))
			}
		}
	}
	if len(c) == 0 {
		return // not converted at all: reported as a whole already
	}
	walk(d.m, nil)
}

func (im *importer) sorted(docs []*doc) []Finding {
	pos := map[string]int{}
	for i, d := range docs {
		if _, ok := pos[d.file]; !ok {
			pos[d.file] = i
		}
	}
	out := slices.Clone(im.findings)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.File != b.File {
			return pos[a.File] < pos[b.File]
		}
		return a.Line < b.Line
	})
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// names gives each object a gitfleet name: its own, or namespace-name
// when two objects of the kind share a name in different namespaces.
func (im *importer) names(ds []*doc, out map[string]string) {
	count := map[string]int{}
	for _, d := range ds {
		count[d.name]++
	}
	for _, d := range ds {
		name := d.name
		if count[d.name] > 1 && d.namespace != "" {
			name = d.namespace + "-" + d.name
			im.report(d, []string{"metadata", "name"}, "changed", fmt.Sprintf("named %s: another %s is named %s in another namespace", name, d.kind, d.name))
		}
		if d.namespace != "" {
			im.consume(d, "metadata", "namespace")
		}
		out[d.namespace+"/"+d.name] = name
	}
}

// ref resolves a reference to another object of the input.
func (im *importer) ref(names map[string]string, namespace, name string) string {
	if n, ok := names[namespace+"/"+name]; ok {
		return n
	}
	if n, ok := names["/"+name]; ok {
		return n
	}
	return name
}

// machineTemplate makes a machine template of the infrastructure template
// a reference (v1beta1 ref or v1beta2 templateRef, at p in d) names.
func (im *importer) machineTemplate(d *doc, p []string) v1alpha1.MachineTemplate {
	tpl := v1alpha1.MachineTemplate{Provider: im.opts.Provider}
	ref := obj(d.m, p...)
	im.consume(d, p...)
	if ref == nil {
		return tpl
	}
	ns := str(ref, "namespace")
	if ns == "" {
		ns = d.namespace
	}
	t := im.templates[str(ref, "kind")+"/"+ns+"/"+str(ref, "name")]
	if t == nil {
		im.findings = append(im.findings, Finding{File: d.file, Line: d.line(p...), Object: d.object(), Field: fieldPath(p...), What: "changed",
			Why: fmt.Sprintf("%s %s is not in the input: the machine template is provider %s with no spec", str(ref, "kind"), str(ref, "name"), im.opts.Provider)})
		return tpl
	}
	if im.used(t) {
		// Converted once already: its findings were reported then.
		tpl.Spec = im.templateSpec(t, false)
		return tpl
	}
	tpl.Spec = im.templateSpec(t, true)
	im.findings = append(im.findings, Finding{File: t.file, Line: t.line(), Object: t.object(), What: "changed",
		Why: fmt.Sprintf("made into a machine template of provider %s (%s)", im.opts.Provider, fieldPath(p...)+" of "+d.object())})
	im.consume(t)
	return tpl
}

// templateSpec keeps the fields of an infrastructure template's
// spec.template.spec that the provider's spec has.
func (im *importer) templateSpec(t *doc, report bool) map[string]any {
	spec := obj(t.m, "spec", "template", "spec")
	out := map[string]any{}
	for _, k := range sortedKeys(spec) {
		if slices.Contains(im.fields, k) {
			out[k] = spec[k]
			continue
		}
		if report {
			im.findings = append(im.findings, Finding{File: t.file, Line: t.line("spec", "template", "spec", k), Object: t.object(),
				Field: fieldPath("spec", "template", "spec", k), What: "dropped",
				Why: fmt.Sprintf("provider %s's spec has no field %q (it has %s)", im.opts.Provider, k, strings.Join(im.fields, ", "))})
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// intOrPercent reads 3, "3" or "40%".
func intOrPercent(v any) *v1alpha1.IntOrPercent {
	switch x := v.(type) {
	case int:
		return v1alpha1.Int(x)
	case string:
		if n, err := strconv.Atoi(strings.TrimSuffix(x, "%")); err == nil {
			if strings.HasSuffix(x, "%") {
				return v1alpha1.Percent(n)
			}
			return v1alpha1.Int(n)
		}
	}
	return nil
}
