package dashboard

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	git "github.com/go-git/go-git/v5"

	"github.com/gitfleet/gitfleet/reconciler/status"
)

// TestPagesInABrowser is make test's short browser test (the long one,
// over gitfleet up, is make browser-test): a headless Chromium reads the
// rollouts page of a halted rollout, moves through it with the keyboard,
// and sees the page follow a status commit that releases the rollout,
// without a reload. It skips, saying why, where Chromium cannot be found
// or started (make chromium installs Debian's package).
func TestPagesInABrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skipf("skipped: no chromium to drive (%v); make chromium installs Debian's package", err)
	}
	repo, w := haltedRepo(t)
	srv := httptest.NewServer(Handler(Options{Poll: 50 * time.Millisecond,
		Source: Branch(func() (*git.Repository, error) { return repo, nil }, "gitfleet/status")}))
	t.Cleanup(srv.Close)

	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(412, 915))...) // a phone's width
	defer cancel()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/rollouts")); err != nil {
		if strings.Contains(err.Error(), "exec") || strings.Contains(err.Error(), "websocket") {
			t.Skipf("skipped: chromium could not be started: %v", err)
		}
		t.Fatal(err)
	}
	eval := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return s
	}
	text := func(sel string) string {
		return eval(`(document.querySelector(` + strconv.Quote(sel) + `) || {textContent: ""}).textContent`)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(".halted"))); err != nil {
		t.Fatal(err)
	}
	if got := text(".halted"); !strings.HasPrefix(got, "Halted: 1 of maxFailures 1 clusters failed (zz-canary)") {
		t.Errorf("the halted banner: %q", got)
	}
	if got := text(".waves li h3"); got != "Wave canary halted" {
		t.Errorf("the failing wave's heading: %q", got)
	}
	if got := text("main"); !strings.Contains(got, "aa-prod: Waiting — rollout of class standard halted") {
		t.Errorf("the waiting cluster:\n%s", got)
	}
	// The content security policy lets the page's own style sheet in
	// (the live updates below show its script and fetches are let in).
	if got := eval(`String(document.styleSheets.length > 0 && document.styleSheets[0].cssRules.length > 0)`); got != "true" {
		t.Errorf("the style sheet did not load under the content security policy")
	}
	// Keyboard: the first Tab reaches the skip link, the next ones the
	// navigation; nothing is wider than the phone's screen but tables,
	// which scroll in their own box.
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\t")); err != nil {
		t.Fatal(err)
	}
	if got := eval(`document.activeElement.textContent`); got != "Skip to content" {
		t.Errorf("the first Tab focuses %q, want the skip link", got)
	}
	if wide := eval(`String(document.documentElement.scrollWidth > window.innerWidth)`); wide != "false" {
		t.Errorf("the page is wider than a phone's screen")
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), "rollouts-phone.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}

	// The class is fixed: zz-canary done, the rollout goes on into prod.
	marker := eval(`window.gitfleetLoaded = String(Date.now())`)
	if err := w.SetCluster(status.ClusterStatus{Name: "zz-canary", Class: "standard", Phase: "Provisioned",
		Rollout: &status.Rollout{ClassRevision: "f1x", Wave: "canary", State: "Done"}}, status.Origin{}); err != nil {
		t.Fatal(err)
	}
	w.SetFleet(status.FleetStatus{Rollouts: []status.ClassRollout{{Class: "standard", Revision: "f1x", MaxFailures: 1, CurrentWave: "prod",
		Reason: "wave prod: 0 of 1 clusters done", Waves: []status.WaveRollout{{Name: "canary", Clusters: 1, Done: 1}, {Name: "prod", Clusters: 1, Updating: 1}}}}}, status.Origin{})
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		page := text("main")
		if strings.Contains(page, "zz-canary: Done") && !strings.Contains(page, "Halted") && strings.Contains(page, "wave prod: 0 of 1 clusters done") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not follow the status commit:\n%s", page)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := eval(`window.gitfleetLoaded || "reloaded"`); got != marker {
		t.Errorf("the page reloaded (%q): live updates swap the content in place", got)
	}
	if got := text("#live"); !strings.HasPrefix(got, "Updated ") {
		t.Errorf("the live region says %q, want Updated …", got)
	}
}
