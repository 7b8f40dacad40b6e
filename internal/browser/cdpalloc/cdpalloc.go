// Package cdpalloc gives chromedp the Chromium command line of internal/browser, for the
// tests, tools/applyfixture and bench/pageload, which drive Chromium through chromedp. It
// is apart from internal/browser so that the lite build of pab (which starts Chromium but
// links no chromedp) does not pull chromedp in.
package cdpalloc

import (
	"strings"

	"github.com/chromedp/chromedp"

	"github.com/pab-dev/pab/internal/browser"
)

// Options turns browser.Args(o, "") into chromedp exec-allocator options for the
// Chromium at exe: chromedp's defaults, then every flag of browser.Args (the debugging port and
// start page are chromedp's own; Profile, when set, is the user data directory), and TZ
// when o.Timezone is set.
func Options(exe string, o browser.Options) []chromedp.ExecAllocatorOption {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe))
	for _, a := range browser.Args(o, "") {
		if !strings.HasPrefix(a, "--") {
			continue // the start page
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		switch {
		case name == "remote-debugging-port":
		case name == "user-data-dir":
			opts = append(opts, chromedp.UserDataDir(value))
		case hasValue:
			opts = append(opts, chromedp.Flag(name, value))
		default:
			opts = append(opts, chromedp.Flag(name, true))
		}
	}
	if o.Timezone != "" {
		opts = append(opts, chromedp.Env("TZ="+o.Timezone))
	}
	return opts
}
