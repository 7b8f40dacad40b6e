package grade

import (
	"bytes"
	"io"
	"mime"
	"net/url"
	"strings"

	"golang.org/x/net/html"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
)

// MaxFrameSources bounds how many frame URLs FrameSources returns for one document.
const MaxFrameSources = 256

// FrameSources returns the URLs of the frames an HTML document embeds: the src of its
// <iframe> and <frame> elements, resolved against base (the document's URL, or the href of
// its first <base> element), normalized as replay logs URLs (scheme and host in lower case,
// default port and fragment dropped, empty path "/"), in document order, at most
// MaxFrameSources. Only http(s) URLs are kept (about:blank, srcdoc and javascript: frames
// load nothing from the replay). Frames that a script adds or points elsewhere are not in
// the document, so they are not found.
func FrameSources(body []byte, base string) []string {
	bu, err := url.Parse(base)
	if err != nil {
		return nil
	}
	var out []string
	baseSeen := false
	z := html.NewTokenizer(bytes.NewReader(body))
	for len(out) < MaxFrameSources {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		tag := string(name)
		if !hasAttr || (tag != "iframe" && tag != "frame" && tag != "base") {
			continue
		}
		var src string
		for {
			k, v, more := z.TagAttr()
			if (tag == "base" && string(k) == "href") || (tag != "base" && string(k) == "src") {
				src = strings.TrimSpace(string(v))
				break
			}
			if !more {
				break
			}
		}
		if src == "" {
			continue
		}
		ref, err := bu.Parse(src)
		if err != nil {
			continue
		}
		if tag == "base" {
			if !baseSeen {
				baseSeen = true
				bu = ref
			}
			continue
		}
		if u := normalLogURL(ref); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// normalLogURL returns u as replay writes URLs in its log (see FrameSources), or "" when u
// is not an absolute http(s) URL.
func normalLogURL(u *url.URL) string {
	if s := strings.ToLower(u.Scheme); (s != "http" && s != "https") || u.Host == "" {
		return ""
	}
	return replay.NormalizeURL(u).String()
}

// logURLKey is the form of a logged URL that FrameSources' URLs are compared in.
func logURLKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if n := normalLogURL(u); n != "" {
		return n
	}
	return raw
}

// MaxFrameScan bounds how much of a recorded document PageFrames reads for its frames, in bytes.
const MaxFrameScan = 8 << 20

// PageFrames maps the recorded exchanges that answered document requests of the log
// (entry ids) to the frames their HTML embeds (FrameSources), for grade.Input.Frames.
// Only 2xx HTML answers are read, each once, at most MaxFrameScan bytes of it; documents
// without frames are left out.
func PageFrames(b *recording.Bundle, lines []replay.LogLine) map[string][]string {
	out := map[string][]string{}
	done := map[string]bool{}
	for i := range lines {
		l := &lines[i]
		if l.Entry == "" || l.Type != replay.TypeDocument || done[l.Entry] {
			continue
		}
		done[l.Entry] = true
		e := b.ByID(l.Entry)
		if e == nil {
			continue
		}
		resp, err := b.Response(e)
		if err != nil || resp.Status < 200 || resp.Status > 299 {
			continue
		}
		if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || (mt != "text/html" && mt != "application/xhtml+xml") {
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, MaxFrameScan))
		if err != nil {
			continue
		}
		if fs := FrameSources(body, e.URL); len(fs) > 0 {
			out[l.Entry] = fs
		}
	}
	return out
}
