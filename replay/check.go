package replay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/mapx"
	"github.com/pab-dev/pab/internal/progress"
	"github.com/pab-dev/pab/internal/words"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/tlsca"
)

// checkTimeout bounds each request of Check.
const checkTimeout = 30 * time.Second

// CheckReport is what Check measured. Counts are the proxy's own counts (by source and
// type) of the requests Check sent, taken as the difference of http://rr.control/stats
// before and after, so they include any other client's requests made meanwhile.
type CheckReport struct {
	// Pages is how many page requests were sent: every pages.jsonl page fetched by GET
	// (pages the recording reached by POST or script are left to the entries pass), or,
	// when pages.jsonl is empty, every recorded GET of a document.
	Pages int `json:"pages"`
	// Requests is every request sent: the pages, then each other recorded exchange once in
	// recording order with its recorded method, body and Content-Type.
	Requests int `json:"requests"`
	// Skipped counts recorded exchanges not sent (URL not absolute http(s)).
	Skipped int `json:"skipped"`
	// Errors counts requests that got no HTTP answer; FirstErrors keeps the first few.
	Errors      int      `json:"errors"`
	FirstErrors []string `json:"first_errors,omitempty"`
	// Of is set by a CheckSample that sent fewer than all: how many page requests and
	// other requests the whole recording holds (the sample is Pages and Requests-Pages of
	// them); nil when everything was sent.
	Of *CheckTotals `json:"of,omitempty"`
	// Counts are the proxy's counts for the requests sent.
	Counts Counts `json:"counts"`
	// PageResults is what each page request got, in the order sent.
	PageResults []PageResult `json:"page_results"`
}

// CheckTotals are the page requests and other requests a whole check of a recording sends.
type CheckTotals struct {
	Pages  int `json:"pages"`
	Others int `json:"others"`
}

// PageResult is the answer to one page request of a check.
type PageResult struct {
	URL    string `json:"url"`
	Status int    `json:"status"`
	// Title is the <title> of the answered document, "" when it has none.
	Title string `json:"title,omitempty"`
}

// maxPagesPrinted bounds the page list that Print writes.
const maxPagesPrinted = 20

// Share returns the share (0 to 1) of the requests answered by source.
func (r *CheckReport) Share(source Source) float64 {
	if r.Counts.Total == 0 {
		return 0
	}
	return float64(r.Counts.BySource[source]) / float64(r.Counts.Total)
}

// HitRate is the share (0 to 1) of the requests answered from the recording: exact, search,
// promo and fuzzy.
func (r *CheckReport) HitRate() float64 {
	n := 0.0
	for _, s := range hitSources {
		n += r.Share(s)
	}
	return n
}

// Print writes the report for a person: requests sent, counts and shares by source, and the
// hit rate by source and together (HitRate).
func (r *CheckReport) Print(w io.Writer) {
	for i, p := range r.PageResults {
		if i == maxPagesPrinted {
			fmt.Fprintf(w, "  ... and %d more pages\n", len(r.PageResults)-maxPagesPrinted)
			break
		}
		title := p.Title
		if title == "" {
			title = "(no title)"
		}
		fmt.Fprintf(w, "page %d  %s\n      %s\n", p.Status, p.URL, title)
	}
	fmt.Fprintf(w, "check: %s (%s, %s)", words.Count(r.Requests, "request"), words.Count(r.Pages, "page"),
		words.Count(r.Requests-r.Pages, "other recorded exchange"))
	if r.Skipped > 0 {
		fmt.Fprintf(w, ", %s of the recording not sent", words.Count(r.Skipped, "exchange"))
	}
	fmt.Fprintln(w)
	for _, s := range mapx.OrderedKeys(r.Counts.BySource, sourceOrder) {
		fmt.Fprintf(w, "  %-10s %6d  %5.1f%%\n", s, r.Counts.BySource[s], 100*r.Share(s))
	}
	fmt.Fprintf(w, "hit rate: exact %.1f%%, search %.1f%%, promo %.1f%%, fuzzy %.1f%%, together %.1f%%\n",
		100*r.Share(SourceExact), 100*r.Share(SourceSearch), 100*r.Share(SourcePromo), 100*r.Share(SourceFuzzy), 100*r.HitRate())
	if r.Errors > 0 {
		fmt.Fprintf(w, "errors: %s got no answer; first: %s\n", words.Count(r.Errors, "request"), strings.Join(r.FirstErrors, "; "))
	}
}

// checkRequest is one request Check sends.
type checkRequest struct {
	method, url, contentType, dest, accept string
	body                                   []byte
	page                                   bool // a page request: its status and title are reported
}

// Check replays the recording b once through the running replay proxy at proxyAddr
// (host:port) with a Go client that trusts ca: first every recorded page, then every other
// recorded exchange once in recording order (see CheckReport for what is counted). It
// returns an error only when the proxy cannot be asked for its counts or ctx ends;
// requests that fail are counted in the report.
func Check(ctx context.Context, proxyAddr string, ca *tlsca.CA, b *recording.Bundle) (*CheckReport, error) {
	return CheckSample(ctx, proxyAddr, ca, b, 0, 0)
}

// CheckSample is Check sending at most maxPages page requests and maxOthers other
// requests (0 or less: no bound), chosen evenly spaced over the recording's pages and its
// exchanges in recording order, so that the same recording gives the same sample. A
// recording with no more than that is sent whole, as by Check. CheckReport.Sampled says
// how many page and other requests the whole recording would have sent.
func CheckSample(ctx context.Context, proxyAddr string, ca *tlsca.CA, b *recording.Bundle, maxPages, maxOthers int) (*CheckReport, error) {
	proxyURL := &url.URL{Scheme: "http", Host: proxyAddr}
	tr := &http.Transport{
		Proxy:                 http.ProxyURL(proxyURL),
		TLSClientConfig:       &tls.Config{RootCAs: ca.CertPool()},
		DisableCompression:    true,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		Timeout:       checkTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	before, err := fetchCounts(ctx, client)
	if err != nil {
		return nil, err
	}
	reqs, pages, skipped, of, err := checkRequests(b, maxPages, maxOthers)
	if err != nil {
		return nil, err
	}
	rep := &CheckReport{Pages: pages, Requests: len(reqs), Skipped: skipped, Of: of}
	for _, cr := range reqs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		status, title, err := sendCheck(ctx, client, cr)
		progress.FromContext(ctx).Record(0) // the self-check's progress line
		if err != nil {
			rep.Errors++
			if len(rep.FirstErrors) < 5 {
				rep.FirstErrors = append(rep.FirstErrors, err.Error())
			}
			continue
		}
		if cr.page {
			rep.PageResults = append(rep.PageResults, PageResult{URL: cr.url, Status: status, Title: title})
		}
	}
	after, err := fetchCounts(ctx, client)
	if err != nil {
		return nil, err
	}
	rep.Counts = diffCounts(after, before)
	return rep, nil
}

// checkRequests lists the requests of a check: pages, then the other exchanges; at most
// maxPages pages and maxOthers others (0 or less: all), evenly spaced. of is set when a
// bound cut the list.
func checkRequests(b *recording.Bundle, maxPages, maxOthers int) (reqs []checkRequest, pages, skipped int, of *CheckTotals, err error) {
	var pageURLs []string
	seen := map[string]bool{}
	addPage := func(u string) {
		if seen[u] {
			return
		}
		seen[u] = true
		pageURLs = append(pageURLs, u)
	}
	bpages, err := b.AllPages()
	if err != nil {
		return nil, 0, 0, nil, err
	}
	for _, p := range bpages {
		if p.Fetched == "GET" || p.Fetched == "" {
			if _, err := parseTargetURL(p.URL); err == nil {
				addPage(p.URL)
			}
		}
	}
	if len(pageURLs) == 0 {
		for i := range b.Len() {
			e := b.Entry(i)
			if e.Method == "GET" && (strings.EqualFold(e.ResourceType, "document") || e.Mime == "text/html") {
				if _, err := parseTargetURL(e.URL); err == nil {
					addPage(e.URL)
				}
			}
		}
	}
	sent := map[string]bool{}
	for _, k := range spread(len(pageURLs), maxPages) {
		u := pageURLs[k]
		sent[u] = true
		reqs = append(reqs, checkRequest{method: "GET", url: u, dest: "document", accept: "text/html,application/xhtml+xml,*/*;q=0.8", page: true})
	}
	pages = len(reqs)
	allPages := len(pageURLs)
	seen, pageURLs = nil, nil
	// the others: every exchange not sent as a page; counted first so that the sample is
	// spread over them all
	others := 0
	isOther := func(e *recording.Entry) bool {
		if _, err := parseTargetURL(e.URL); err != nil {
			return false
		}
		return !(e.Method == "GET" && sent[e.URL])
	}
	for i := range b.Len() {
		if isOther(b.Entry(i)) {
			others++
		} else if _, err := parseTargetURL(b.Entry(i).URL); err != nil {
			skipped++
		}
	}
	want := spread(others, maxOthers)
	k, w := 0, 0
	for i := 0; i < b.Len() && w < len(want); i++ {
		e := b.Entry(i)
		if !isOther(e) {
			continue
		}
		if k != want[w] {
			k++
			continue
		}
		k++
		w++
		body, err := b.RequestBody(e)
		if err != nil {
			skipped++
			continue
		}
		reqs = append(reqs, checkRequest{method: e.Method, url: e.URL, body: body, contentType: e.RequestType(body),
			dest: fetchDest(e.ResourceType), accept: e.Mime})
	}
	if pages < allPages || len(want) < others {
		of = &CheckTotals{Pages: allPages, Others: others}
	}
	return reqs, pages, skipped, of, nil
}

// spread returns max indexes of 0..n-1, evenly spaced and ascending (the first is 0), or
// all n of them when max <= 0 or max >= n.
func spread(n, max int) []int {
	if max <= 0 || max >= n {
		max = n
	}
	out := make([]int, max)
	for i := range out {
		out[i] = int(int64(i) * int64(n) / int64(max))
	}
	return out
}

// fetchDest maps a recorded resource type (RR-Resource-Type, Chrome DevTools Protocol
// Network.ResourceType in lower case) to the Sec-Fetch-Dest a browser would send, or "".
func fetchDest(resourceType string) string {
	switch strings.ToLower(resourceType) {
	case "document":
		return "document"
	case "stylesheet", "style":
		return "style"
	case "image":
		return "image"
	case "font":
		return "font"
	case "script":
		return "script"
	case "media":
		return "video"
	case "texttrack":
		return "track"
	case "xhr", "fetch", "eventsource", "ping", "api": // "api": older pab recordings
		return "empty"
	case "manifest":
		return "manifest"
	}
	return ""
}

// sendCheck sends one request and reads its answer whole. For a page request it returns
// the document's <title> too.
func sendCheck(ctx context.Context, client *http.Client, cr checkRequest) (status int, title string, err error) {
	var body io.Reader
	if len(cr.body) > 0 {
		body = bytes.NewReader(cr.body)
	}
	req, err := http.NewRequestWithContext(ctx, cr.method, cr.url, body)
	if err != nil {
		return 0, "", fmt.Errorf("%s %s: %w", cr.method, cr.url, err)
	}
	if cr.contentType != "" {
		req.Header.Set("Content-Type", cr.contentType)
	}
	if cr.dest != "" {
		req.Header.Set("Sec-Fetch-Dest", cr.dest)
	}
	if cr.accept != "" {
		req.Header.Set("Accept", cr.accept)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if cr.page {
		head, err := io.ReadAll(io.LimitReader(resp.Body, maxTitleScan))
		if err != nil {
			return 0, "", fmt.Errorf("%s %s: read body: %w", cr.method, cr.url, err)
		}
		title = recording.HTMLTitle(head)
	}
	if _, err = io.Copy(io.Discard, resp.Body); err != nil {
		return 0, "", fmt.Errorf("%s %s: read body: %w", cr.method, cr.url, err)
	}
	return resp.StatusCode, title, nil
}

// maxTitleScan bounds how much of a page Check reads for its title.
const maxTitleScan = 1 << 20

// fetchCounts asks the proxy for its counts (http://rr.control/stats).
func fetchCounts(ctx context.Context, client *http.Client) (Counts, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+ControlHost+"/stats", nil)
	if err != nil {
		return Counts{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Counts{}, fmt.Errorf("check: ask the proxy for its counts: %w", err)
	}
	defer resp.Body.Close()
	var c Counts
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&c); err != nil || resp.StatusCode != http.StatusOK {
		return Counts{}, fmt.Errorf("check: bad answer from http://%s/stats (status %d): %v", ControlHost, resp.StatusCode, err)
	}
	return c, nil
}

// diffCounts is a - b, leaving out zero entries.
func diffCounts(a, b Counts) Counts {
	out := newCounts()
	out.Total = a.Total - b.Total
	for k, n := range a.BySource {
		if d := n - b.BySource[k]; d != 0 {
			out.BySource[k] = d
		}
	}
	for k, n := range a.ByType {
		if d := n - b.ByType[k]; d != 0 {
			out.ByType[k] = d
		}
	}
	return out
}

// SampleBundle opens the bundle directory dir holding only what a check of a sample needs:
// at most maxPages pages and maxOthers other exchanges, chosen as CheckSample chooses them
// on the whole bundle (pages.jsonl's GET pages, else the entries of HTML documents; then
// the other exchanges), evenly spaced, with the entries that answer them and the originals
// of their revisits (recording.OpenBundleSubset). CheckSample with no bounds on the returned
// bundle then sends that sample, and a replay of it indexes only those entries, so the
// memory of the check does not grow with the recording. of gives the whole bundle's
// numbers when the bounds cut the sample (nil when every request is in it); total is the
// number of the whole bundle's entries. The files are
// read a line at a time, three to five times; page URLs are held only for the sample (and
// a 16-byte hash of each distinct one while they are counted). Unlike CheckSample on the
// whole bundle, a lookup that would pick among entries outside the sample (fuzzy, search)
// picks among the sample's.
func SampleBundle(dir string, maxPages, maxOthers int) (b *recording.Bundle, of *CheckTotals, total int, err error) {
	isPage := func(p *recording.Page) bool {
		if p.Fetched != "GET" && p.Fetched != "" {
			return false
		}
		_, err := parseTargetURL(p.URL)
		return err == nil
	}
	isDoc := func(e *recording.Entry) bool {
		if e.Method != "GET" || !(strings.EqualFold(e.ResourceType, "document") || e.Mime == "text/html") {
			return false
		}
		_, err := parseTargetURL(e.URL)
		return err == nil
	}
	// the pages: pages.jsonl's, else the HTML documents (as checkRequests)
	// distinct page URLs, as checkRequests counts them: a 16-byte hash of each is held
	// while the pages are counted and again while they are picked
	type urlKey [16]byte
	keyOf := func(u string) urlKey {
		sum := sha256.Sum256([]byte(u))
		return urlKey(sum[:16])
	}
	nPages := 0
	seen := map[urlKey]bool{}
	if err := recording.EachBundlePage(dir, func(p *recording.Page) error {
		if k := keyOf(p.URL); isPage(p) && !seen[k] {
			seen[k] = true
			nPages++
		}
		return nil
	}); err != nil {
		return nil, nil, 0, err
	}
	fromEntries := nPages == 0
	if fromEntries {
		if err := recording.EachBundleEntry(dir, func(_ int, e *recording.Entry) error {
			if k := keyOf(e.URL); isDoc(e) && !seen[k] {
				seen[k] = true
				nPages++
			}
			return nil
		}); err != nil {
			return nil, nil, 0, err
		}
	}
	pick := map[int]bool{}
	for _, k := range spread(nPages, maxPages) {
		pick[k] = true
	}
	sent := map[string]bool{} // the sampled page URLs
	k := 0
	clear(seen)
	visit := func(u string) {
		if key := keyOf(u); !seen[key] {
			seen[key] = true
			if pick[k] {
				sent[u] = true
			}
			k++
		}
	}
	if fromEntries {
		err = recording.EachBundleEntry(dir, func(_ int, e *recording.Entry) error {
			if isDoc(e) {
				visit(e.URL)
			}
			return nil
		})
	} else {
		err = recording.EachBundlePage(dir, func(p *recording.Page) error {
			if isPage(p) {
				visit(p.URL)
			}
			return nil
		})
	}
	seen = nil
	if err != nil {
		return nil, nil, 0, err
	}
	// the others: every exchange not sent as a page (as checkRequests)
	isOther := func(e *recording.Entry) bool {
		if _, err := parseTargetURL(e.URL); err != nil {
			return false
		}
		return !(e.Method == "GET" && sent[e.URL])
	}
	others := 0
	if err := recording.EachBundleEntry(dir, func(_ int, e *recording.Entry) error {
		total++
		if isOther(e) {
			others++
		}
		return nil
	}); err != nil {
		return nil, nil, 0, err
	}
	pickOther := map[int]bool{}
	for _, k := range spread(others, maxOthers) {
		pickOther[k] = true
	}
	k = 0
	seenPage := map[string]bool{}
	b, err = recording.OpenBundleSubset(dir, func(_ int, e *recording.Entry) bool {
		if !isOther(e) {
			return e.Method == "GET" && sent[e.URL] // what answers a sampled page
		}
		k++
		return pickOther[k-1]
	}, func(p *recording.Page) bool {
		if fromEntries || !sent[p.URL] || seenPage[p.URL] || !isPage(p) {
			return false
		}
		seenPage[p.URL] = true
		return true
	})
	if err != nil {
		return nil, nil, 0, err
	}
	if len(sent) < nPages || len(pickOther) < others {
		of = &CheckTotals{Pages: nPages, Others: others}
	}
	return b, of, total, nil
}
