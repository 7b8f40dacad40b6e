package record

import (
	"fmt"
	"mime"
	"net/url"
	"strings"

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
	// Warnings are the bundle writer's warnings (header fields left out).
	Warnings []string `json:"warnings,omitempty"`
}

// Build writes the bundle at dir (docs/bundle-format.md) from the journal at
// journalPath, through warc.BundleWriter: exchanges in journal order (ids e000001...),
// revisit records for identical payloads of warc.DedupMinSize bytes or more, no Cookie
// or Authorization, Set-Cookie values REDACTED; pages.jsonl from the exchanges marked
// RR-Page; manifest.not_found from the not-found probes that answered 404 with HTML. m is
// the manifest to write (its NotFound is replaced). The journal must be whole (see
// Recover); nothing is written at dir on error.
func Build(journalPath, dir string, m warc.Manifest) (*BuildReport, error) {
	rep := &BuildReport{NotFound: map[string]string{}}
	// First pass: the not-found pages, which the manifest (written first) names.
	err := scanJournal(journalPath, func(x *journalExchange) error {
		if x.resp.Get(HeaderPageNote) != NoteNotFoundProbe || x.resp.HTTP.StatusCode != 404 {
			return nil
		}
		if mt := mediaType(x.resp.HTTP.HTTPHeader().Get("Content-Type")); mt != "text/html" && mt != "application/xhtml+xml" {
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
	w, err := warc.NewBundleWriter(dir, m)
	if err != nil {
		return nil, err
	}
	err = scanJournal(journalPath, func(x *journalExchange) error {
		q, p := x.req.HTTP, x.resp.HTTP
		ex := warc.Exchange{
			Method:       q.Method,
			URL:          x.resp.TargetURI,
			Date:         x.resp.Date,
			ReqHeader:    q.HTTPHeader(),
			ReqBody:      q.Body,
			Status:       p.StatusCode,
			Proto:        p.Proto,
			RespHeader:   p.HTTPHeader(),
			Body:         p.Body,
			OrigEncoding: x.resp.Get("RR-Original-Content-Encoding"),
			ResourceType: x.resp.Get("RR-Resource-Type"),
		}
		e, err := w.Add(ex)
		if err != nil {
			return fmt.Errorf("build bundle from %s at offset %d: %w", journalPath, x.resp.Offset, err)
		}
		rep.Exchanges++
		fetched := x.resp.Get(HeaderPage)
		if fetched == "" {
			return nil
		}
		page := warc.Page{URL: e.URL, TS: e.TS, Fetched: fetched, Note: x.resp.Get(HeaderPageNote)}
		if e.Mime == "text/html" || e.Mime == "application/xhtml+xml" {
			page.Title = warc.HTMLTitle(p.Body)
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

// mediaType is a Content-Type without parameters, lower case.
func mediaType(ct string) string {
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}
