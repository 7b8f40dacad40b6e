package crawl

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/pab-dev/pab/internal/words"
	"github.com/pab-dev/pab/replay"
)

// Verdicts: what a crawl says about one page (PageResult.Verdict).
const (
	// VerdictOK: the page's document was answered exactly from the recording with the
	// payload recorded for its URL (or for a URL with the same key), and nothing the page
	// loaded from the recording was rejected by the browser.
	VerdictOK = "ok"
	// VerdictFuzzy, VerdictSearch, VerdictPromo: the document was answered by that
	// heuristic step with the recording of another URL (PageResult.Served).
	VerdictFuzzy  = "fuzzy"
	VerdictSearch = "search"
	VerdictPromo  = "promo"
	// VerdictMismatch: the document was answered exactly (same key) with a payload other
	// than the one recorded for its URL: the key drops a part of the URL that matters.
	VerdictMismatch = "mismatch"
	// VerdictMiss: the recording has no answer for the document (or a rule blocks it).
	VerdictMiss = "miss"
	// VerdictBroken: the browser rejected something the recording holds, or received a body
	// other than the recorded payload (PageResult.Broken, or the page's own body), or the
	// page did not load at all or was cut short.
	VerdictBroken = "broken"
	// VerdictRedirectLoop: the document's redirects (recorded ones, or a page that keeps
	// navigating by script or meta refresh) never end.
	VerdictRedirectLoop = "redirect-loop"
)

// verdictOrder is the order of verdicts in totals.
var verdictOrder = []string{VerdictOK, VerdictFuzzy, VerdictSearch, VerdictPromo, VerdictMismatch,
	VerdictMiss, VerdictBroken, VerdictRedirectLoop}

// PageResult is what the crawl found for one page.
type PageResult struct {
	// URL is the page opened (canonical: as replay logs it).
	URL string `json:"url"`
	// Verdict is one of the Verdict constants.
	Verdict string `json:"verdict"`
	// Detail says why, for a person: the recorded URL that answered, the redirect chain,
	// the resources that broke, the misses and script errors.
	Detail string `json:"detail,omitempty"`
	// Wrong marks a wrong-looking answer: fuzzy, search or promo with another URL,
	// mismatch, broken or redirect-loop. pab check exits 1 when any page is wrong.
	Wrong bool `json:"wrong"`
	// Depth is 0 for a recorded page, else the number of links followed to reach it.
	Depth int `json:"depth"`
	// From is the page whose link led here ("" for a recorded page).
	From string `json:"from,omitempty"`
	// FinalURL is where the document's redirects ended, when not URL.
	FinalURL string `json:"final_url,omitempty"`
	// Status is the document's status as the browser got it (0: no answer).
	Status int `json:"status,omitempty"`
	// Source is how replay answered the document (exact, fuzzy, ..., miss).
	Source string `json:"source,omitempty"`
	// Entry and Served are the recorded exchange that answered the document and its URL.
	Entry  string `json:"entry,omitempty"`
	Served string `json:"served,omitempty"`
	// Rule is the rule replay names for the answer (file:line).
	Rule string `json:"rule,omitempty"`
	// Broken lists what the browser rejected although the recording holds it, and the
	// resources whose body the browser received is not the recorded one.
	Broken []Problem `json:"broken,omitempty"`
	// Requests counts the requests the page made through the replay (the document too).
	Requests int `json:"requests"`
	// Misses counts the page's other requests that the recording could not answer;
	// Heuristic those answered by fuzzy, search or promo. FirstMisses names a few.
	Misses      int      `json:"misses,omitempty"`
	Heuristic   int      `json:"heuristic,omitempty"`
	FirstMisses []string `json:"first_misses,omitempty"`
	// ScriptErrors counts uncaught exceptions and console errors not put down to replay;
	// FirstScriptError is the first one.
	ScriptErrors     int    `json:"script_errors,omitempty"`
	FirstScriptError string `json:"first_script_error,omitempty"`
	// BodiesCompared counts the page's requests (the document too) answered from the
	// recording whose body, as the browser received it, was compared with the recorded
	// payload; BodiesDiffer those that were not the recorded one (each is in Broken, or
	// breaks the page); BodiesUnverified those not compared (over MaxCompareBody, or
	// Chromium kept no body).
	BodiesCompared   int `json:"bodies_compared,omitempty"`
	BodiesDiffer     int `json:"bodies_differ,omitempty"`
	BodiesUnverified int `json:"bodies_unverified,omitempty"`
	// Links is how many same-site page links the page has (before --links bounds them).
	Links int `json:"links"`
	// WentOn is where the page navigated by itself (script or meta refresh), if it did.
	WentOn string `json:"went_on,omitempty"`
}

// FinalURLOrURL is where the document's redirects ended: FinalURL, else URL.
func (p *PageResult) FinalURLOrURL() string {
	if p.FinalURL != "" {
		return p.FinalURL
	}
	return p.URL
}

// Problem is one resource the browser rejected.
type Problem struct {
	URL string `json:"url"`
	// Type is the browser's resource type (Font, Script, Image, ...).
	Type string `json:"type,omitempty"`
	// Reason is what the browser said and how replay answered.
	Reason string `json:"reason"`
}

// TargetReport is a Report with the replay target it crawled: what pab check --crawl
// --json prints.
type TargetReport struct {
	// Target is the target's name (task id or path); CapturedFrom the manifest's.
	Target       string `json:"target"`
	CapturedFrom string `json:"captured_from,omitempty"`
	*Report
}

// Report is the result of a crawl.
type Report struct {
	// Pages are the pages visited, in visit order.
	Pages []PageResult `json:"pages"`
	// Totals counts the pages by verdict.
	Totals map[string]int `json:"totals"`
	// Wrong counts the pages with a wrong-looking answer.
	Wrong int `json:"wrong"`
	// Seeds is how many recorded pages the crawl started from.
	Seeds int `json:"seeds"`
	// NotVisited counts the pages found (recorded or linked) but not opened because the
	// crawl reached its page limit.
	NotVisited int `json:"not_visited"`
	// OtherURL counts the pages whose document was answered by fuzzy, search or promo with
	// the recording of another URL (PageResult.Served), lenient static files included.
	OtherURL int `json:"other_url"`
	// BodiesCompared, BodiesDiffer and BodiesUnverified are the pages' sums.
	BodiesCompared   int `json:"bodies_compared"`
	BodiesDiffer     int `json:"bodies_differ"`
	BodiesUnverified int `json:"bodies_unverified"`
	// MaxPages and MaxLinks are the bounds the crawl ran with.
	MaxPages int `json:"max_pages"`
	MaxLinks int `json:"max_links"`
}

// count fills Totals and Wrong from Pages.
func (r *Report) count() {
	r.Totals = map[string]int{}
	r.Wrong, r.OtherURL, r.BodiesCompared, r.BodiesDiffer, r.BodiesUnverified = 0, 0, 0, 0, 0
	for _, p := range r.Pages {
		r.Totals[p.Verdict]++
		if p.Wrong {
			r.Wrong++
		}
		if heuristicSource(replay.Source(p.Source)) && p.Served != "" && schemeless(canonLog(p.Served)) != schemeless(canonLog(p.FinalURLOrURL())) {
			r.OtherURL++
		}
		r.BodiesCompared += p.BodiesCompared
		r.BodiesDiffer += p.BodiesDiffer
		r.BodiesUnverified += p.BodiesUnverified
	}
}

// Print writes the report for a person: one row per page (URL, verdict, detail), then the
// totals.
func (r *Report) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PAGE\tVERDICT\tDETAIL")
	for _, p := range r.Pages {
		v := p.Verdict
		if p.Wrong {
			v += " !"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.URL, v, p.Detail)
	}
	tw.Flush()
	fmt.Fprintln(w, r.Summary())
}

// Summary is the totals line: pages by verdict, wrong-looking answers, pages not visited.
func (r *Report) Summary() string {
	var parts []string
	for _, v := range verdictOrder {
		if n := r.Totals[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", v, n))
		}
	}
	s := fmt.Sprintf("crawl: %s (%d recorded)", words.Count(len(r.Pages), "page"), r.Seeds)
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	s += fmt.Sprintf("; %d wrong-looking (marked !)", r.Wrong)
	if r.OtherURL > 0 {
		s += fmt.Sprintf("; %d answered with another recorded URL (fuzzy, search or promo: the URL served is in the detail)", r.OtherURL)
	}
	s += fmt.Sprintf("; bodies: %d compared with the recording, %d not the recorded one, %d not compared", r.BodiesCompared, r.BodiesDiffer, r.BodiesUnverified)
	if r.NotVisited > 0 {
		s += fmt.Sprintf("; %d more pages found but not opened (--pages %d)", r.NotVisited, r.MaxPages)
	}
	return s
}
