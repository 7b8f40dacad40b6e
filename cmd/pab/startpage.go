package main

import (
	"mime"
	"net/url"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
)

// maxStartRedirects bounds the recorded redirects startPage follows from one page.
const maxStartRedirects = 10

// startPage returns the page pab browser opens first: the first page of pages.jsonl reached
// by GET that replay answers exactly from the recording with a 2xx HTML document, directly
// or after recorded redirects (at most maxStartRedirects). A page that redirects to a host
// or address the recording lacks, is missing, or answers 4xx or 5xx is passed over (a
// Heritrix crawl often starts with a redirect to another host it never fetched). When no
// page qualifies it is the first page, and "" without pages.
func startPage(ix *replay.Index, b *recording.Bundle) string {
	pages, _ := b.AllPages() // unreadable pages: none to start from
	for _, p := range pages {
		if (p.Fetched == "GET" || p.Fetched == "") && p.Note == "" && answersDocument(ix, b, p.URL) {
			return p.URL
		}
	}
	if len(pages) > 0 {
		return pages[0].URL
	}
	return ""
}

// answersDocument reports whether replay answers GET raw exactly with a 2xx HTML document,
// following the recorded redirects.
func answersDocument(ix *replay.Index, b *recording.Bundle, raw string) bool {
	u, err := url.Parse(raw)
	for range maxStartRedirects + 1 {
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return false
		}
		res := ix.Lookup(rules.Request{Method: "GET", URL: u})
		e := res.Entry
		if res.Source != replay.SourceExact || e == nil || e.Unresolved {
			return false
		}
		switch {
		case e.Status >= 200 && e.Status <= 299:
			return htmlMime(e.Mime) || (e.Mime == "" && e.ResourceType == "document")
		case e.Status >= 300 && e.Status <= 399:
			resp, rerr := b.Response(e)
			if rerr != nil || resp.Header.Get("Location") == "" {
				return false
			}
			u, err = u.Parse(resp.Header.Get("Location"))
		default:
			return false
		}
	}
	return false
}

// htmlMime reports whether a recorded Content-Type (without parameters) is an HTML document.
func htmlMime(mt string) bool {
	if m, _, err := mime.ParseMediaType(mt); err == nil {
		mt = m
	}
	return mt == "text/html" || mt == "application/xhtml+xml"
}
