package reconciler

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestReplacementNamesWhatItReplaces: a machine the daemon removes for its
// health gets a replacement whose cause names it and why it went, not the
// pool's count, which reads as the work of whoever wrote the spec commit in
// force. With maxSurge the replacement comes in the pass that deletes the
// machine; without, once its delete has ended.
func TestReplacementNamesWhatItReplaces(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy string
	}{
		{"in the pass that deletes it", ""},
		{"once its delete ended", "\n          rollout: {strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLoop(t, "local", 1, 1)
			l.repo.write("clusters/c1.yaml", fmt.Sprintf(loopCluster, "c1", 1, 1)+tc.strategy)
			// The worker's heartbeats stop: it is remediated a second later.
			l.repo.write("clusters/c1-health.yaml", replaceHealthCheck)
			// Heartbeats every 500ms, so a second's silence is two missed.
			l.repo.write("classes/small.yaml", fastBeats.ReplaceAllString(fmt.Sprintf(loopClass, "local"), "$0${1}spec: {heartbeatInterval: 500ms}\n"))
			l.repo.commit("c1: a health check")
			l.start()
			cp := l.nextTasks(1)[0]
			l.answer(cp, wire.PhaseRunning)
			dead := l.nextTasks(1)[0]
			l.answer(dead, wire.PhaseRunning)
			l.waitRecords("Running Running")
			if err := heartbeat(l.nc, dead.task.Machine, true); err != nil {
				t.Fatal(err)
			}
			var created *Record
			deleted := false
			l.waitFor("a replacement recorded", func() (bool, string) {
				var seen []string
				for _, rec := range l.records() {
					if rec.Name == dead.task.Machine.Name && rec.Phase == wire.PhaseDeleting && !deleted {
						// Its delete ends (with maxSurge, a create may come first).
						for _, task := range l.nextTasks(1) {
							if task.task.Operation == wire.OpDelete {
								l.answer(task, wire.PhaseDeleted)
								deleted = true
							}
						}
					}
					if rec.Role == wire.RoleWorker && rec.Name != dead.task.Machine.Name {
						created = rec
						return true, ""
					}
					seen = append(seen, rec.Name+"="+string(rec.Phase))
				}
				return false, strings.Join(seen, " ")
			})
			want := "replaces " + dead.task.Machine.Name + " (remediated: no heartbeat for "
			if !strings.HasPrefix(created.Cause, want) {
				t.Errorf("replacement %s: cause %q, want %q…", created.Name, created.Cause, want)
			}
		})
	}
}

// fastBeats finds each provider line of a class, to give it a spec.
var fastBeats = regexp.MustCompile(`(?m)^( *)provider: .*\n`)

const replaceHealthCheck = `apiVersion: gitfleet.io/v1alpha1
kind: MachineHealthCheck
metadata: {name: c1-health}
spec:
  clusterName: c1
  selector:
    matchLabels: {gitfleet.io/deployment: md-0}
  checks:
    nodeStartupTimeoutSeconds: 0
    unhealthyNodeConditions: [{type: Ready, status: Unknown, timeoutSeconds: 1}]
`
