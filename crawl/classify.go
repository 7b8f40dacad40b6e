package crawl

import (
	"fmt"
	"regexp"
	"strings"

	cdplog "github.com/chromedp/cdproto/log"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
)

// hitSource reports whether a log source is an answer from the recording.
func hitSource(s replay.Source) bool {
	switch s {
	case replay.SourceExact, replay.SourceSearch, replay.SourcePromo, replay.SourceFuzzy:
		return true
	}
	return false
}

// heuristicSource reports whether a log source is a heuristic match (another URL's answer).
func heuristicSource(s replay.Source) bool {
	return s == replay.SourceSearch || s == replay.SourcePromo || s == replay.SourceFuzzy
}

// logIndex hands out a visit's log lines to the requests' hops, by method and URL, each
// line once, in log order.
type logIndex struct {
	lines []replay.LogLine
	byKey map[string][]int
}

func newLogIndex(lines []replay.LogLine) *logIndex {
	ix := &logIndex{lines: lines, byKey: map[string][]int{}}
	for i := range lines {
		k := lines[i].Method + " " + canonLog(lines[i].URL)
		ix.byKey[k] = append(ix.byKey[k], i)
	}
	return ix
}

// take returns the next unused line for method and url, or nil.
func (ix *logIndex) take(method, url string) *replay.LogLine {
	k := method + " " + url
	q := ix.byKey[k]
	if len(q) == 0 {
		return nil
	}
	ix.byKey[k] = q[1:]
	return &ix.lines[q[0]]
}

// answered is a request with the log lines of its hops.
type answered struct {
	r     *request
	lines []*replay.LogLine // one per hop, nil where replay logged none
}

// final is the log line of the request's last hop, or nil.
func (a *answered) final() *replay.LogLine { return a.lines[len(a.lines)-1] }

// quotedURL finds the first quoted http(s) URL in a console message.
var quotedURL = regexp.MustCompile(`['"](https?://[^'"\s]+)['"]`)

// classify turns what the browser reported during a visit, and replay's log lines of it,
// into the page's result, in phases: the requests matched with their log lines, the
// page's document, its resources, the browser's console messages, uncaught exceptions, and
// the summary.
func classify(v *visit, q queued, rec *recorded) PageResult {
	c := &classification{v: v, rec: rec, pr: PageResult{URL: q.url, Depth: q.depth, From: q.from},
		byURL: map[string]*answered{}, broken: map[string]bool{}}
	c.match()
	c.document()
	c.resources()
	c.bodies()
	c.console()
	c.exceptions()
	return c.summary()
}

// classification is one page's result while classify's phases put it together.
type classification struct {
	v   *visit
	rec *recorded
	pr  PageResult
	all []*answered
	// byURL is the last request of each URL; doc is the page's document request, docs
	// the main-frame documents in order.
	byURL    map[string]*answered
	doc      *answered
	docs     []*request
	notes    []string
	wrongDoc bool
	// broken holds the URLs of pr.Broken (and of those past maxProblems).
	broken map[string]bool
	// firstUnverified names the first body not compared, and why.
	firstUnverified string
}

// match pairs every request of the visit, hop by hop, with replay's log lines.
func (c *classification) match() {
	if !c.v.matched {
		c.v.matchLines()
	}
	for _, r := range c.v.order {
		a := &answered{r: r, lines: r.lines}
		c.all = append(c.all, a)
		c.byURL[r.last().url] = a
		c.pr.Requests += len(r.hops)
	}
}

// document judges the page's own document (docVerdict) and a page that keeps navigating
// by itself (script, meta refresh).
func (c *classification) document() {
	v := c.v
	c.docs = v.mainDocs()
	if len(c.docs) > 0 {
		for _, a := range c.all {
			if a.r == c.docs[0] {
				c.doc = a
			}
		}
	}
	switch {
	case c.doc == nil:
		c.pr.Verdict, c.wrongDoc = VerdictBroken, true
		switch {
		case v.timedOut:
			c.notes = append(c.notes, "the browser sent no request for the page in time")
		case v.navErr != "":
			c.notes = append(c.notes, "the browser did not open the page: "+shorten(v.navErr, 160))
		default:
			c.notes = append(c.notes, "the browser sent no request for the page")
		}
	default:
		c.pr.Verdict, c.wrongDoc, c.notes = docVerdict(c.doc, v, c.rec, &c.pr)
	}
	if docs := c.docs; len(docs) > 1 {
		last := docs[len(docs)-1]
		c.pr.WentOn = last.hops[0].url
		if len(docs) > maxNavigations {
			c.pr.Verdict, c.wrongDoc = VerdictRedirectLoop, true
			c.notes = append(c.notes, fmt.Sprintf("the page keeps navigating by itself (script or meta refresh): %s", chain(docURLs(docs))))
		} else {
			c.notes = append(c.notes, "then went on by itself to "+c.pr.WentOn)
		}
	}
}

// addBroken lists a broken resource once per URL, at most maxProblems of them.
func (c *classification) addBroken(p Problem) {
	if c.broken[p.URL] {
		return
	}
	c.broken[p.URL] = true
	if len(c.pr.Broken) < maxProblems {
		c.pr.Broken = append(c.pr.Broken, p)
	}
}

// resources counts the page's misses and heuristic answers and lists the resources that
// failed in the browser although the recording has them.
func (c *classification) resources() {
	pr, rec := &c.pr, c.rec
	for _, a := range c.all {
		if a == c.doc {
			continue
		}
		r, fl := a.r, a.final()
		u := r.last().url
		if fl != nil {
			switch {
			case fl.Source == replay.SourceMiss:
				pr.Misses++
				if len(pr.FirstMisses) < maxNamed {
					pr.FirstMisses = append(pr.FirstMisses, u)
				}
			case heuristicSource(fl.Source):
				pr.Heuristic++
			}
		}
		if !r.failed || r.canceled || r.errText == "net::ERR_ABORTED" {
			continue
		}
		why := r.errText
		if r.blocked != "" {
			why += " (blocked: " + r.blocked + ")"
		}
		if r.cors != "" {
			why += " (CORS: " + r.cors + ")"
		}
		switch {
		case fl != nil && hitSource(fl.Source):
			c.addBroken(Problem{URL: u, Type: string(r.typ), Reason: why + "; replay answered it " + answerOf(fl, rec.b)})
		case fl == nil && rec.has(u):
			c.addBroken(Problem{URL: u, Type: string(r.typ), Reason: why + "; it never reached replay, and the recording has it"})
		}
	}
}

// bodies reads the comparisons of what the browser received with the recording (body.go):
// a page whose own body differs, or that the browser got cut short, is broken; a resource
// whose body differs is a broken resource.
func (c *classification) bodies() {
	pr := &c.pr
	for _, a := range c.all {
		b := a.r.body
		if b == nil {
			continue
		}
		switch b.state {
		case bodyUnverified:
			pr.BodiesUnverified++
			if c.firstUnverified == "" {
				c.firstUnverified = a.r.last().url + ": " + b.reason
			}
			continue
		case bodySame:
			pr.BodiesCompared++
			continue
		}
		pr.BodiesCompared++
		pr.BodiesDiffer++
		if a == c.doc {
			if pr.Verdict != VerdictRedirectLoop {
				pr.Verdict = VerdictBroken
			}
			c.wrongDoc = true
			c.notes = append(c.notes, "the page's body is not the recorded one: "+b.reason)
			continue
		}
		c.addBroken(Problem{URL: a.r.last().url, Type: string(a.r.typ), Reason: "body not the recorded one: " + b.reason + "; replay answered it " + answerOf(a.final(), c.rec.b)})
	}
	if d := c.doc; d != nil && d.r.failed && !d.r.canceled && d.r.errText != "net::ERR_ABORTED" && d.final() != nil && hitSource(d.final().Source) {
		if pr.Verdict != VerdictRedirectLoop {
			pr.Verdict = VerdictBroken
		}
		c.wrongDoc = true
		c.notes = append(c.notes, "the browser did not get the whole page: "+shorten(d.r.errText, 120))
	}
}

// console reads the browser's console messages (not those of page scripts): fonts the
// sanitizer refused, resources refused by policy, other errors counted as script errors.
func (c *classification) console() {
	pr, rec := &c.pr, c.rec
	lastFont := -1 // index in pr.Broken of the font refused by the message before
	for _, e := range c.v.logs {
		text := e.Text
		switch {
		case strings.HasPrefix(text, "Failed to decode downloaded font:"):
			u := canon(strings.TrimSpace(strings.TrimPrefix(text, "Failed to decode downloaded font:")))
			lastFont = -1
			if a := c.byURL[u]; a != nil && a.final() != nil && hitSource(a.final().Source) && !c.broken[u] {
				c.addBroken(Problem{URL: u, Type: "Font", Reason: "Chromium's font sanitizer refused it; replay answered it " + answerOf(a.final(), rec.b)})
				if n := len(pr.Broken); n > 0 && pr.Broken[n-1].URL == u {
					lastFont = n - 1
				}
			}
			continue
		case strings.Contains(text, "OTS parsing error"):
			if lastFont >= 0 {
				p := &pr.Broken[lastFont]
				p.Reason = strings.Replace(p.Reason, "refused it", "refused it ("+shorten(text, 120)+")", 1)
				lastFont = -1
			}
			continue
		}
		if e.Level != cdplog.EntryLevelError || e.Source == cdplog.EntrySourceNetwork {
			continue
		}
		if m := quotedURL.FindStringSubmatch(text); m != nil {
			u := canon(m[1])
			if a := c.byURL[u]; a != nil && a.final() != nil && hitSource(a.final().Source) {
				if !c.broken[u] {
					c.addBroken(Problem{URL: u, Type: string(a.r.typ), Reason: shorten(text, 160) + "; replay answered it " + answerOf(a.final(), rec.b)})
				}
				continue
			}
		}
		c.scriptError(text)
	}
}

// scriptError counts one script error, keeping the first one's text.
func (c *classification) scriptError(text string) {
	c.pr.ScriptErrors++
	if c.pr.FirstScriptError == "" {
		c.pr.FirstScriptError = shorten(text, 160)
	}
}

// exceptions reads uncaught exceptions: put down to replay when the script that threw was
// answered by a heuristic match (another URL's recording), else script errors.
func (c *classification) exceptions() {
	for _, x := range c.v.exceptions {
		text := x.Text
		if x.Exception != nil && x.Exception.Description != "" {
			text += " " + x.Exception.Description
		}
		u := x.URL
		if x.StackTrace != nil && len(x.StackTrace.CallFrames) > 0 && x.StackTrace.CallFrames[0].URL != "" {
			u = x.StackTrace.CallFrames[0].URL
		}
		if a := c.byURL[canon(u)]; a != nil && a != c.doc && a.final() != nil && heuristicSource(a.final().Source) {
			c.addBroken(Problem{URL: a.r.last().url, Type: "Script", Reason: "threw " + shorten(text, 120) + "; replay answered it " + answerOf(a.final(), c.rec.b)})
			continue
		}
		c.scriptError(text)
	}
	c.pr.ScriptErrors += c.v.moreExc
}

// summary makes broken resources break the verdict and joins the notes into the detail.
func (c *classification) summary() PageResult {
	pr, notes := c.pr, c.notes
	if len(c.broken) > 0 {
		if pr.Verdict == VerdictOK || pr.Verdict == VerdictMiss {
			pr.Verdict = VerdictBroken
		}
		c.wrongDoc = true
		var names []string
		for i, p := range pr.Broken {
			if i == 2 {
				names = append(names, fmt.Sprintf("and %d more", len(c.broken)-2))
				break
			}
			names = append(names, fmt.Sprintf("%s %s: %s", strings.ToLower(p.Type), p.URL, p.Reason))
		}
		notes = append(notes, fmt.Sprintf("%d broken: %s", len(c.broken), strings.Join(names, "; ")))
	}
	if pr.Misses > 0 {
		notes = append(notes, fmt.Sprintf("%d requests missed (first: %s)", pr.Misses, pr.FirstMisses[0]))
	}
	if pr.Heuristic > 0 {
		notes = append(notes, fmt.Sprintf("%d requests answered by fuzzy, search or promo", pr.Heuristic))
	}
	if pr.BodiesUnverified > 0 {
		notes = append(notes, fmt.Sprintf("%d bodies not compared with the recording (first: %s)", pr.BodiesUnverified, shorten(c.firstUnverified, 200)))
	}
	if pr.ScriptErrors > 0 {
		notes = append(notes, fmt.Sprintf("%d script errors (first: %s)", pr.ScriptErrors, pr.FirstScriptError))
	}
	pr.Wrong = c.wrongDoc
	pr.Detail = strings.Join(notes, "; ")
	return pr
}

// docVerdict judges the page's own document: its redirects and the answer its last hop got.
func docVerdict(doc *answered, v *visit, rec *recorded, pr *PageResult) (verdict string, wrong bool, notes []string) {
	hops := doc.r.hops
	urls := make([]string, len(hops))
	for i, h := range hops {
		urls[i] = h.url
	}
	repeat := false
	at := map[string]bool{}
	for _, u := range urls {
		if at[u] {
			repeat = true
		}
		at[u] = true
	}
	if strings.Contains(doc.r.errText, "ERR_TOO_MANY_REDIRECTS") || strings.Contains(v.navErr, "ERR_TOO_MANY_REDIRECTS") || repeat {
		return VerdictRedirectLoop, true, []string{fmt.Sprintf("%d redirects: %s", len(hops)-1, chain(urls))}
	}
	last := doc.r.last()
	if last.url != pr.URL {
		pr.FinalURL = last.url
		notes = append(notes, "redirected to "+last.url)
	}
	pr.Status = int(last.status)
	fl := doc.final()
	if fl == nil {
		switch {
		case doc.r.failed:
			return VerdictBroken, true, append(notes, "the browser got no answer from replay: "+shorten(doc.r.errText, 160))
		case v.timedOut:
			return VerdictBroken, true, append(notes, "no answer in time")
		}
		return VerdictBroken, true, append(notes, "replay logged no answer for the page")
	}
	pr.Source, pr.Entry, pr.Rule = string(fl.Source), fl.Entry, fl.Rule
	if pr.Status == 0 {
		pr.Status = fl.Status
	}
	if v.download {
		notes = append(notes, "a download, not shown")
	}
	var e *recording.Entry
	if fl.Entry != "" {
		e = rec.b.ByID(fl.Entry)
	}
	if e != nil {
		pr.Served = e.URL
	}
	switch {
	case fl.Source == replay.SourceExact && e != nil:
		same := rec.byURL[schemeless(last.url)]
		if len(same) == 0 {
			return VerdictOK, false, append(notes, "recorded as "+e.URL+" (the same key)")
		}
		for _, s := range same {
			if s == e || (e.Digest != "" && s.Digest == e.Digest) {
				if fl.Status >= 400 {
					notes = append(notes, fmt.Sprintf("recorded status %d", fl.Status))
				}
				return VerdictOK, false, notes
			}
		}
		return VerdictMismatch, true, append(notes, "answered with "+e.URL+" (the same key), whose payload differs from the one recorded for this URL")
	case heuristicSource(fl.Source) && e != nil:
		n := "answered with " + e.URL
		if fl.Rule != "" {
			n += " (rule " + fl.Rule + ")"
		}
		other := schemeless(canon(e.URL)) != schemeless(last.url)
		if other && fl.Source == replay.SourceFuzzy && replay.StaticType(replay.TypeOf(e.ResourceType)) {
			// the policy's lenient rule for static files (a cache-busting parameter), even
			// when the browser opened the file as a page: shown, not counted as wrong-looking
			return string(fl.Source), false, append(notes, n+"; a static file ("+e.ResourceType+"), the matching policy's lenient rule")
		}
		return string(fl.Source), other, append(notes, n)
	case fl.Source == replay.SourceBlocked:
		n := "blocked"
		if fl.Rule != "" {
			n += " by " + fl.Rule
		}
		return VerdictMiss, false, append(notes, n)
	}
	n := fmt.Sprintf("status %d: not in the recording", fl.Status)
	if fl.Note != "" {
		n += " (" + shorten(fl.Note, 120) + ")"
	}
	return VerdictMiss, false, append(notes, n)
}

// answerOf describes replay's answer in a log line: "exact (e000012)", "fuzzy with URL (e000012)".
func answerOf(l *replay.LogLine, b *recording.Bundle) string {
	s := string(l.Source)
	if heuristicSource(l.Source) && l.Entry != "" {
		if e := b.ByID(l.Entry); e != nil {
			s += " with " + e.URL
		}
	}
	if l.Entry != "" {
		s += " (" + l.Entry + ")"
	}
	return s
}

// docURLs are the first URLs of documents.
func docURLs(docs []*request) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.hops[0].url
	}
	return out
}

// chain writes URLs as "a → b → a → …", at most four of them.
func chain(urls []string) string {
	if len(urls) > 4 {
		return strings.Join(urls[:4], " → ") + " → …"
	}
	return strings.Join(urls, " → ")
}
