// Package deploy_test checks the deployment files under deploy/.
package deploy_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestKubernetesRenders: kustomize build deploy/kubernetes renders valid
// objects: a three-replica NATS StatefulSet, a two-replica daemon
// Deployment that makes R3 streams, workers, a scraped Service and network
// policies; every container runs as non-root on a read-only root
// filesystem without privilege escalation.
func TestKubernetesRenders(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), "kubernetes")
	if err != nil {
		t.Fatalf("kustomize build deploy/kubernetes: %v", err)
	}
	byName := map[string]*resource.Resource{}
	for _, r := range m.Resources() {
		if r.GetApiVersion() == "" || r.GetKind() == "" || r.GetName() == "" {
			t.Errorf("an object without apiVersion, kind or name: %s", r.MustYaml())
		}
		if r.GetKind() != "Namespace" && r.GetNamespace() != "gitfleet" {
			t.Errorf("%s/%s is in namespace %q, want gitfleet", r.GetKind(), r.GetName(), r.GetNamespace())
		}
		byName[r.GetKind()+"/"+r.GetName()] = r
	}
	for _, want := range []string{"Namespace/gitfleet", "StatefulSet/nats", "Service/nats", "ConfigMap/nats-config",
		"Deployment/gitfleet", "Service/gitfleet", "ServiceAccount/gitfleet", "Deployment/gitfleet-worker-inmemory",
		"NetworkPolicy/nats", "NetworkPolicy/gitfleet", "NetworkPolicy/gitfleet-worker"} {
		if byName[want] == nil {
			t.Errorf("no %s", want)
		}
	}
	replicas := func(name string) int {
		r := byName[name]
		if r == nil {
			return -1
		}
		m, _ := r.Map()
		n, _ := m["spec"].(map[string]any)["replicas"].(int)
		return n
	}
	if n := replicas("StatefulSet/nats"); n != 3 {
		t.Errorf("nats replicas %d, want 3", n)
	}
	if n := replicas("Deployment/gitfleet"); n != 2 {
		t.Errorf("gitfleet replicas %d, want 2", n)
	}
	if s := byName["Service/gitfleet"]; s == nil || s.GetAnnotations()["prometheus.io/scrape"] != "true" {
		t.Error("the daemon's Service is not marked for scraping")
	}
	for _, name := range []string{"StatefulSet/nats", "Deployment/gitfleet", "Deployment/gitfleet-worker-inmemory"} {
		r := byName[name]
		if r == nil {
			continue
		}
		m, _ := r.Map()
		pod := m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		if psc, _ := pod["securityContext"].(map[string]any); psc["runAsNonRoot"] != true {
			t.Errorf("%s: the pod may run as root", name)
		}
		for _, c := range pod["containers"].([]any) {
			cm := c.(map[string]any)
			sc, _ := cm["securityContext"].(map[string]any)
			if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false {
				t.Errorf("%s/%s: securityContext %v", name, cm["name"], sc)
			}
			args := strings.Join(toStrings(cm["args"]), " ")
			if cm["image"] == "gitfleet:dev" && !strings.Contains(args, "--nats-replicas=3") {
				t.Errorf("%s/%s does not make R3 streams: %s", name, cm["name"], args)
			}
			checkMemoryLimit(t, name, cm)
		}
	}
	// Every workload that runs a worker, not only the one named above: a
	// pool added beside it gets its own credential too.
	workers := 0
	for _, r := range m.Resources() {
		if runsWorker(r) {
			workers++
			checkWorkerCredentials(t, r)
		}
	}
	if workers == 0 {
		t.Error("no workload runs gitfleet worker")
	}
}

// runsWorker reports whether r is a workload one of whose containers runs
// gitfleet worker.
func runsWorker(r *resource.Resource) bool {
	m, _ := r.Map()
	spec, _ := m["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	cs, _ := pod["containers"].([]any)
	for _, c := range cs {
		cm, _ := c.(map[string]any)
		if args := toStrings(cm["args"]); len(args) > 0 && args[0] == "worker" {
			return true
		}
	}
	return false
}

// checkWorkerCredentials: a worker pod mounts its own NATS credential
// (worker-NAME.creds, made by gitfleet nats-creds --worker NAME) and
// nothing else of gitfleet-nats-creds — above all not daemon.creds, with
// which a compromised worker could do everything — and its identity is
// NAME_<pod>, as its credential requires.
func checkWorkerCredentials(t *testing.T, r *resource.Resource) {
	t.Helper()
	m, _ := r.Map()
	pod := m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	mounted := map[string]bool{}
	for _, v := range pod["volumes"].([]any) {
		vm := v.(map[string]any)
		s, _ := vm["secret"].(map[string]any)
		if s == nil || s["secretName"] != "gitfleet-nats-creds" {
			continue
		}
		items, _ := s["items"].([]any)
		if len(items) == 0 {
			t.Errorf("%s mounts every key of gitfleet-nats-creds, daemon.creds included", r.GetName())
		}
		for _, it := range items {
			im := it.(map[string]any)
			key, _ := im["key"].(string)
			mounted[key] = true
			if !strings.HasPrefix(key, "worker-") {
				t.Errorf("%s mounts %s of gitfleet-nats-creds; want its own worker credential only", r.GetName(), key)
			}
		}
	}
	for _, c := range pod["containers"].([]any) {
		args := toStrings(c.(map[string]any)["args"])
		var creds, id string
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--nats-creds=/etc/gitfleet/nats/"); ok {
				creds = v
			}
			if v, ok := strings.CutPrefix(a, "--worker-id="); ok {
				id = v
			}
		}
		name, ok := strings.CutSuffix(strings.TrimPrefix(creds, "worker-"), ".creds")
		if !ok || !mounted[creds] {
			t.Errorf("%s: --nats-creds %q is not a mounted worker credential (%v)", r.GetName(), creds, mounted)
		}
		if !strings.HasPrefix(id, name+"_") {
			t.Errorf("%s: --worker-id=%s is not %s_<something>, which credential %s requires", r.GetName(), id, name, creds)
		}
	}
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return slices.Clip(out)
}

// checkMemoryLimit: a container with a memory limit tells Go's runtime a
// soft limit under it (GOMEMLIMIT, 80–95 % of it), so that the collector
// works harder near the limit instead of the kernel killing the process
// when the heap doubles.
func checkMemoryLimit(t *testing.T, name string, c map[string]any) {
	t.Helper()
	res, _ := c["resources"].(map[string]any)
	limits, _ := res["limits"].(map[string]any)
	limit, _ := limits["memory"].(string)
	if limit == "" {
		t.Errorf("%s/%s has no memory limit", name, c["name"])
		return
	}
	soft := ""
	env, _ := c["env"].([]any)
	for _, e := range env {
		if em, _ := e.(map[string]any); em["name"] == "GOMEMLIMIT" {
			soft, _ = em["value"].(string)
		}
	}
	l, s := bytesOf(limit, "i"), bytesOf(soft, "iB")
	if s < 0 || l < 0 || s < l*80/100 || s > l*95/100 {
		t.Errorf("%s/%s: GOMEMLIMIT %q under a memory limit of %s; want 80–95 %% of it", name, c["name"], soft, limit)
	}
}

// bytesOf reads a quantity in Mi or Gi (followed by suffix: "i" for
// Kubernetes, "iB" for Go); -1 for anything else.
func bytesOf(q, suffix string) int64 {
	for unit, size := range map[string]int64{"M": 1 << 20, "G": 1 << 30} {
		if n, ok := strings.CutSuffix(q, unit+suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err == nil {
				return v * size
			}
		}
	}
	return -1
}
