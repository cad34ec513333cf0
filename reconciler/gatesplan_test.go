package reconciler

import (
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/gitfleet/gitfleet/planner"
)

// TestRolloutPlansWhatItGates: while a class change rolls out one cluster
// at a time, a cluster that finishes moves its class's summaries, but only
// the clusters whose gate that changes (the next to be admitted) are
// planned again with it, not every cluster of the class each time. The
// rollout still reaches every cluster.
func TestRolloutPlansWhatItGates(t *testing.T) {
	const prod = 8
	repo := &benchRepo{tb: t, dir: t.TempDir()}
	repo.git("init", "-q", "-b", "main")
	repo.write("classes/waves.yaml", fmt.Sprintf(wavesClass, ""))
	names := []string{"canary"}
	repo.write("clusters/canary.yaml", fmt.Sprintf(wavesCluster, "canary", "canary"))
	for i := range prod {
		n := fmt.Sprintf("prod-%d", i)
		names = append(names, n)
		repo.write("clusters/"+n+".yaml", fmt.Sprintf(wavesCluster, n, "prod"))
	}
	repo.commit("a fleet in two waves")

	js, rkv := inmemoryCloud(t)
	_, m := runLeader(t, js, repo.dir)
	allDone := func(r planner.Records) bool {
		for _, c := range names {
			if a := r.Clusters[c].Admission; a == nil || a.State != planner.AdmissionDone {
				return false
			}
		}
		return true
	}
	old := waitRecords(t, rkv, "every cluster done", allDone).Rollouts["waves"].Revision
	planned := func() int {
		var d dto.Metric
		if err := m.ClustersPlanned.Write(&d); err != nil {
			t.Fatal(err)
		}
		return int(d.GetCounter().GetValue())
	}
	before := planned()
	repo.write("classes/waves.yaml", fmt.Sprintf(wavesClass, "\n            provisioningDelayMax: 12ms"))
	repo.commit("waves: provisioning takes up to 12ms")
	waitRecords(t, rkv, "the new template everywhere", func(r planner.Records) bool {
		rev := r.Rollouts["waves"].Revision
		if rev == old {
			return false
		}
		for _, c := range names {
			if a := r.Clusters[c].Admission; a == nil || a.State != planner.AdmissionDone || a.Revision != rev {
				return false
			}
		}
		return true
	})
	got := planned() - before
	t.Logf("%d cluster plans for a rollout over %d clusters", got, len(names))
	// Each cluster is planned for its own events (a replacement's create,
	// its delete, and the admissions): ~42 here. Planning the whole class
	// whenever a cluster's summary moved took ~99.
	if limit := 7 * len(names); got > limit {
		t.Errorf("%d cluster plans for a rollout over %d clusters, want at most %d", got, len(names), limit)
	}
}
