package crawl

import (
	"net"
	"net/url"
	"path"
	"strings"

	"golang.org/x/net/publicsuffix"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
)

// canon returns raw as replay writes URLs in its log (replay.CanonicalURL), or "" for
// anything but an absolute http(s) URL.
func canon(raw string) string { return replay.CanonicalURL(raw) }

// schemeless is a canonical URL without its scheme: replay's keys ignore the scheme, so
// http://h/p and https://h/p are the same recorded page.
func schemeless(c string) string {
	if i := strings.Index(c, "://"); i >= 0 {
		return c[i+3:]
	}
	return c
}

// siteOf returns the site of an absolute URL: the registrable domain of its host (eTLD+1,
// "archive.org" for www.archive.org), or the host itself for an IP address, a single label
// or a public suffix. "" when raw does not parse.
func siteOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if net.ParseIP(host) != nil || !strings.Contains(host, ".") {
		return host
	}
	if s, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
		return s
	}
	return host
}

// notPages are path extensions of files that are not pages: links to them are not followed.
var notPages = map[string]bool{}

func init() {
	for _, e := range strings.Fields(`jpg jpeg png gif webp avif svg ico bmp tif tiff
		mp3 mp4 m4a m4v ogg ogv oga opus wav flac aac avi mov mkv webm wmv flv mpg mpeg m3u m3u8
		zip gz tgz bz2 xz 7z rar tar iso exe dmg msi deb rpm apk jar torrent
		pdf epub djvu doc docx xls xlsx ppt pptx odt
		css js mjs json woff woff2 ttf otf eot`) {
		notPages["."+e] = true
	}
}

// isPageLink reports whether a link to u (canonical) is worth opening as a page: not a file
// that is no page by its extension.
func isPageLink(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	return !notPages[strings.ToLower(path.Ext(p.Path))]
}

// Seeds returns the pages a crawl of b starts from, canonical and without repeats: every
// page of pages.jsonl reached by GET, in visit order; when there is none, every recorded
// GET of a document (resource type document or Content-Type text/html), in recording order.
func Seeds(b *recording.Bundle) []string {
	var out []string
	seen := map[string]bool{}
	add := func(raw string) {
		if c := canon(raw); c != "" && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	pages, _ := b.AllPages() // unreadable pages: the recorded documents below
	for _, p := range pages {
		if p.Fetched == "GET" || p.Fetched == "" {
			add(p.URL)
		}
	}
	if len(out) == 0 {
		for i := range b.Len() {
			e := *b.Entry(i)
			if e.Method == "GET" && (strings.EqualFold(e.ResourceType, "document") || e.Mime == "text/html") {
				add(e.URL)
			}
		}
	}
	return out
}
