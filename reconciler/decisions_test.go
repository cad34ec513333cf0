package reconciler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gitfleet/gitfleet/planner"
	"github.com/gitfleet/gitfleet/providers"
	"github.com/gitfleet/gitfleet/providers/inmemory"
	"github.com/gitfleet/gitfleet/providers/natsbus/natstest"
	"github.com/gitfleet/gitfleet/schemas/wire"
	"github.com/gitfleet/gitfleet/sources"
)

// wavesClass rolls out to the canary cluster first, then to the others one
// at a time. %s is the worker template's extra spec.
const wavesClass = `apiVersion: gitfleet.io/v1alpha1
kind: ClusterClass
metadata:
  name: waves
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
            provisioningDelay: 10ms%s
  rollout:
    waves:
      - name: canary
        selector:
          matchLabels: {tier: canary}
      - name: rest
        selector: {}
        maxConcurrent: 1
`

const wavesCluster = `apiVersion: gitfleet.io/v1alpha1
kind: Cluster
metadata:
  name: %s
  labels: {tier: %s}
spec:
  topology:
    classRef: {name: waves}
    workers:
      machineDeployments:
        - class: worker
          name: md
          replicas: 1
`

// TestNewLeaderContinuesRollout: the admissions and failures of a rollout
// are in the rollouts bucket, so a new leader continues the halted rollout
// instead of starting it again: it admits no cluster again, forgets no
// failure, and gives the later waves no task.
func TestNewLeaderContinuesRollout(t *testing.T) {
	repo := &benchRepo{tb: t, dir: t.TempDir()}
	repo.git("init", "-q", "-b", "main")
	repo.write("classes/waves.yaml", fmt.Sprintf(wavesClass, ""))
	for _, c := range [][2]string{{"canary", "canary"}, {"prod-a", "prod"}, {"prod-b", "prod"}} {
		repo.write("clusters/"+c[0]+".yaml", fmt.Sprintf(wavesCluster, c[0], c[1]))
	}
	repo.commit("a fleet in two waves")
	js, rkv := inmemoryCloud(t)

	stopA, metricsA := runLeader(t, js, repo.dir)
	waitRecords(t, rkv, "every cluster done", func(r planner.Records) bool {
		for _, c := range []string{"canary", "prod-a", "prod-b"} {
			if a := r.Clusters[c].Admission; a == nil || a.State != planner.AdmissionDone {
				return false
			}
		}
		return true
	})

	// A worker template whose machines always fail: the rollout halts on
	// the canary.
	repo.write("classes/waves.yaml", fmt.Sprintf(wavesClass, "\n            failureRate: 1"))
	repo.commit("waves: a worker template that fails")
	halted := waitRecords(t, rkv, "the rollout halted on the canary", func(r planner.Records) bool {
		rr := r.Rollouts["waves"]
		return len(rr.Failed) == 1 && rr.Failed[0].Cluster == "canary"
	})
	stopA()
	if n := counter(t, metricsA.CreateFailures.WithLabelValues("waves", "inmemory")); n < 1 {
		t.Errorf("gitfleet_machine_create_failures_total{class=waves,provider=inmemory} = %v, want the canary's failure", n)
	}

	stopB, metricsB := runLeader(t, js, repo.dir)
	defer stopB()
	// The new leader plans from its records, then asks the workers for
	// their inventories: whatever it would do wrongly it has done once it
	// has planned and taken the inventory in. (Waiting for a second plan
	// instead depended on the canary's backoff outlasting the first: on a
	// loaded machine it did not, and with the rollout halted nothing else
	// needs a plan.)
	deadline := time.Now().Add(time.Minute)
	for histogramCount(t, metricsB.PlanDuration) < 1 || counter(t, metricsB.Inventories.WithLabelValues("inmemory")) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the new leader did not plan and take an inventory in within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	after := readRecords(t, rkv)
	if a, b := halted.Rollouts["waves"], after.Rollouts["waves"]; !a.Equal(b) {
		t.Errorf("the new leader changed the rollout:\nbefore %+v\nafter  %+v", a, b)
	}
	if a, b := halted.Clusters["canary"].Admission, after.Clusters["canary"].Admission; a == nil || b == nil || !a.AdmittedAt.Equal(b.AdmittedAt) || b.State != planner.AdmissionFailed {
		t.Errorf("the new leader admitted the canary again: before %+v, after %+v", a, b)
	}
	for _, c := range []string{"prod-a", "prod-b"} {
		if a := after.Clusters[c].Admission; a == nil || a.Revision == halted.Rollouts["waves"].Revision {
			t.Errorf("%s admitted to the halted revision: %+v", c, a)
		}
	}
	mkv, err := js.KeyValue(t.Context(), wire.BucketMachines)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := mkv.Keys(t.Context())
	perCluster := map[string]int{}
	for _, k := range keys {
		perCluster[strings.SplitN(k, ".", 2)[0]]++
	}
	if perCluster["prod-a"] != 2 || perCluster["prod-b"] != 2 {
		t.Errorf("later waves got tasks: machines per cluster %v", perCluster)
	}
}

// runLeader runs a reconciler on the repository until the returned stop.
// inmemoryCloud is a NATS server with one inmemory worker; it returns the
// server's JetStream and the rollouts bucket.
func inmemoryCloud(t *testing.T) (jetstream.JetStream, jetstream.KeyValue) {
	t.Helper()
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv.ClientURL())
	ctx := t.Context()
	cloud, err := inmemory.New(ctx, js, inmemory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := providers.NewWorker(ctx, js, cloud, providers.WorkerOptions{Concurrency: 8, Log: testLog(t, "worker")})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.Run(ctx) }()
	rkv, err := js.KeyValue(ctx, wire.BucketRollouts)
	if err != nil {
		t.Fatal(err)
	}
	return js, rkv
}

func runLeader(t *testing.T, js jetstream.JetStream, dir string, with ...func(*Options)) (func(), *Metrics) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	log := testLog(t, "daemon")
	repo, err := sources.Open(ctx, sources.Options{Location: dir})
	if err != nil {
		t.Fatal(err)
	}
	src, err := sources.Watch(ctx, repo, sources.WatchOptions{Branch: "main", Interval: 200 * time.Millisecond, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(nil)
	o := Options{Revisions: src.Revisions(), JS: js, Log: log, Metrics: m, RetryInterval: 200 * time.Millisecond}
	for _, f := range with {
		f(&o)
	}
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		_ = src.Close()
		_ = repo.Close()
	}
	t.Cleanup(stop)
	return stop, m
}

func readRecords(t *testing.T, kv jetstream.KeyValue) planner.Records {
	t.Helper()
	recs := planner.Records{Clusters: map[string]planner.ClusterRecord{}, Rollouts: map[string]planner.RolloutRecord{}}
	keys, err := kv.Keys(t.Context())
	if err != nil && err != jetstream.ErrNoKeysFound {
		t.Fatal(err)
	}
	for _, k := range keys {
		e, err := kv.Get(t.Context(), k)
		if err != nil {
			continue
		}
		if err := decodeDecision(k, e.Value(), &recs); err != nil {
			t.Fatal(err)
		}
	}
	return recs
}

func waitRecords(t *testing.T, kv jetstream.KeyValue, what string, cond func(planner.Records) bool) planner.Records {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r := readRecords(t, kv)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 2 minutes; records %+v", what, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
