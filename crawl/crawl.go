// Package crawl checks a replay with a real browser (pab check --crawl, docs/replay.md):
// it drives Chromium over the Chrome DevTools Protocol through a running replay, opens
// every recorded page and then the same-site links it finds, breadth first, and tells for
// each page whether the browser got what was recorded: the document's answer as replay's
// log names it, compared with the recording, the resources the browser rejected, and the
// body of every answer from the recording as the browser received it, compared with the
// recorded payload (body.go). Typed runs a list of typed URLs against the live site's
// answers a file gives (typed.go). StartReplay serves a bundle on a loopback port for pab
// check, and Replay.Browse and Replay.BrowseTyped start Chromium over it (check.go).
package crawl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"

	"github.com/pab-dev/pab/internal/textcut"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
)

// Defaults and bounds of a crawl.
const (
	// DefaultMaxPages is how many pages a crawl opens at most, recorded ones included.
	DefaultMaxPages = 200
	// DefaultMaxLinks is how many same-site links of one page a crawl follows at most.
	DefaultMaxLinks = 100
	// DefaultPageTimeout bounds one page: its load, its settling and reading its links.
	DefaultPageTimeout = 30 * time.Second

	// quietFor: a loaded page with no request in flight for this long is settled.
	quietFor = 500 * time.Millisecond
	// maxSettle bounds the wait for a loaded page to go quiet.
	maxSettle = 5 * time.Second
	// logWait bounds the wait for replay's log lines of a page's answered requests.
	logWait = 2 * time.Second
	// evalTimeout bounds reading a page's links.
	evalTimeout = 5 * time.Second
	// maxNavigations: a page that navigates by itself more often than this in one visit
	// is a client-side redirect loop.
	maxNavigations = 10
	// maxRequests, maxLogEntries, maxExceptions bound what one visit keeps.
	maxRequests   = 5000
	maxLogEntries = 500
	maxExceptions = 100
	// maxProblems bounds PageResult.Broken; maxNamed the URLs named in a detail.
	maxProblems = 20
	maxNamed    = 5
	// maxLinkScan bounds the links read from one page.
	maxLinkScan = 5000
)

// Options configure Run.
type Options struct {
	// CDP is the ws:// DevTools address of a running Chromium that sends every request
	// through the replay (pab check starts it with pab browser's flags).
	CDP string
	// Bundle is the recording the replay serves.
	Bundle *recording.Bundle
	// Tap receives the replay's log (replay.Options.Log).
	Tap *Tap
	// Seeds are the pages to start from; nil means Seeds(Bundle).
	Seeds []string
	// MaxPages, MaxLinks and PageTimeout bound the crawl; zero means the defaults, and a
	// negative MaxLinks follows no link (only the seeds are opened).
	MaxPages    int
	MaxLinks    int
	PageTimeout time.Duration
	// Progress, when set, is called after each page with the number of pages done and
	// still queued.
	Progress func(done, queued int, p PageResult)
	// Clock is the page clock the replay puts into HTML documents (replay.Server.Clock),
	// nil when it is off: the bodies the browser receives are compared with the recorded
	// payloads as replay serves them, the clock's script included.
	Clock *replay.Clock
}

// queued is a page waiting to be opened.
type queued struct {
	url   string
	depth int
	from  string
}

// Run crawls the replay through the browser at o.CDP and reports every page it opened.
// It opens one page at a time in one tab, with the HTTP cache off and downloads refused.
// It returns an error when the browser cannot be reached, or ctx ends (with the report of
// the pages done so far).
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Bundle == nil || o.Tap == nil || o.CDP == "" {
		return nil, errors.New("crawl: needs a bundle, a log tap and a browser")
	}
	if o.MaxPages <= 0 {
		o.MaxPages = DefaultMaxPages
	}
	if o.MaxLinks <= 0 {
		o.MaxLinks = DefaultMaxLinks
	}
	if o.PageTimeout <= 0 {
		o.PageTimeout = DefaultPageTimeout
	}
	seeds := o.Seeds
	if seeds == nil {
		seeds = Seeds(o.Bundle)
	}
	rec := newRecorded(o.Bundle)
	rec.clock = o.Clock

	tb, err := startTab(ctx, o)
	if err != nil {
		return nil, err
	}
	defer tb.close()
	rep := &Report{Pages: []PageResult{}, Seeds: len(seeds), MaxPages: o.MaxPages, MaxLinks: max(o.MaxLinks, 0)}
	seen := map[string]bool{}
	var fr frontier
	for _, s := range seeds {
		if c := canon(s); c != "" && !seen[c] {
			seen[c] = true
			fr.add(queued{url: c})
		}
	}
	for fr.len() > 0 && len(rep.Pages) < o.MaxPages {
		if err := ctx.Err(); err != nil {
			rep.NotVisited = fr.len()
			rep.count()
			return rep, err
		}
		q := fr.next()
		v, links := open(tb.ctx, &tb.cur, tb.mainFrame, q.url, o.PageTimeout, o.Tap, rec)
		pr := classify(v, q, rec)
		pr.Links = len(links)
		for _, u := range []string{pr.FinalURL, pr.WentOn} {
			if u != "" {
				seen[u] = true
			}
		}
		if pr.WentOn != "" && siteOf(pr.WentOn) == siteOf(q.url) {
			fr.add(queued{url: pr.WentOn, depth: q.depth + 1, from: q.url})
		}
		for i, l := range links {
			if i >= o.MaxLinks {
				break
			}
			if !seen[l] {
				seen[l] = true
				fr.add(queued{url: l, depth: q.depth + 1, from: q.url})
			}
		}
		rep.Pages = append(rep.Pages, pr)
		if o.Progress != nil {
			o.Progress(len(rep.Pages), fr.len(), pr)
		}
	}
	rep.NotVisited = fr.len()
	rep.count()
	return rep, nil
}

// tab is the one browser tab a crawl opens its pages in.
type tab struct {
	ctx       context.Context
	cur       atomic.Pointer[visit] // the visit the tab's events go to
	mainFrame cdp.FrameID
	dialogs   sync.WaitGroup
	cancel    func()
}

// startTab opens a tab in the browser at o.CDP, with downloads refused, the HTTP cache off
// and JavaScript dialogs accepted, its events going to the current visit.
func startTab(ctx context.Context, o Options) (*tab, error) {
	allocCtx, cancelAlloc := remote.NewAllocator(ctx, o.CDP, remote.NoModifyURL)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	tb := &tab{ctx: tabCtx, cancel: func() { cancelTab(); cancelAlloc() }}
	fail := func(err error) (*tab, error) {
		tb.close()
		return nil, err
	}
	if err := chromedp.Do(tabCtx); err != nil {
		return fail(fmt.Errorf("crawl: open a tab: %w", err))
	}
	if _, err := chromedp.CallBrowser(tabCtx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorDeny}); err != nil {
		return fail(fmt.Errorf("crawl: refuse downloads: %w", err))
	}
	if _, err := chromedp.Call(tabCtx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
		return fail(fmt.Errorf("crawl: turn the cache off: %w", err))
	}
	if err := chromedp.Listen(tabCtx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			// alert, confirm, prompt and beforeunload would stop the page: accept them
			// (from another goroutine: a listener must not send commands)
			tb.dialogs.Go(func() {
				dctx, cancel := context.WithTimeout(tabCtx, 5*time.Second)
				defer cancel()
				chromedp.Call(dctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			})
			return
		}
		if v := tb.cur.Load(); v != nil {
			v.event(ev)
		}
	}); err != nil {
		return fail(fmt.Errorf("crawl: listen to the tab: %w", err))
	}
	tb.mainFrame = cdp.FrameID(chromedp.FromContext(tabCtx).Target.TargetID)
	return tb, nil
}

// close waits for the dialogs being answered and closes the tab.
func (tb *tab) close() {
	tb.dialogs.Wait()
	tb.cancel()
}

// frontier is the crawl's queue, breadth first: every page of one depth before any of the
// next. Within a depth the pages found on different pages take turns (the first link of
// each page, then the second of each, ...), so that a page with many links does not use up
// the page limit alone.
type frontier struct {
	level    []queued            // the depth being opened, in order
	upcoming map[string][]queued // the next depth, by the page that linked them
	parents  []string            // the keys of upcoming in the order first seen
	n        int                 // pages held
}

// add queues q: a seed (depth 0) at the end of the first level, a link for the next one.
func (f *frontier) add(q queued) {
	f.n++
	if q.depth == 0 {
		f.level = append(f.level, q)
		return
	}
	if f.upcoming == nil {
		f.upcoming = map[string][]queued{}
	}
	if _, ok := f.upcoming[q.from]; !ok {
		f.parents = append(f.parents, q.from)
	}
	f.upcoming[q.from] = append(f.upcoming[q.from], q)
}

func (f *frontier) len() int { return f.n }

// next takes the next page to open (the caller checks len first).
func (f *frontier) next() queued {
	if len(f.level) == 0 {
		// the next depth, its parents' links taking turns
		for i := 0; len(f.parents) > 0; i++ {
			left := f.parents[:0]
			for _, p := range f.parents {
				if qs := f.upcoming[p]; i < len(qs) {
					f.level = append(f.level, qs[i])
					left = append(left, p)
				}
			}
			f.parents = left
		}
		f.upcoming = nil
	}
	q := f.level[0]
	f.level = f.level[1:]
	f.n--
	return q
}

// recorded is what the crawl looks up in the recording.
type recorded struct {
	b *recording.Bundle
	// byURL maps a schemeless canonical URL to the entries recorded for it by GET.
	byURL map[string][]*recording.Entry
	// clock is the replay's page clock (nil: off); exp caches, by entry id, what a browser
	// should receive (body.go).
	clock *replay.Clock
	exp   map[string]*expected
}

func newRecorded(b *recording.Bundle) *recorded {
	r := &recorded{b: b, byURL: map[string][]*recording.Entry{}, exp: map[string]*expected{}}
	for i := range b.Len() {
		e := b.Entry(i)
		if e.Method != "GET" {
			continue
		}
		if c := canon(e.URL); c != "" {
			k := schemeless(c)
			r.byURL[k] = append(r.byURL[k], e)
		}
	}
	return r
}

// has reports whether the recording holds a GET of the canonical URL u.
func (r *recorded) has(u string) bool { return len(r.byURL[schemeless(u)]) > 0 }

// hop is one URL of a request: the first, or one a redirect led to.
type hop struct {
	method, url string // url canonical
	status      int64  // the answer's status, when answered
	answered    bool
}

// request is one network request of a visit, as Chromium reported it.
type request struct {
	id       network.RequestID
	typ      network.ResourceType
	frame    cdp.FrameID
	loader   cdp.LoaderID
	hops     []hop
	finished bool // loading finished or failed
	failed   bool
	canceled bool
	errText  string
	blocked  string
	cors     string
	// set by open once the visit is over: replay's log line of each hop (nil where it
	// logged none), and the comparison of the body the browser received with the
	// recording (nil when not compared: a miss, a redirect, a failed request)
	lines []*replay.LogLine
	body  *bodyCheck
}

// last is the request's last hop.
func (r *request) last() *hop { return &r.hops[len(r.hops)-1] }

// visit is what the browser reported while one page was open.
type visit struct {
	url string

	mu           sync.Mutex
	reqs         map[network.RequestID]*request
	order        []*request
	inflight     int
	lastActivity time.Time
	loaded       map[cdp.LoaderID]time.Time // main-frame "load" lifecycle events
	logs         []*cdplog.Entry
	exceptions   []*runtime.ExceptionDetails
	moreExc      int // exceptions beyond maxExceptions

	// set by open, read by classify (no lock needed after open returns)
	mark      int              // the tap's length when the visit began
	lines     []replay.LogLine // replay's log lines of the visit
	mainFrame cdp.FrameID
	navErr    string // Page.navigate's error text, or the visit's timeout
	download  bool
	timedOut  bool
	matched   bool // matchLines ran
}

func newVisit(u string, mainFrame cdp.FrameID) *visit {
	return &visit{url: u, mainFrame: mainFrame, reqs: map[network.RequestID]*request{},
		loaded: map[cdp.LoaderID]time.Time{}, lastActivity: time.Now()}
}

// event records one CDP event of the tab (called on chromedp's reading goroutine: fast,
// under the visit's lock).
func (v *visit) event(ev any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		if ev.Request == nil {
			return
		}
		u := canon(ev.Request.URL)
		if r := v.reqs[ev.RequestID]; r != nil {
			if ev.RedirectResponse != nil {
				r.last().status, r.last().answered = ev.RedirectResponse.Status, true
			}
			if u != "" && len(r.hops) < 64 {
				r.hops = append(r.hops, hop{method: ev.Request.Method, url: u})
			}
			v.lastActivity = time.Now()
			return
		}
		if u == "" || len(v.order) >= maxRequests {
			return // data:, blob:, about: ... never reach the replay
		}
		r := &request{id: ev.RequestID, typ: ev.Type, frame: ev.FrameID, loader: ev.LoaderID,
			hops: []hop{{method: ev.Request.Method, url: u}}}
		v.reqs[ev.RequestID] = r
		v.order = append(v.order, r)
		v.inflight++
		v.lastActivity = time.Now()
	case *network.EventResponseReceived:
		if r := v.reqs[ev.RequestID]; r != nil && ev.Response != nil {
			r.last().status, r.last().answered = ev.Response.Status, true
			if r.typ == "" {
				r.typ = ev.Type
			}
		}
	case *network.EventLoadingFinished:
		if r := v.reqs[ev.RequestID]; r != nil && !r.finished {
			r.finished = true
			v.inflight--
			v.lastActivity = time.Now()
		}
	case *network.EventLoadingFailed:
		if r := v.reqs[ev.RequestID]; r != nil && !r.finished {
			r.finished, r.failed, r.canceled = true, true, ev.Canceled
			r.errText, r.blocked = ev.ErrorText, string(ev.BlockedReason)
			if ev.CorsErrorStatus != nil {
				r.cors = string(ev.CorsErrorStatus.CorsError)
			}
			v.inflight--
			v.lastActivity = time.Now()
		}
	case *page.EventLifecycleEvent:
		if ev.Name == "load" && ev.FrameID == v.mainFrame {
			v.loaded[ev.LoaderID] = time.Now()
		}
	case *cdplog.EventEntryAdded:
		if ev.Entry != nil && len(v.logs) < maxLogEntries {
			v.logs = append(v.logs, ev.Entry)
		}
	case *runtime.EventExceptionThrown:
		if ev.ExceptionDetails == nil {
			return
		}
		if len(v.exceptions) < maxExceptions {
			v.exceptions = append(v.exceptions, ev.ExceptionDetails)
		} else {
			v.moreExc++
		}
	}
}

// mainDocs returns the visit's main-frame document requests, in order (the caller holds
// the lock or open has returned).
func (v *visit) mainDocs() []*request {
	var out []*request
	for _, r := range v.order {
		if r.typ == network.ResourceTypeDocument && r.frame == v.mainFrame {
			out = append(out, r)
		}
	}
	return out
}

// settled reports whether the visit is over: the last main-frame document failed, or it
// loaded and the page went quiet (or maxSettle passed since), or the page keeps navigating.
func (v *visit) settled(now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	docs := v.mainDocs()
	if len(docs) > maxNavigations {
		return true
	}
	if len(docs) == 0 {
		return v.navErr != ""
	}
	last := docs[len(docs)-1]
	if last.failed || (v.navErr != "" && last.finished) {
		return true // failed, or answered without a page to load (a download, a 204)
	}
	at, ok := v.loaded[last.loader]
	if !ok {
		return false
	}
	return (v.inflight <= 0 && now.Sub(v.lastActivity) >= quietFor) || now.Sub(at) >= maxSettle
}

// linksJS lists the page's link targets (absolute, as the browser resolved them) and its
// address.
const linksJS = `(() => { const out = []; for (const a of document.querySelectorAll("a[href], area[href]")) {
  if (out.length >= %d) break; if (typeof a.href === "string") out.push(a.href); }
  return {links: out, url: String(location.href)}; })()`

// open opens u in the tab, waits until it settles (at most timeout), and returns what the
// browser reported, with the page's same-site links (canonical, without repeats, pages only)
// in document order. Then it waits for the visit's replay log lines, pairs them with the
// requests, and compares the bodies the browser received with the recording (body.go).
func open(tab context.Context, cur *atomic.Pointer[visit], mainFrame cdp.FrameID, u string, timeout time.Duration, tap *Tap, rec *recorded) (*visit, []string) {
	ctx, cancel := context.WithTimeout(tab, timeout)
	defer cancel()
	// leave the last page first, so that nothing it still does is counted for this one
	chromedp.Call(ctx, page.Navigate, page.NavigateParams{URL: "about:blank"})
	tap.Forget(tap.Len())
	v := newVisit(u, mainFrame)
	v.mark = tap.Len()
	cur.Store(v)
	defer cur.Store(nil)

	res, err := chromedp.Call(ctx, page.Navigate, page.NavigateParams{URL: u})
	switch {
	case err != nil:
		v.navErr = err.Error()
	case res.IsDownload:
		v.download = true
		v.navErr = "a download"
	case res.ErrorText != "":
		v.navErr = res.ErrorText
	}
	if err == nil && res.FrameID != "" && res.FrameID != mainFrame {
		v.mu.Lock()
		v.mainFrame = res.FrameID
		v.mu.Unlock()
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for !v.settled(time.Now()) {
		select {
		case <-ctx.Done():
			v.timedOut = true
			break wait
		case <-tick.C:
		}
	}
	var links []string
	if !v.timedOut && !v.download {
		ectx, ecancel := context.WithTimeout(tab, evalTimeout)
		got, err := chromedp.Run(ectx, chromedp.Evaluate[struct {
			Links []string `json:"links"`
			URL   string   `json:"url"`
		}](fmt.Sprintf(linksJS, maxLinkScan)))
		ecancel()
		if err == nil {
			site := siteOf(got.URL)
			seen := map[string]bool{}
			for _, l := range got.Links {
				c := canon(l)
				if c != "" && !seen[c] && site != "" && siteOf(c) == site && isPageLink(c) {
					seen[c] = true
					links = append(links, c)
				}
			}
		}
	}
	cur.Store(nil)
	v.waitLog(tab, tap)
	v.matchLines()
	if !v.timedOut {
		v.checkBodies(tab, rec)
	}
	return v, links
}

// matchLines pairs every request of the visit, hop by hop, with replay's log lines.
func (v *visit) matchLines() {
	v.matched = true
	ix := newLogIndex(v.lines)
	for _, r := range v.order {
		r.lines = make([]*replay.LogLine, len(r.hops))
		for i, h := range r.hops {
			r.lines[i] = ix.take(h.method, h.url)
		}
	}
}

// waitLog waits (at most logWait) until the tap holds a log line for every answered hop of
// the visit, then keeps the visit's lines.
func (v *visit) waitLog(ctx context.Context, tap *Tap) {
	v.mu.Lock()
	want := map[string]int{}
	for _, r := range v.order {
		for _, h := range r.hops {
			if h.answered {
				want[h.method+" "+h.url]++
			}
		}
	}
	v.mu.Unlock()
	deadline := time.Now().Add(logWait)
	for {
		lines := tap.Since(v.mark)
		have := map[string]int{}
		for i := range lines {
			have[lines[i].Method+" "+canonLog(lines[i].URL)]++
		}
		missing := false
		for k, n := range want {
			if have[k] < n {
				missing = true
				break
			}
		}
		if !missing || time.Now().After(deadline) || ctx.Err() != nil {
			v.lines = lines
			return
		}
		tap.wait(ctx, 50*time.Millisecond)
	}
}

// canonLog is canon for a logged URL, which replay wrote canonical already; a URL canon
// cannot read is kept.
func canonLog(u string) string {
	if c := canon(u); c != "" {
		return c
	}
	return u
}

// shorten cuts s to n bytes at most, at a character boundary, marking the cut.
func shorten(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return textcut.Cut(s, n, "…")
}
