package natstest

import (
	"net"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/freeport"
)

// recorder is a testing.TB that keeps what StartCluster logs.
type recorder struct {
	testing.TB
	logs []string
}

func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, format)
	r.TB.Logf(format, args...)
}

// TestStartClusterGetsOverATakenRoutePort: when a route port is taken
// between being chosen and being bound, StartCluster starts the servers
// again on other ports and the cluster forms.
func TestStartClusterGetsOverATakenRoutePort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nats-servers, twice")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	pickRoutePorts = func(tb testing.TB, n int) []int {
		calls++
		ports := freeport.Ports(tb, n)
		if calls == 1 {
			ports[1] = taken.Addr().(*net.TCPAddr).Port
		}
		return ports
	}
	defer func() { pickRoutePorts = freeport.Ports }()
	r := &recorder{TB: t}
	srvs := StartCluster(r, 3)
	if calls != 2 {
		t.Errorf("ports were chosen %d times, want 2 (once again after the taken port)", calls)
	}
	if len(r.logs) != 1 || !strings.Contains(r.logs[0], "starting it again") {
		t.Errorf("logged %q, want one line saying the cluster is started again", r.logs)
	}
	if !allPeersOnline(srvs) {
		t.Error("the servers returned are not one cluster with every peer online")
	}
}
