package reconciler

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// gateClass rolls out in three waves of one cluster each. Its workers'
// failureRate is variable fail, which its schema defaults to %[1]s, in a
// class named gate, and 1 in a class of another name (%[2]s): the patch
// reads builtin.cluster.topology.class.
const gateClass = `apiVersion: gitfleet.io/v1alpha1
kind: ClusterClass
metadata:
  name: %[2]s
spec:
  version: v1.31.2
  controlPlane:
    machineTemplate:
      provider: inmemory
  workers:
    machineDeployments:
      - class: worker
        template:
          provider: inmemory
          spec:
            provisioningDelay: 10ms
  variables:
    - name: fail
      schema:
        openAPIV3Schema: {type: number, minimum: 0, maximum: 1, default: %[1]s}
  patches:
    - name: fail
      definitions:
        - selector: {matchResources: {machineDeploymentClass: {names: [worker]}}}
          jsonPatches:
            - op: add
              path: /spec/failureRate
              valueFrom: {template: '{{ if eq .builtin.cluster.topology.class "gate" }}{{ .fail }}{{ else }}1{{ end }}'}
  rollout:
    waves:
      - {name: canary, selector: {matchLabels: {tier: canary}}}
      - {name: stage, selector: {matchLabels: {tier: stage}}}
      - {name: prod, selector: {matchLabels: {tier: prod}}}
`

const gateCluster = `apiVersion: gitfleet.io/v1alpha1
kind: Cluster
metadata:
  name: %s
  labels: {tier: %s}
spec:
  topology:
    classRef: {name: %s}
    workers:
      machineDeployments:
        - class: worker
          name: md
          replicas: 1
`

// TestClassChangesWaitForTheirWave: through the daemon, a class change
// the class revision once missed — the default in a variable's schema,
// a rename that a patch reads — makes the canary's new workers fail, and
// the rollout halts there: stage and prod get no task. Reverting it
// releases the fleet: every cluster is done on the revert, the later
// waves still without a task.
func TestClassChangesWaitForTheirWave(t *testing.T) {
	clusters := [][2]string{{"canary", "canary"}, {"stage", "stage"}, {"prod", "prod"}}
	write := func(repo *benchRepo, class, fail string) {
		repo.write("classes/gate.yaml", fmt.Sprintf(gateClass, fail, class))
		for _, c := range clusters {
			repo.write("clusters/"+c[0]+".yaml", fmt.Sprintf(gateCluster, c[0], c[1], class))
		}
	}
	for _, tc := range []struct {
		name        string
		class, fail string // the change
	}{
		{"schema-default", "gate", "1"},
		{"rename", "gate-v2", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := &benchRepo{tb: t, dir: t.TempDir()}
			repo.git("init", "-q", "-b", "main")
			write(repo, "gate", "0")
			repo.commit("a fleet in three waves")
			js, rkv := inmemoryCloud(t)
			runLeader(t, js, repo.dir)
			done := func(class string) func(planner.Records) bool {
				return func(r planner.Records) bool {
					rev := r.Rollouts[class].Revision
					for _, c := range clusters {
						if a := r.Clusters[c[0]].Admission; rev == "" || a == nil || a.State != planner.AdmissionDone || a.Revision != rev {
							return false
						}
					}
					return true
				}
			}
			waitRecords(t, rkv, "every cluster done", done("gate"))
			machines := func() map[string]int {
				t.Helper()
				mkv, err := js.KeyValue(t.Context(), wire.BucketMachines)
				if err != nil {
					t.Fatal(err)
				}
				keys, _ := mkv.Keys(t.Context())
				per := map[string]int{}
				for _, k := range keys {
					per[strings.SplitN(k, ".", 2)[0]]++
				}
				return per
			}

			write(repo, tc.class, tc.fail)
			repo.commit("the change")
			// Until the rollout halts on the canary, or fails to: a later
			// wave got a machine.
			var per map[string]int
			waitRecords(t, rkv, "the rollout halted on the canary", func(r planner.Records) bool {
				rr := r.Rollouts[tc.class]
				per = machines()
				return len(rr.Failed) == 1 && rr.Failed[0].Cluster == "canary" || per["stage"] != 2 || per["prod"] != 2
			})
			if per["stage"] != 2 || per["prod"] != 2 {
				t.Fatalf("the change reached later waves: machines per cluster %v", per)
			}

			write(repo, "gate", "0")
			repo.commit("revert the change")
			waitRecords(t, rkv, "every cluster done on the revert", done("gate"))
			if per := machines(); per["stage"] != 2 || per["prod"] != 2 {
				t.Errorf("the revert reached later waves: machines per cluster %v", per)
			}
		})
	}
}

// TestAWaveDoneInItsOwnPassOpensTheNext: a class change that changes no
// machine (its workers' labels) admits the canary, which is done on it in
// the very pass that admits it: no machine moves, so no event follows.
// The next wave must open all the same, and the rollout reach its end.
// Before, the pass that found the canary done left its class "moved" for
// a next pass that never came (a pass ran only for a dirty cluster): the
// rollout stood at "wave canary: 0 of 1 clusters done" until something
// else happened in the fleet, and every later wave's own changes waited
// with it.
func TestAWaveDoneInItsOwnPassOpensTheNext(t *testing.T) {
	clusters := [][2]string{{"canary", "canary"}, {"stage", "stage"}, {"prod", "prod"}}
	repo := &benchRepo{tb: t, dir: t.TempDir()}
	repo.git("init", "-q", "-b", "main")
	class := fmt.Sprintf(gateClass, "0", "gate")
	repo.write("classes/gate.yaml", class)
	for _, c := range clusters {
		repo.write("clusters/"+c[0]+".yaml", fmt.Sprintf(gateCluster, c[0], c[1], "gate"))
	}
	repo.commit("a fleet in three waves")
	js, rkv := inmemoryCloud(t)
	runLeader(t, js, repo.dir)
	doneOn := func(r planner.Records, rev string) bool {
		for _, c := range clusters {
			if a := r.Clusters[c[0]].Admission; rev == "" || a == nil || a.State != planner.AdmissionDone || a.Revision != rev {
				return false
			}
		}
		return true
	}
	first := waitRecords(t, rkv, "every cluster done", func(r planner.Records) bool {
		return doneOn(r, r.Rollouts["gate"].Revision)
	}).Rollouts["gate"].Revision

	labelled := strings.Replace(class, "      - class: worker\n", "      - class: worker\n        metadata: {labels: {team: a}}\n", 1)
	if labelled == class {
		t.Fatal("the test's class has no worker class to label")
	}
	repo.write("classes/gate.yaml", labelled)
	repo.commit("label the workers")
	// Time enough for many ticks and passes, and far less than anything
	// else in the fleet would take to happen.
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := readRecords(t, rkv)
		rev := r.Rollouts["gate"].Revision
		if rev != first && doneOn(r, rev) {
			return
		}
		if time.Now().After(deadline) {
			var states []string
			for _, c := range clusters {
				if a := r.Clusters[c[0]].Admission; a != nil {
					states = append(states, fmt.Sprintf("%s: %s on %s", c[0], a.State, a.Revision))
				}
			}
			t.Fatalf("the rollout of a change that moves no machine stalled: rollout %s, %s", rev, strings.Join(states, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
