package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardInABrowser (make browser-test; make screenshots keeps the
// pictures for docs/dashboard.md) drives a headless Chromium over the
// dashboard of gitfleet up on the demo fleet: the fleet page lists both
// clusters, prod-1's page its control plane, the rollouts page its class,
// the history page prod-1's trail. It asserts on the pages' text; the
// screenshots are saved, not compared.
func TestDashboardInABrowser(t *testing.T) {
	if os.Getenv("BROWSER_TEST") == "" {
		t.Skip("runs with make browser-test or make screenshots (BROWSER_TEST=1): it drives a headless Chromium")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skipf("skipped: no chromium to drive (%v); make browser-test installs Debian's package", err)
	}
	shots := os.Getenv("SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	e := newE2E(t)
	e.start()
	e.waitConverged("initial fleet", fleetWant{"dev-1": {3, "v1.31.2"}, "prod-1": {6, "v1.31.2"}})

	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1200, 900))...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	base := "http://" + e.listen
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: a PNG
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`).innerText`))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	visit := func(path, sel string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}

	// The fleet page lists both clusters.
	visit("/", "#clusters")
	if list := text("#clusters"); !strings.Contains(list, "dev-1") || !strings.Contains(list, "prod-1") {
		t.Fatalf("the fleet page lists:\n%s", list)
	}
	shot("fleet")
	visit("/clusters/prod-1", "h1")
	if page := text("main"); !strings.Contains(page, "Control plane: 3 of 3 ready") {
		t.Errorf("prod-1's page:\n%s", page)
	}
	shot("cluster")

	visit("/rollouts", "h1")
	if page := text("main"); !strings.Contains(page, "Class standard") {
		t.Errorf("the rollouts page:\n%s", page)
	}
	shot("rollouts")
	visit("/history?cluster=prod-1", "h1")
	if page := text("main"); !strings.Contains(page, "History of prod-1") {
		t.Errorf("prod-1's history:\n%s", page)
	}
	shot("history")
}
