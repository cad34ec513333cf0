package reconciler

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// TestStoredAdmissionKeepsItsRules: an admission's pool rules, health
// checks and versions survive the rollouts bucket's format: the record
// read back is the one saved, so a new leader acts on the rules its
// clusters were admitted with (and saves nothing again for them).
func TestStoredAdmissionKeepsItsRules(t *testing.T) {
	after := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	class := &v1alpha1.ClusterClass{Metadata: v1alpha1.ObjectMeta{Name: "standard"}, Source: v1alpha1.Source{Path: "classes/standard.yaml", Line: 1},
		Spec: v1alpha1.ClusterClassSpec{Version: "v1.31.2", KubernetesVersions: []string{"v1.30.5", "v1.31.2"},
			ControlPlane: v1alpha1.ControlPlaneClass{MachineTemplate: v1alpha1.MachineTemplate{Provider: "inmemory"},
				HealthCheck: &v1alpha1.HealthRules{Checks: v1alpha1.HealthChecks{NodeStartupTimeoutSeconds: new(0)}}},
			Workers: v1alpha1.WorkersClass{MachineDeployments: []v1alpha1.MachineDeploymentClass{{Class: "worker",
				Metadata: v1alpha1.MachineMetadata{Labels: map[string]string{"tier": "web"}, Annotations: map[string]string{"note": "x"}},
				Template: v1alpha1.MachineTemplate{Provider: "inmemory", Spec: map[string]any{"cpus": 2}},
				PoolLifecycle: v1alpha1.PoolLifecycle{
					Rollout: &v1alpha1.MachineRollout{After: &after, Strategy: &v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.StrategyRollingUpdate,
						RollingUpdate: &v1alpha1.RollingUpdateStrategy{MaxSurge: v1alpha1.Int(0), MaxUnavailable: v1alpha1.Percent(100)}}},
					Deletion: &v1alpha1.MachineDeletion{Order: v1alpha1.DeleteNewest}, MinReadySeconds: new(30),
					MachineNaming: &v1alpha1.MachineNaming{Template: "{{ .machineSet.name }}-{{ .random }}"}},
				HealthCheck: &v1alpha1.HealthRules{
					Checks: v1alpha1.HealthChecks{UnhealthyNodeConditions: []v1alpha1.UnhealthyNodeCondition{{Type: "Ready", Status: "Unknown", TimeoutSeconds: 30}}},
					Remediation: v1alpha1.HealthRemediation{MaxInFlight: v1alpha1.Percent(50),
						TriggerIf: &v1alpha1.RemediationTrigger{UnhealthyLessThanOrEqualTo: v1alpha1.Int(2), UnhealthyInRange: "[1-2]"}}},
			}}},
		}}
	cluster := &v1alpha1.Cluster{Metadata: v1alpha1.ObjectMeta{Name: "c1"}, Source: v1alpha1.Source{Path: "clusters/c1.yaml", Line: 1},
		Spec: v1alpha1.ClusterSpec{Topology: v1alpha1.Topology{ClassRef: v1alpha1.ClassRef{Name: "standard"},
			Workers: v1alpha1.WorkersTopology{MachineDeployments: []v1alpha1.MachineDeploymentTopology{{Class: "worker", Name: "md", Replicas: new(3)}}}}}}
	mhc := &v1alpha1.MachineHealthCheck{Metadata: v1alpha1.ObjectMeta{Name: "c1-all"}, Source: v1alpha1.Source{Path: "clusters/c1-health.yaml", Line: 1},
		Spec: v1alpha1.MachineHealthCheckSpec{ClusterName: "c1", Selector: v1alpha1.LabelSelector{MatchLabels: map[string]string{},
			MatchExpressions: []v1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: "Exists", Values: []string{}}}}}}
	desired, problems := planner.Expand(&v1alpha1.Fleet{Classes: []*v1alpha1.ClusterClass{class}, Clusters: []*v1alpha1.Cluster{cluster},
		HealthChecks: []*v1alpha1.MachineHealthCheck{mhc}})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	dc := desired.Cluster("c1")
	res := planner.PlanCluster(planner.ClusterInput{Name: "c1", Desired: dc, Now: after,
		Gate: planner.Gate{Admit: true, Revision: desired.Class("standard").Revision, AdmitState: planner.AdmissionUpdating}})
	saved := res.Record
	if a := saved.Admission; a == nil || !a.Rules || len(a.HealthChecks) != 3 || len(a.KubernetesVersions) != 2 {
		t.Fatalf("the planner recorded %+v, want the rules, three health checks and two versions", a)
	}
	data, err := json.Marshal(toStoredCluster(saved))
	if err != nil {
		t.Fatal(err)
	}
	recs := planner.Records{Clusters: map[string]planner.ClusterRecord{}, Rollouts: map[string]planner.RolloutRecord{}}
	if err := decodeDecision(keyCluster+"c1", data, &recs); err != nil {
		t.Fatal(err)
	}
	read := recs.Clusters["c1"]
	if !read.Equal(saved) {
		a, _ := json.Marshal(saved)
		b, _ := json.Marshal(read)
		t.Fatalf("read back\n%s\nsaved\n%s", b, a)
	}
	// Planned again from the record read back, the cluster is where it
	// was: nothing to save, nothing to admit.
	again := planner.PlanCluster(planner.ClusterInput{Name: "c1", Desired: dc, Record: &read, Now: after})
	if again.RecordChanged {
		a, _ := json.Marshal(again.Record)
		t.Errorf("planned from the record read back, the record changed:\n%s", a)
	}
	if sum := planner.Summarize(dc, &read, nil, after); !sum.Current {
		t.Errorf("the record read back is not current: %+v", sum)
	}
}

// TestStoredAdmissionOfAnEarlierGitfleet: an admission stored before
// admissions held rules reads as one without them (Rules false), which
// the planner reads with the desired cluster's rules.
func TestStoredAdmissionOfAnEarlierGitfleet(t *testing.T) {
	old := `{"cluster":"c1","admission":{"revision":"9ce7da3c89","wave":"(unmatched)","admittedAt":"2026-01-01T00:00:00Z","state":"Done",` +
		`"version":"v1.31.2","pools":[{"version":"v1.31.2","provider":"inmemory","hash":"0123456789"}]}}`
	recs := planner.Records{Clusters: map[string]planner.ClusterRecord{}, Rollouts: map[string]planner.RolloutRecord{}}
	if err := decodeDecision(keyCluster+"c1", []byte(old), &recs); err != nil {
		t.Fatal(err)
	}
	a := recs.Clusters["c1"].Admission
	if a == nil || a.Rules || a.HealthChecks != nil || !reflect.ValueOf(a.Pools[0].Rules).IsZero() || a.Revision != "9ce7da3c89" {
		t.Errorf("read %+v, want an admission without rules", a)
	}
}
