package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/browser/cdpalloc"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/task"
)

// TestRecordCaptureThroughBrowser (issue 21, seed 003): headless Chromium whose language
// is de-CH records the test shop through `pab record` on a machine whose zone is
// Asia/Tokyo (TZ); the recording's manifest and task.yaml's capture get locale de-CH (the
// browser's first Accept-Language tag) and timezone Asia/Tokyo, as printed at the start;
// then `pab browser` (run with TZ=UTC and no language of its own) replays the task, and a
// page in its real headless Chromium reports Intl...timeZone Asia/Tokyo and
// navigator.language de-CH.
func TestRecordCaptureThroughBrowser(t *testing.T) {
	chrome := chromiumPath(t)
	srv, siteCA := testShop(t)
	repo := t.TempDir()
	copyTree(t, filepath.Join(repoRoot, "sites"), filepath.Join(repo, "sites"))
	p := startRecordWith(t, repo, srv, siteCA, []string{"TZ=Asia/Tokyo"}, "--task", "capture-demo")
	if !strings.Contains(p.stderr.String(), "time zone Asia/Tokyo (from TZ") {
		t.Errorf("the start does not print the time zone:\n%s", p.stderr)
	}
	// real Chromium browsing in German (Switzerland)
	spki := strings.TrimSpace(run(t, pabCmd("ca", "--spki")))
	opts := append(cdpalloc.Options(chrome, browser.Options{Proxy: p.addr, SPKI: spki, Profile: t.TempDir(), Locale: "de-CH"}),
		chromedp.Flag("accept-lang", "de-CH,de"))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	tctx, tcancel := context.WithTimeout(ctx, 90*time.Second)
	err := chromedp.Do(tctx, chromedp.Navigate("https://shop.test/"), chromedp.WaitVisible(chromedp.ID("go")))
	tcancel()
	cancel()
	cancelAlloc()
	if err != nil {
		t.Fatalf("browse through pab record: %v", err)
	}
	p.stop(t)
	if !strings.Contains(p.stderr.String(), "locale de-CH (the browser's Accept-Language), time zone Asia/Tokyo") {
		t.Errorf("the end does not say the capture's locale and zone:\n%s", p.stderr)
	}
	taskDir := filepath.Join(repo, "tasks", "capture-demo")
	bundle := filepath.Join(t.TempDir(), "b")
	if err := recording.Unpack(filepath.Join(taskDir, "recording"), bundle); err != nil {
		t.Fatal(err)
	}
	b, err := recording.OpenBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	m := b.Manifest
	b.Close()
	if m.Locale != "de-CH" || m.Timezone != "Asia/Tokyo" {
		t.Errorf("manifest locale %q timezone %q, want de-CH Asia/Tokyo", m.Locale, m.Timezone)
	}
	card, err := (&task.Task{Repo: &task.Repo{Root: repo}, ID: "capture-demo", Dir: taskDir}).Card()
	if err != nil {
		t.Fatal(err)
	}
	if c := card.Capture; c == nil || c.Locale != "de-CH" || c.Timezone != "Asia/Tokyo" {
		t.Errorf("task.yaml capture %+v, want de-CH Asia/Tokyo", card.Capture)
	}

	// pab browser: Chromium gets --lang and TZ from the capture
	cmd := pabIn(repo, "browser", "capture-demo", "--chrome", chrome)
	cmd.Env = append(cmd.Env, "TZ=UTC", "LANG=C", "LANGUAGE=")
	ws, stderr := startPabBrowser(t, cmd)
	ralloc, cancelR := remote.NewAllocator(context.Background(), ws, remote.NoModifyURL)
	defer cancelR()
	bctx, cancelB := chromedp.NewContext(ralloc)
	defer cancelB()
	pctx, cancelP := context.WithTimeout(bctx, 60*time.Second)
	defer cancelP()
	if err := chromedp.Do(pctx, chromedp.Navigate("https://shop.test/"), chromedp.WaitVisible(chromedp.ID("go"))); err != nil {
		t.Fatalf("replayed page: %v\n%s", err, stderr)
	}
	env, err := chromedp.Run(pctx, chromedp.Evaluate[string](`Intl.DateTimeFormat().resolvedOptions().timeZone + " " + navigator.language`))
	if err != nil {
		t.Fatalf("replayed page: %v\n%s", err, stderr)
	}
	if env != "Asia/Tokyo de-CH" {
		t.Errorf("replayed page's time zone and language %q, want the capture's %q", env, "Asia/Tokyo de-CH")
	}
}
