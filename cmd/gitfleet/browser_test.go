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
// the history page prod-1's trail; a class bump rolls wave by wave, and
// a failing one halts in the first wave with its reason. It asserts on the pages' text; the
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
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`).textContent`))
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

	// A class bump that reaches both clusters, wave by wave, watched on
	// the rollouts page: dev-1 progresses while prod-1 waits for its wave,
	// then both are done, and the page never reloads.
	visit("/rollouts", "h1")
	if page := text("main"); !strings.Contains(page, "Class standard") {
		t.Errorf("the rollouts page:\n%s", page)
	}
	loaded, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.gitfleetLoaded = String(Date.now())`))
	if err != nil {
		t.Fatal(err)
	}
	e.edit("clusters/prod-1.yaml", func(s string) string { return strings.Replace(s, "    version: v1.31.2\n", "", 1) })
	// Machines that take 3 s to boot: each wave lasts long enough to be seen.
	e.edit("classes/standard.yaml", func(s string) string {
		s = strings.Replace(s, "  version: v1.31.2", "  version: v1.32.0", 1)
		s = strings.Replace(s, "        memory: 2Gi\n", "        memory: 2Gi\n        startupDelay: 3s\n", 1)
		return strings.Replace(s, "            memory: 4Gi\n", "            memory: 4Gi\n            startupDelay: 3s\n", 1)
	})
	e.commit("Carol", "standard: v1.32.0 for both")
	waitText := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		for {
			page := text("main")
			if ok(page) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the rollouts page did not show %s within 3 minutes:\n%s", what, page)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitText("dev-1 progressing while prod-1 waits", func(p string) bool {
		return strings.Contains(p, "dev-1: Progressing") && strings.Contains(p, "prod-1: Waiting")
	})
	shot("rollouts-waiting")
	waitText("both clusters done at the new revision", func(p string) bool {
		return strings.Contains(p, "dev-1: Done") && strings.Contains(p, "prod-1: Done") && !strings.Contains(p, "Waiting")
	})
	shot("rollouts")
	if still, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.gitfleetLoaded || "reloaded"`)); err != nil || still != loaded {
		t.Errorf("the page reloaded (%q, was %q): live updates must swap the content in place", still, loaded)
	}

	// A class change whose workers cannot be made (an inmemory template
	// that always fails) fails dev-1, and the rollout halts before prod:
	// the page says Halted, why, and what started it, without a reload.
	// (inmemory machines send no heartbeats: prod-1's check for them goes
	// first, or the change is refused.)
	e.edit("clusters/prod-1.yaml", func(s string) string {
		return strings.Replace(s, "      - type: Ready\n        status: Unknown\n        timeoutSeconds: 30\n", "", 1)
	})
	e.commit("Dave", "prod-1: no heartbeat check of workers")
	e.edit("classes/standard.yaml", func(s string) string {
		s = strings.Replace(s, "          provider: local\n          spec:\n            cpus: 2\n            memory: 4Gi\n            startupDelay: 3s\n",
			"          provider: inmemory\n          spec:\n            failureRate: 1\n", 1)
		return s[:strings.Index(s, "  patches:\n")] + s[strings.Index(s, "  rollout:\n    # A class change"):]
	})
	e.commit("Dave", "standard: workers on a template that fails")
	waitText("the rollout halted in wave dev, prod-1 held", func(p string) bool {
		return strings.Contains(p, "Halted: 1 of maxFailures 1 clusters failed (dev-1)") && strings.Contains(p, "dev-1: Failed") &&
			strings.Contains(p, "prod-1: Waiting — rollout of class standard halted") && strings.Contains(p, "standard: workers on a template that fails")
	})
	if halted := text(".waves li h3"); !strings.Contains(halted, "Wave dev") || !strings.Contains(halted, "halted") {
		t.Errorf("the first wave's heading: %q", halted)
	}
	shot("rollouts-halted")
	if still, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.gitfleetLoaded || "reloaded"`)); err != nil || still != loaded {
		t.Errorf("the page reloaded while the rollout halted (%q, was %q)", still, loaded)
	}
	visit("/history?cluster=prod-1", "h1")
	if page := text("main"); !strings.Contains(page, "History of prod-1") {
		t.Errorf("prod-1's history:\n%s", page)
	}
	shot("history")
}
