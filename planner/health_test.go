package planner

import (
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestUnhealthyAtIsWhenUnhealthyTurns: UnhealthyAt names the instant the
// health checks first find a machine unhealthy by time alone — healthy a
// nanosecond before, unhealthy at it — and nothing for a machine no check
// selects, or one whose timeouts have all run out.
func TestUnhealthyAtIsWhenUnhealthyTurns(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	dc := &DesiredCluster{Name: "c1",
		ControlPlane: Pool{Labels: map[string]string{"role": "cp"}},
		Deployments:  []Pool{{Name: "md-0", Labels: map[string]string{"pool": "md-0"}}},
		HealthChecks: []HealthCheck{
			{Name: "workers", Selector: v1alpha1.LabelSelector{MatchLabels: map[string]string{"pool": "md-0"}},
				NodeStartupTimeout: 10 * time.Minute, HeartbeatTimeout: 30 * time.Second, NotReadyTimeout: time.Minute},
			{Name: "slow", Selector: v1alpha1.LabelSelector{MatchLabels: map[string]string{"pool": "md-0"}},
				HeartbeatTimeout: 5 * time.Minute},
		}}
	worker := func(phase wire.Phase) ObservedMachine {
		return ObservedMachine{Name: "c1-md-0-a", Cluster: "c1", Deployment: "md-0", Role: wire.RoleWorker, Phase: phase, Created: t0}
	}
	silent := worker(wire.PhaseRunning)
	silent.LastHeartbeat = t0.Add(time.Second)
	heard := silent
	heard.LastHeartbeat, heard.Healthy = t0.Add(time.Minute), true
	notReady := heard
	notReady.Healthy, notReady.UnhealthySince = false, t0.Add(70*time.Second)
	cp := ObservedMachine{Name: "c1-cp-a", Cluster: "c1", Role: wire.RoleControlPlane, Phase: wire.PhaseRunning, Created: t0}
	for _, tc := range []struct {
		name string
		m    ObservedMachine
		now  time.Time
		want time.Time // zero: none
	}{
		{"starting", worker(wire.PhaseProvisioning), t0.Add(time.Minute), t0.Add(10 * time.Minute)},
		{"starting past its startup timeout", worker(wire.PhaseProvisioning), t0.Add(11 * time.Minute), time.Time{}},
		{"running, never heard from", worker(wire.PhaseRunning), t0.Add(time.Second), t0.Add(30 * time.Second)},
		{"running, silent since", silent, t0.Add(10 * time.Second), t0.Add(31 * time.Second)},
		{"running, heard from", heard, t0.Add(70 * time.Second), t0.Add(90 * time.Second)},
		{"past the first check's timeout, the second's", silent, t0.Add(time.Minute), t0.Add(5*time.Minute + time.Second)},
		{"past every timeout", silent, t0.Add(time.Hour), time.Time{}},
		{"not ready, heard from", notReady, t0.Add(80 * time.Second), t0.Add(90 * time.Second)},
		{"not ready, past the heartbeat timeout", notReady, t0.Add(100 * time.Second), t0.Add(130 * time.Second)},
		{"selected by no check", cp, t0.Add(time.Second), time.Time{}},
		{"deleting", worker(wire.PhaseDeleting), t0.Add(time.Second), time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := UnhealthyAt(&tc.m, dc, tc.now)
			want := tc.want
			if !want.IsZero() {
				want = want.Add(time.Nanosecond)
			}
			if !got.Equal(want) {
				t.Fatalf("UnhealthyAt at %v: %v, want %v", tc.now.Sub(t0), got.Sub(t0), want.Sub(t0))
			}
			if got.IsZero() {
				return
			}
			// Between now and then the verdict stays; at it, the machine
			// is unhealthy.
			before, _ := unhealthy(&tc.m, dc, tc.now)
			if just, _ := unhealthy(&tc.m, dc, got.Add(-time.Nanosecond)); (just == "") != (before == "") {
				t.Errorf("a nanosecond before %v: unhealthy %q, at %v %q", got.Sub(t0), just, tc.now.Sub(t0), before)
			}
			if at, _ := unhealthy(&tc.m, dc, got); at == "" {
				t.Errorf("at %v: healthy, want unhealthy", got.Sub(t0))
			}
		})
	}
}
