package record

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/pab-dev/pab/internal/httpx"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/warc"
)

// BuildReport says what Build wrote.
type BuildReport struct {
	Exchanges int `json:"exchanges"`
	Pages     int `json:"pages"`
	// NotFound is manifest.not_found: site host -> URL of its recorded 404 page.
	NotFound map[string]string `json:"not_found,omitempty"`
	// Title is the first page's <title>, "" when none.
	Title string `json:"title,omitempty"`
	// Locale and Timezone are what the manifest got: the given ones, or for a locale not
	// given, the browser's (LocaleFrom says from where: "accept-language" when taken from
	// the first tag of the first page request's Accept-Language, else of the first
	// request's; "" when given or not found).
	Locale     string `json:"locale,omitempty"`
	Timezone   string `json:"timezone,omitempty"`
	LocaleFrom string `json:"locale_from,omitempty"`
	// ScriptPages counts the pages.jsonl lines with fetched "none": addresses page script
	// moved to (history.pushState, replaceState) that later requests named (see Build).
	ScriptPages int `json:"script_pages,omitempty"`
	// Warnings are the bundle writer's warnings (header fields left out).
	Warnings []string `json:"warnings,omitempty"`
}

// Build writes the bundle at dir (docs/bundle-format.md) from the journal at
// journalPath, through recording.BundleWriter: exchanges in journal order (ids e000001...),
// revisit records for identical payloads of recording.DedupMinSize bytes or more, no Cookie
// or Authorization, Set-Cookie values REDACTED; pages.jsonl from the exchanges marked
// RR-Page; manifest.not_found from the not-found probes that answered 404 with HTML. m is
// the manifest to write (its NotFound is replaced; an empty Locale is set to the first tag
// of the Accept-Language of the first page request recorded, else of the first request,
// when one has it). Pages reached by page script (history.pushState) send no request, so
// the recorder never sees them; Build infers them from later requests that name them
// (scriptPages) and writes them with fetched "none". The journal must be whole (see
// Recover); nothing is written at dir on error.
func Build(journalPath, dir string, m recording.Manifest) (*BuildReport, error) {
	rep := &BuildReport{NotFound: map[string]string{}}
	// First pass: the not-found pages, which the manifest (written first) names, and the
	// browser's language when none is given.
	var pageLang, anyLang string
	sp := newScriptPages()
	err := scanJournal(journalPath, func(x *journalExchange) error {
		sp.learn(x)
		if m.Locale == "" && pageLang == "" && x.resp.Get(HeaderPageNote) == "" {
			if tag := recording.AcceptLanguageTag(x.req.HTTP.HTTPHeader().Get("Accept-Language")); tag != "" {
				if x.resp.Get(HeaderPage) != "" {
					pageLang = tag
				} else if anyLang == "" {
					anyLang = tag
				}
			}
		}
		if x.resp.Get(HeaderPageNote) != NoteNotFoundProbe || x.resp.HTTP.StatusCode != 404 {
			return nil
		}
		if mt := httpx.MediaType(x.resp.HTTP.HTTPHeader().Get("Content-Type")); mt != "text/html" && mt != "application/xhtml+xml" {
			return nil
		}
		if u, err := url.Parse(x.resp.TargetURI); err == nil && rep.NotFound[u.Host] == "" {
			rep.NotFound[u.Host] = x.resp.TargetURI
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	m.NotFound = nil
	if len(rep.NotFound) > 0 {
		m.NotFound = rep.NotFound
	}
	if m.Locale == "" {
		if m.Locale = cmp.Or(pageLang, anyLang); m.Locale != "" {
			rep.LocaleFrom = "accept-language"
		}
	}
	rep.Locale, rep.Timezone = m.Locale, m.Timezone
	w, err := recording.NewBundleWriter(dir, m)
	if err != nil {
		return nil, err
	}
	err = scanJournal(journalPath, func(x *journalExchange) error {
		q, p := x.req.HTTP, x.resp.HTTP
		ex := recording.Exchange{
			Method:       q.Method,
			URL:          x.resp.TargetURI,
			Date:         x.resp.Date,
			ReqHeader:    q.HTTPHeader(),
			ReqBody:      q.Body,
			Status:       p.StatusCode,
			Proto:        p.Proto,
			RespHeader:   p.HTTPHeader(),
			Body:         p.Body,
			OrigEncoding: x.resp.Get(warc.HeaderOriginalContentEncoding),
			ResourceType: x.resp.Get(warc.HeaderResourceType),
		}
		e, err := w.Add(ex)
		if err != nil {
			return fmt.Errorf("build bundle from %s at offset %d: %w", journalPath, x.resp.Offset, err)
		}
		rep.Exchanges++
		if u, ok := sp.page(x); ok {
			rep.Pages++
			rep.ScriptPages++
			if err := w.AddPage(recording.Page{URL: u, TS: e.TS, Fetched: "none"}); err != nil {
				return err
			}
		}
		fetched := x.resp.Get(HeaderPage)
		if fetched == "" {
			return nil
		}
		page := recording.Page{URL: e.URL, TS: e.TS, Fetched: fetched, Note: x.resp.Get(HeaderPageNote)}
		if e.Mime == "text/html" || e.Mime == "application/xhtml+xml" {
			page.Title = recording.HTMLTitle(p.Body)
		}
		if rep.Title == "" && page.Note == "" {
			rep.Title = page.Title
		}
		rep.Pages++
		return w.AddPage(page)
	})
	if err != nil {
		w.Abort()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	rep.Warnings = w.Warnings()
	return rep, nil
}

// scriptPages finds the pages a single-page app reached with history.pushState or
// replaceState while recording. Such a navigation sends no request; what the proxy does
// see are the requests the page makes afterwards, whose Referer is the document's address
// at that time (Fetch standard, "determine request's referrer"). A request names such a page
// when all of these hold:
//
//   - it is same-origin (Sec-Fetch-Site: same-origin) and its Sec-Fetch-Dest is one a
//     document's own requests have (empty for fetch/XHR, image, script, style, font, ...),
//     not a navigation, a frame or a worker;
//   - its Referer is an absolute http(s) URL of the request's own origin, of an origin the
//     recording has a page of, and is neither a page navigated to anywhere in the recording
//     (GET or POST, the not-found probe included) nor the URL of a recorded stylesheet,
//     script or other resource (a font requested by a stylesheet names the stylesheet) or
//     frame;
//   - no earlier request named it.
//
// What it cannot know: an address changed without a request after it, a page whose
// requests send no full Referer (Referrer-Policy no-referrer or origin, or only
// cross-origin requests, whose Referer is the origin alone by default), the fragment
// (#...) of an address, which a Referer never carries, and the page's title.
type scriptPages struct {
	navigated map[string]bool // URLs of navigations (pages) anywhere in the journal
	resources map[string]bool // URLs of recorded exchanges that are not top-level documents
	origins   map[string]bool // origins of the pages seen so far (second pass)
	named     map[string]bool // script pages already written
}

func newScriptPages() *scriptPages {
	return &scriptPages{navigated: map[string]bool{}, resources: map[string]bool{}, origins: map[string]bool{}, named: map[string]bool{}}
}

// learn notes x in the first pass over the journal.
func (sp *scriptPages) learn(x *journalExchange) {
	u := stripFragment(x.resp.TargetURI)
	if x.resp.Get(HeaderPage) != "" {
		sp.navigated[u] = true
		return
	}
	if !strings.EqualFold(x.resp.Get(warc.HeaderResourceType), "document") || !isTopDocument(x.req.HTTP.HTTPHeader()) {
		sp.resources[u] = true
	}
}

// page reports the page that x names, in the second pass (journal order), once per page.
func (sp *scriptPages) page(x *journalExchange) (string, bool) {
	if x.resp.Get(HeaderPage) != "" {
		if o := originOf(x.resp.TargetURI); o != "" {
			sp.origins[o] = true
		}
		return "", false
	}
	h := x.req.HTTP.HTTPHeader()
	if !strings.EqualFold(h.Get("Sec-Fetch-Site"), "same-origin") {
		return "", false
	}
	switch strings.ToLower(h.Get("Sec-Fetch-Dest")) {
	case "", "document", "iframe", "frame", "embed", "object", "worker", "sharedworker", "serviceworker",
		"audioworklet", "paintworklet", "report":
		return "", false
	}
	ref := stripFragment(h.Get("Referer"))
	o := originOf(ref)
	if o == "" || o != originOf(x.resp.TargetURI) || !sp.origins[o] {
		return "", false
	}
	if sp.navigated[ref] || sp.resources[ref] || sp.named[ref] {
		return "", false
	}
	sp.named[ref] = true
	return ref, true
}

// isTopDocument reports whether a request header is a top-level navigation's.
func isTopDocument(h http.Header) bool {
	return strings.EqualFold(h.Get("Sec-Fetch-Dest"), "document")
}

// originOf is "scheme://host" of an absolute http(s) URL (host lower case), else "".
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

// stripFragment is raw without its #fragment.
func stripFragment(raw string) string {
	s, _, _ := strings.Cut(raw, "#")
	return s
}
