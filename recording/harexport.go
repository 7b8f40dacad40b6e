package recording

// harexport.go: a recording as a HAR 1.2 file (pab export --har; docs/import.md "HAR
// files"), and the pieces of it that a run's HAR (replay.WriteRunHAR) shares.

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/pab-dev/pab/har"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/warc"
)

// ExportHARFile writes the recording of b to path as a HAR 1.2 file (ExportHAR), through
// a temporary file renamed over path, so path is either the old file or the whole new one.
func ExportHARFile(b *Bundle, path, version string) error {
	return atomicfile.WriteFrom(path, 0o644, func(w io.Writer) error {
		return ExportHAR(b, w, version)
	})
}

// ExportHAR writes the recording of b to w as a HAR 1.2 file: one entry per exchange in
// recording order with the request (method, URL, header fields, body as postData) and
// the response (status, header fields, the stored decoded body as content text, base64
// for bytes that are not text) as recorded, creator "pab" version; pages from pages.jsonl,
// each entry's pageref the page it follows. Timings are not recorded, so they are 0.
// Cookies were stripped when recording: cookies arrays are empty and Set-Cookie values
// say REDACTED. A response whose body is not in the recording (an unresolved revisit, a
// HAR body not captured) has no content text and _pab.bodyNotCaptured. Each entry's _pab
// names its exchange id. Bodies are held one at a time.
func ExportHAR(b *Bundle, w io.Writer, version string) error {
	pages, _ := b.AllPages()
	log := har.Log{Creator: har.Creator{Name: "pab", Version: version}}
	pageOf := map[string]string{} // page URL + ts -> id
	for i, p := range pages {
		id := fmt.Sprintf("page_%d", i+1)
		title := p.Title
		if title == "" {
			title = p.URL
		}
		log.Pages = append(log.Pages, har.Page{StartedDateTime: p.TS, ID: id, Title: title})
		pageOf[p.URL] = id
	}
	hw, err := har.NewWriter(w, log)
	if err != nil {
		return err
	}
	cur := ""
	for i := range b.Entries {
		e := &b.Entries[i]
		if id, ok := pageOf[e.URL]; ok && e.ResourceType == ResourceDocument {
			cur = id
			delete(pageOf, e.URL)
		}
		he, err := HAREntry(b, e)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		he.Pageref = cur
		he.Pab = &har.PabInfo{Entry: e.ID, BodyNotCaptured: he.Pab != nil && he.Pab.BodyNotCaptured}
		if err := hw.WriteEntry(he); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	return hw.Close()
}

// HAREntry returns exchange e of b as a HAR entry (see ExportHAR) with its body read
// whole; a body not in the recording leaves the content without text and sets
// Pab.BodyNotCaptured.
func HAREntry(b *Bundle, e *Entry) (*har.Entry, error) {
	he := &har.Entry{StartedDateTime: e.TS, Time: 0, Timings: har.Timings{Blocked: -1, DNS: -1, Connect: -1, SSL: -1}}
	he.Request = har.Request{Method: e.Method, URL: e.URL, HTTPVersion: "HTTP/1.1", HeadersSize: -1}
	he.Request.QueryString = har.QueryString(e.URL)
	if e.ReqLength > 0 {
		rec, err := b.record(e.ReqOffset, e.ReqLength)
		if err != nil {
			return nil, fmt.Errorf("entry %s: request record: %w", e.ID, err)
		}
		lines, _, err := warc.ReadHeadLines(io.NewSectionReader(b.warc, rec.blockOff, rec.blockLen), warc.MaxHTTPHeaderBytes, true)
		if err != nil {
			return nil, fmt.Errorf("entry %s: request head: %w", e.ID, err)
		}
		// the request line, then header fields read as a response head's are
		if f := strings.Fields(lines[0]); len(f) == 3 {
			he.Request.HTTPVersion = f[2]
		}
		if p := rec.fields.Get("WARC-Protocol"); p != "" {
			he.Request.HTTPVersion = p
		}
		r, err := parseHTTPResponseHead(append([]string{"HTTP/1.1 200 OK"}, lines[1:]...))
		if err != nil {
			return nil, fmt.Errorf("entry %s: request head: %w", e.ID, err)
		}
		he.Request.Headers = harHeaders(r.Header, lines[1:])
	}
	body, err := b.RequestBody(e)
	if err != nil {
		return nil, err
	}
	he.Request.BodySize = int64(len(body))
	if len(body) > 0 {
		pd := &har.PostData{MimeType: e.ReqType}
		c := har.Content{MimeType: e.ReqType}
		c.SetBody(body)
		pd.Text, pd.Encoding = c.Text, c.Encoding
		he.Request.PostData = pd
	}

	var resp *Response
	if e.Unresolved {
		resp, err = b.response(e, "revisit")
	} else {
		resp, err = b.Response(e)
	}
	if err != nil {
		return nil, err
	}
	he.Response = har.Response{Status: e.Status, StatusText: http.StatusText(e.Status), HTTPVersion: resp.Proto, HeadersSize: -1, BodySize: -1,
		Headers: harHeaders(resp.Header, nil), RedirectURL: resp.Header.Get("Location")}
	if he.Request.HTTPVersion != "" && !strings.HasPrefix(he.Request.HTTPVersion, "HTTP/1") {
		he.Response.HTTPVersion = he.Request.HTTPVersion
	}
	he.Response.Content.MimeType = resp.Header.Get("Content-Type")
	if he.Response.Content.MimeType == "" {
		he.Response.Content.MimeType = "x-unknown"
	}
	if e.Unresolved {
		he.Response.Content.Size = -1
		he.Pab = &har.PabInfo{BodyNotCaptured: true}
		return he, nil
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("entry %s: body: %w", e.ID, err)
	}
	he.Response.Content.SetBody(data)
	he.Response.BodySize = int64(len(data))
	return he, nil
}

// harHeaders lists h as HAR header items, the names as recorded, values in order; the
// order of lines (a head's field lines) is kept when given, else names sorted.
func harHeaders(h map[string][]string, lines []string) []har.Header {
	out := []har.Header{}
	seen := map[string]bool{}
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		for _, v := range h[name] {
			out = append(out, har.Header{Name: name, Value: v})
		}
	}
	for _, l := range lines {
		if n, _, ok := strings.Cut(l, ":"); ok {
			n = strings.TrimSpace(n)
			for k := range h {
				if strings.EqualFold(k, n) {
					add(k)
				}
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		add(k)
	}
	return out
}
