package reconciler

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/gitfleet/gitfleet/capi"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/schemas/wire"
)

// TestImportedClusterComesUp: Cluster API's quick start, converted by
// gitfleet import capi for the inmemory provider and committed as it is,
// is brought up by the daemon: the development cluster's control-plane
// machine, three workers of its topology and the two of its standalone
// MachineDeployment run, at the cluster's version.
func TestImportedClusterComesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon's parts with an embedded NATS server")
	}
	inputs, err := capi.ReadInputs([]string{filepath.Join("..", "capi", "testdata", "v1beta2")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := capi.Import(inputs, capi.Options{Provider: "inmemory"})
	if err != nil {
		t.Fatal(err)
	}
	repo := &benchRepo{tb: t, dir: t.TempDir()}
	repo.git("init", "-q", "-b", "main")
	for name, data := range res.Files {
		repo.write(name, string(data))
	}
	repo.commit("import Cluster API's quick start")
	startBenchDaemon(t, repo.dir, 1)
	g, err := git.PlainOpen(repo.dir)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	last := "no status yet"
	for time.Now().Before(deadline) {
		s, err := status.Read(g, "gitfleet/status")
		if err == nil {
			running, total := 0, 0
			for _, m := range s.Observed() {
				if m.Cluster == "development" {
					total++
					if m.Phase == wire.PhaseRunning && m.Version == "v1.33.0" {
						running++
					}
				}
			}
			if running == 6 && total == 6 {
				return
			}
			last = fmtCounts(running, total)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the imported cluster did not come up within a minute: %s", last)
}

func fmtCounts(running, total int) string {
	return fmt.Sprintf("%d of %d machines Running at v1.33.0 (want 6 of 6)", running, total)
}
