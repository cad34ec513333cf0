package history_test

import (
	"bytes"
	"io/fs"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/gitfleet/gitfleet/fixtures"
	"github.com/gitfleet/gitfleet/internal/gittest"
	"github.com/gitfleet/gitfleet/reconciler/history"
	"github.com/gitfleet/gitfleet/reconciler/status"
	"github.com/gitfleet/gitfleet/sources"
)

// initFiles is the example fleet as a map for gittest.
func initFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := fs.WalkDir(fixtures.Init(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fixtures.Init(), p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func replicas(t *testing.T, files map[string]string, from, to string) map[string]string {
	t.Helper()
	f := files["clusters/dev-1.yaml"]
	if !strings.Contains(f, "replicas: "+from) {
		t.Fatalf("dev-1.yaml has no replicas: %s", from)
	}
	f = strings.Replace(f, "replicas: "+from, "replicas: "+to, 1)
	files["clusters/dev-1.yaml"] = f
	return map[string]string{"clusters/dev-1.yaml": f}
}

// statusWriter opens work with go-git and a status writer on it that
// commits when flushed; the writer is closed when t ends.
func statusWriter(t *testing.T, work *gittest.Repo) (*git.Repository, *status.Writer) {
	t.Helper()
	g, err := git.PlainOpen(work.Dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := status.NewWriter(t.Context(), status.Options{Repo: g, Interval: time.Hour, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return g, w
}

// A commit the daemon refused (its status branch says so) and one that
// does not validate are marked refused, with why, and never become the
// base of the next commit's diff.
func TestRefusedCommitsAreNeverTheBase(t *testing.T) {
	work := gittest.NewRepo(t)
	files := initFiles(t)
	first := work.Commit("initial fleet", files)
	unsigned := work.Commit("scale to 6 (unsigned)", replicas(t, files, "2", "6"))
	work.Commit("scale to many", replicas(t, files, "6", "many"))
	fixed := work.Commit("scale to 5", replicas(t, files, "many", "5"))

	g, w := statusWriter(t, work)
	w.SetFleet(status.FleetStatus{LastApplied: &status.SourceCommit{Commit: first},
		LastRejected: &status.Rejection{SourceCommit: status.SourceCommit{Commit: unsigned}, Errors: []string{"commit is not signed"}}},
		status.Origin{SourceCommit: unsigned})
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	src, err := sources.Open(t.Context(), sources.Options{Location: work.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	log, err := history.Read(t.Context(), g, src, history.Options{Cluster: "dev-1"})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Subject string
		Refused string
		Changes []string
	}
	var got []row
	for _, c := range log.Commits {
		r := row{Subject: c.Subject}
		if c.Refused != nil {
			r.Refused = c.Refused.By + ": " + strings.Join(c.Refused.Reasons, "; ")
		}
		for _, ch := range c.Changes {
			r.Changes = append(r.Changes, ch.String())
		}
		got = append(got, r)
	}
	const path = "cluster dev-1: spec.topology.workers.machineDeployments[md-0].replicas: "
	want := []row{
		{Subject: "scale to 5", Changes: []string{path + "2 → 5"}},
		{Subject: "scale to many", Refused: "validation: clusters/dev-1.yaml"},
		{Subject: "scale to 6 (unsigned)", Refused: "daemon: commit is not signed", Changes: []string{path + "2 → 6"}},
		{Subject: "initial fleet", Changes: []string{"class standard created", "cluster dev-1 created"}},
	}
	for i := range got {
		if i < len(want) && strings.HasPrefix(got[i].Refused, want[i].Refused) && want[i].Refused != "" {
			got[i].Refused = want[i].Refused // the validation message itself is schemas' to word
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history of dev-1 (-want +got):\n%s", diff)
	}
	if log.Commits[0].Commit != fixed {
		t.Errorf("newest commit %s, want %s", log.Commits[0].Commit, fixed)
	}
	var text bytes.Buffer
	if err := log.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "refused by the daemon, never applied:\n    commit is not signed\n  it would have changed:\n") {
		t.Errorf("text does not mark the daemon's refusal:\n%s", text.String())
	}
}

// A commit refused because a kustomize overlay's patch broke a cluster is
// in that cluster's history: its error names the patch file, where the
// value is written, not the cluster's file. A commit that broke another
// cluster is not.
func TestOverlayPatchRefusalIsInTheClusterHistory(t *testing.T) {
	work := gittest.NewRepo(t)
	files := initFiles(t)
	files["clusters/edge/base/kustomization.yaml"] = "resources: [cluster.yaml]\n"
	files["clusters/edge/base/cluster.yaml"] = strings.ReplaceAll(files["clusters/dev-1.yaml"], "dev-1", "edge")
	work.Commit("initial fleet", files)
	work.Commit("dev-1: scale to many", replicas(t, files, "2", "many"))
	work.Commit("dev-1: scale to 3", replicas(t, files, "many", "3"))
	work.Commit("edge: prod overlay on v1.31", map[string]string{
		"clusters/edge/overlays/prod/kustomization.yaml": "resources: [../../base]\npatches:\n- path: version.yaml\n",
		"clusters/edge/overlays/prod/version.yaml":       "apiVersion: gitfleet.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: edge\nspec:\n  topology:\n    version: v1.31\n",
	})

	g, err := git.PlainOpen(work.Dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := sources.Open(t.Context(), sources.Options{Location: work.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	log, err := history.Read(t.Context(), g, src, history.Options{Cluster: "edge"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range log.Commits {
		row := c.Subject
		if c.Refused != nil {
			row += " — refused: " + strings.Join(c.Refused.Reasons, "; ")
		}
		got = append(got, row)
	}
	want := []string{
		`edge: prod overlay on v1.31 — refused: clusters/edge/overlays/prod/version.yaml:7:14: spec.topology.version: "v1.31" is not a Kubernetes version like v1.31.2 (a kustomize patch sets it on clusters/edge/base/cluster.yaml)`,
		"initial fleet",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history of edge (-want +got):\n%s", diff)
	}
}
