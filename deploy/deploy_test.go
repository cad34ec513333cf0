// Package deploy_test checks the deployment files under deploy/.
package deploy_test

import (
	"slices"
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
