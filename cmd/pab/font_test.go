package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/internal/browser/cdpalloc"
)

// replayChrome starts headless Chromium through the replay proxy at addr with pab
// browser's own arguments (trusting pab's CA by its SPKI hash), plus extra allocator
// options, and returns a context with a 60 s deadline for the test's actions. Chromium is
// stopped when the test ends.
func replayChrome(t *testing.T, addr string, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	chrome := chromiumPath(t) // fails instead of skipping when CI=true
	spki := strings.TrimSpace(run(t, pabCmd("ca", "--spki")))
	opts := cdpalloc.Options(chrome, browser.Options{Proxy: addr, SPKI: spki, Profile: t.TempDir()})
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // start the browser without a deadline
		t.Fatalf("start chromium: %v", err)
	}
	nctx, ncancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(ncancel)
	return nctx
}

// TestChromiumWebFontLoads opens the replayed books.toscrape.com home page in headless
// Chromium and checks, over CDP, that after document.fonts.ready the page's FontAwesome
// @font-face has status "loaded" and that no font face failed. Before issue 13 the WOFF was
// served with the two CRLF bytes node-warc counts into the record (43,574 bytes of a
// 43,572-byte font), which Chromium's font sanitizer rejects: status "error". A webfont's
// status does not depend on the fonts installed on the machine; Chromium still runs with
// a fontconfig that knows only DejaVu, so a system FontAwesome cannot stand in for it.
func TestChromiumWebFontLoads(t *testing.T) {
	p := startReplay(t, "books-sapiens-price")
	fc := filepath.Join(t.TempDir(), "fonts.conf")
	conf := `<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd"><fontconfig>` +
		`<dir>/usr/share/fonts/truetype/dejavu</dir><cachedir>` + filepath.Join(t.TempDir(), "fc-cache") + `</cachedir></fontconfig>`
	if err := os.WriteFile(fc, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	nctx := replayChrome(t, p.addr, chromedp.Env("FONTCONFIG_FILE="+fc))
	const page = "http://books.toscrape.com/"
	if resp, err := chromedp.RunResponse(nctx, chromedp.Navigate(page)); err != nil || resp.Status != 200 {
		t.Fatalf("navigate %s: %v %v", page, resp, err)
	}
	type face struct {
		Family string `json:"family"`
		Status string `json:"status"`
	}
	faces, err := chromedp.Run(nctx, chromedp.Evaluate[[]face](`document.fonts.ready.then(() =>
		Array.from(document.fonts, f => ({family: f.family.replace(/["']/g, ""), status: f.status})))`,
		func(p *runtime.EvaluateParams) { await := true; p.AwaitPromise = &await }))
	if err != nil {
		t.Fatalf("evaluate document.fonts: %v", err)
	}
	t.Logf("document.fonts: %+v", faces)
	var fa bool
	for _, f := range faces {
		if f.Status == "error" {
			t.Errorf("font face %q failed to load", f.Family)
		}
		if f.Family == "FontAwesome" {
			fa = true
			if f.Status != "loaded" {
				t.Errorf("FontAwesome face status %q, want loaded", f.Status)
			}
		}
	}
	if !fa {
		t.Errorf("document.fonts has no FontAwesome face: %+v", faces)
	}
	chromedp.Cancel(nctx) // Chromium closes before the replay stops, so the log is whole
	p.stop(t)
	for _, l := range p.readLog(t) {
		if strings.Contains(l.URL, "fontawesome-webfont.woff") && (l.Source != "exact" || l.Status != 200) {
			t.Errorf("font request %s answered %s %s", l.URL, l.Source, strconv.Itoa(l.Status))
		}
	}
}
