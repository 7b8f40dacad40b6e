package recording

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/pab-dev/pab/internal/httpx"
	"github.com/pab-dev/pab/internal/iobuf"
	"github.com/pab-dev/pab/warc"
	"golang.org/x/net/html"
)

// This file turns one imported response record (an inRec, paired and resolved) into the
// Exchange and Page the bundle writer takes: decoded body, repaired header, resource type,
// and whether it is a page.

// repairedHeader returns m's header as an http.Header. A field name with blanks between
// valid token words ("Upgrade-Insecure Requests", written by node-warc for
// "Upgrade-Insecure-Requests") is read with dashes instead, with a warning; other names
// that are not tokens are kept and left for the writer to drop.
func repairedHeader(m *warc.HTTPMessage, x *inRec, warn func(string)) http.Header {
	h := make(http.Header, len(m.Header))
	for _, f := range m.Header {
		name := f.Name
		if strings.ContainsAny(name, " \t") {
			words := strings.Fields(name)
			ok := true
			for _, w := range words {
				ok = ok && warc.IsHTTPToken(w)
			}
			if ok {
				name = strings.Join(words, "-")
				warn(fmt.Sprintf("%s at %s: HTTP header name %q read as %q", x.in.path, x.rec.Where(), f.Name, name))
			}
		}
		h.Add(name, f.Value)
	}
	return h
}

func methodOf(x *inRec) string {
	if x.req != nil && x.req.rec.HTTP != nil {
		return x.req.rec.HTTP.Method
	}
	return http.MethodGet
}

// decodedBody decodes (once) the body of a response record, from the spool into the
// spool (see decodeSpooled).
func (x *inRec) decodedBody(rep *ImportReport, warn func(string), sp *warc.Spool) (warc.Span, string, error) {
	if !x.decodedDone {
		x.decodedDone = true
		h := x.rec.HTTP.HTTPHeader()
		d, enc, fr, err := decodeSpooled(sp, h, x.rec.Body, MaxImportDecodedSize)
		cut := fr.truncated
		var se *warc.SinkError
		switch {
		case errors.As(err, &se):
			if errors.Is(err, warc.ErrSpoolFull) {
				return warc.Span{}, "", fmt.Errorf("import %s at %s: the decoded bodies hold more than %d bytes", x.in.path, x.rec.Where(), sp.Limit)
			}
			return warc.Span{}, "", fmt.Errorf("import %s at %s: %w", x.in.path, x.rec.Where(), err)
		case err != nil:
			rep.DecodeFailures++
			x.keptEnc = len(warc.ContentCodings(h)) > 0
			warn(fmt.Sprintf("%s at %s: body of %s kept encoded, with its Content-Encoding %q: %v", x.in.path, x.rec.Where(), x.rec.TargetURI, h.Get("Content-Encoding"), err))
		}
		x.decoded, x.origEnc = d, enc
		x.truncated = strings.TrimSpace(x.rec.Get("WARC-Truncated"))
		if cut {
			rep.Truncated++
			if x.truncated == "" {
				x.truncated = "unspecified"
			}
			warn(fmt.Sprintf("%s at %s: chunked body of %s ends before its last chunk (cut short); stored the %d data bytes it holds, without the chunk framing, marked WARC-Truncated: %s",
				x.in.path, x.rec.Where(), x.rec.TargetURI, d.N, x.truncated))
		}
		if len(fr.repairs) > 0 {
			rep.FramingRepaired++
			what := strings.Join(fr.repairs, ", ")
			x.notes = append(x.notes, NoteDechunkedLeniently+": "+what)
			warn(fmt.Sprintf("%s at %s: chunked body of %s de-chunked as a browser reads it (%s); stored the %d decoded bytes",
				x.in.path, x.rec.Where(), x.rec.TargetURI, what, d.N))
		}
		if cl, ok := singleContentLength(h); ok && x.rec.Body.N > cl && !warc.HasToken(h.Values("Transfer-Encoding"), "chunked") &&
			httpx.MediaType(h.Get("Content-Type")) == "text/html" {
			rep.LongerThanLength++
			x.notes = append(x.notes, fmt.Sprintf("%s: %d bytes, Content-Length %d", NoteLongerThanLength, x.rec.Body.N, cl))
			warn(fmt.Sprintf("%s at %s: HTML payload of %s is %d bytes, longer than its recorded Content-Length %d (a capture of the page's DOM, not of the bytes sent?): kept whole (replay notes it in its log)",
				x.in.path, x.rec.Where(), x.rec.TargetURI, x.rec.Body.N, cl))
		}
		if fr.broken {
			rep.FramingKept++
			x.notes = append(x.notes, NoteChunkedKept)
			warn(fmt.Sprintf("%s at %s: body of %s says chunked and starts as chunks, but its framing breaks off: stored as recorded, chunk-size lines included (replay notes it in its log, pab audit reports it)",
				x.in.path, x.rec.Where(), x.rec.TargetURI))
		}
	}
	return x.decoded, x.origEnc, nil
}

// decodeSpooled is DecodePayloadLimit for a body in the spool: each step (the chunked
// framing, then each content coding) reads one region of sp and appends its result as a
// new one, through fixed-size buffers. It returns the region of the payload. An error of
// the spool itself (full, or the disk) is a *sinkError; any other error means a coding
// could not be removed, and the region returned is then the body with only the chunked
// framing removed, origEncoding "", as DecodePayloadLimit does.
//
// Unlike DecodePayloadLimit, a chunked body cut short (chunkDecoder.truncated: it ends
// inside a chunk or before the last chunk) is de-chunked too, keeping every data byte it
// holds, and truncated is true (bundle-format.md, rule F3): chunk framing is never stored as
// payload.
func decodeSpooled(sp *warc.Spool, header http.Header, body warc.Span, limit int64) (decoded warc.Span, origEncoding string, fr framing, err error) {
	if warc.HasToken(header.Values("Transfer-Encoding"), "chunked") {
		m := sp.Mark()
		dc := warc.NewChunkDecoder(sp)
		if _, err := iobuf.Copy(dc, sp.Section(body)); err != nil {
			sp.Truncate(m)
			return body, "", fr, &warc.SinkError{Err: err}
		}
		fr.truncated = dc.Truncated()
		switch {
		case dc.OK() || fr.truncated:
			body = sp.Since(m)
			if dc.OK() {
				fr.repairs = dc.Repairs()
			}
		default:
			fr.broken = dc.Broken()
			sp.Truncate(m)
		}
	}
	codings := warc.ContentCodings(header)
	if len(codings) == 0 {
		return body, "", fr, nil
	}
	orig := strings.Join(codings, ", ")
	if body.N == 0 {
		return body, orig, fr, nil
	}
	start := sp.Mark()
	out := body
	for i := len(codings) - 1; i >= 0; i-- {
		src := out
		m := sp.Mark()
		err := warc.DecodeOneTo(codings[i], func() io.Reader { return sp.Section(src) }, sp, func() { sp.Truncate(m) }, limit, MaxImportZstdWindow)
		if err != nil {
			sp.Truncate(start)
			var se *warc.SinkError
			if errors.As(err, &se) {
				return body, "", fr, err
			}
			return body, "", fr, fmt.Errorf("content-encoding %s: %w", codings[i], err)
		}
		out = sp.Since(m)
	}
	return out, orig, fr, nil
}

// framing is what removing a body's chunked framing found (decodeSpooled).
type framing struct {
	// truncated: chunked data cut short, de-chunked (rule F3)
	truncated bool
	// repairs names what was de-chunked beyond RFC 9112's grammar (chunkDecoder.repairs)
	repairs []string
	// broken: chunk framing that does not parse to the end, kept as recorded
	// (chunkDecoder.broken)
	broken bool
}

// requestBody reads the body of a request record from the spool, de-chunked when its
// header says chunked and it parses so; it is at most MaxRequestBodySize bytes.
func (x *inRec) requestBody(h http.Header, sp *warc.Spool) ([]byte, error) {
	if x.rec.Body.N > MaxRequestBodySize {
		return nil, fmt.Errorf("import %s at %s: request body of %s is %d bytes, more than the limit of %d", x.in.path, x.rec.Where(), x.rec.TargetURI, x.rec.Body.N, MaxRequestBodySize)
	}
	body, err := sp.ReadPrefix(x.rec.Body, x.rec.Body.N)
	if err != nil {
		return nil, fmt.Errorf("import %s at %s: %w", x.in.path, x.rec.Where(), err)
	}
	if warc.HasToken(h.Values("Transfer-Encoding"), "chunked") {
		if d, ok := warc.Dechunk(body); ok {
			body = d
		}
	}
	return body, nil
}

// htmlTitle is (once) the title of the decoded payload, read from its first 1 MiB.
func (x *inRec) htmlTitle(sp *warc.Spool) (string, error) {
	if !x.titleDone {
		doc, err := sp.ReadPrefix(x.decoded, 1<<20)
		if err != nil {
			return "", fmt.Errorf("import %s at %s: %w", x.in.path, x.rec.Where(), err)
		}
		x.title, x.titleDone = HTMLTitle(doc), true
	}
	return x.title, nil
}

// buildExchange turns x into the Exchange to write; its payload is a region of sp.
func buildExchange(x *inRec, rep *ImportReport, warn func(string), sp *warc.Spool) (Exchange, error) {
	ex := Exchange{
		Method:     methodOf(x),
		URL:        x.rec.TargetURI,
		Date:       x.rec.Date,
		Status:     x.status,
		RespHeader: x.header,
	}
	if x.rec.HTTP != nil {
		ex.Proto = x.rec.HTTP.Proto
	}
	ex.Protocols = protocolsOf(x)
	if x.req != nil {
		q := x.req.rec.HTTP
		ex.ReqHeader = repairedHeader(q, x.req, warn)
		body, err := x.req.requestBody(ex.ReqHeader, sp)
		if err != nil {
			return ex, err
		}
		ex.ReqBody = body
	}
	switch {
	case x.rec.Type == "response":
		body, enc, err := x.decodedBody(rep, warn, sp)
		if err != nil {
			return ex, err
		}
		ex.BodyAt, ex.BodySize, ex.OrigEncoding = sp.Section(body), body.N, enc
		ex.Truncated, ex.PayloadNotes = x.truncated, x.notes
	case x.orig != nil:
		rep.RevisitsResolved++
		body, enc, err := x.orig.decodedBody(rep, warn, sp)
		if err != nil {
			return ex, err
		}
		ex.OrigEncoding = enc
		if x.orig.exchangeID != "" {
			ex.RevisitOf = x.orig.exchangeID
		} else {
			// the original comes later (or was skipped): store the payload here
			ex.BodyAt, ex.BodySize = sp.Section(body), body.N
			ex.Truncated, ex.PayloadNotes = x.orig.truncated, x.orig.notes
		}
		switch {
		case x.orig.keptEnc:
			// The original's payload is still encoded: its Content-Encoding describes it.
			ex.RespHeader = cloneHeader(ex.RespHeader)
			ex.RespHeader["Content-Encoding"] = x.orig.rec.HTTP.HTTPHeader().Values("Content-Encoding")
		case enc == "":
			// The stored payload carries no encoding: a Content-Encoding of the revisit's
			// own header does not describe it.
			delHeader(ex.RespHeader, "Content-Encoding")
		}
	default:
		rep.RevisitsUnresolved++
		t, _ := warc.ParseWARCDate(x.rec.Get("WARC-Refers-To-Date"))
		ex.Unresolved = &UnresolvedRevisit{
			TargetURI:     warc.CleanTargetURI(x.rec.Get("WARC-Refers-To-Target-URI")),
			Date:          t,
			PayloadDigest: x.rec.Get("WARC-Payload-Digest"),
		}
		ex.OrigEncoding = strings.ToLower(strings.TrimSpace(ex.RespHeader.Get("Content-Encoding")))
	}
	ex.ResourceType = resourceType(x, ex)
	return ex, nil
}

// protocolsOf lists the WARC-Protocol values (WARC 1.1 section 5.15) of a response's record
// and of its request's, in record order, each once.
func protocolsOf(x *inRec) []string {
	var out []string
	add := func(r *warc.Record) {
		for _, v := range r.Header.Values("WARC-Protocol") {
			if v = strings.TrimSpace(v); v != "" && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	add(x.rec)
	if x.req != nil {
		add(x.req.rec)
	}
	return out
}

// resourceType is the RR-Resource-Type of an exchange: the input's own RR-Resource-Type
// or WARC-Resource-Type when present, else from the request's Sec-Fetch-Dest, else from
// the response's media type (the Resource* constants).
func resourceType(x *inRec, ex Exchange) string {
	for _, name := range []string{warc.HeaderResourceType, "WARC-Resource-Type"} {
		if v := strings.ToLower(strings.TrimSpace(x.rec.Get(name))); v != "" {
			return v
		}
	}
	// a destination with no type of its own (object, embed, ...) leaves it to the media type
	if t := ResourceTypeFromDest(ex.ReqHeader.Get("Sec-Fetch-Dest")); t != "" && t != ResourceOther {
		return t
	}
	if t := ResourceTypeFromMime(httpx.MediaType(ex.RespHeader.Get("Content-Type"))); t != "" {
		return t
	}
	return ResourceOther
}

// navSignal says what a request's headers tell of it being a navigation: "yes", "no",
// or "" when they tell nothing (no Sec-Fetch-Dest, no Accept naming text/html).
func navSignal(q http.Header) string {
	if dest := strings.ToLower(q.Get("Sec-Fetch-Dest")); dest != "" {
		if dest == "document" {
			return "yes"
		}
		return "no"
	}
	if strings.Contains(strings.ToLower(strings.Join(q.Values("Accept"), ",")), "text/html") {
		return "yes"
	}
	return ""
}

// pageOf decides whether an exchange is a top-level page (see ImportWARCs); signals
// tells whether any request of the input carries navigation headers. The title is read
// from the payload in sp.
func pageOf(x *inRec, e Entry, signals bool, sp *warc.Spool) (Page, bool, error) {
	if e.Status < 200 || e.Status > 399 || e.Status == 204 || e.Status == 205 || e.Mime != "text/html" || e.Unresolved {
		return Page{}, false, nil
	}
	if e.Method != http.MethodGet && e.Method != http.MethodPost {
		return Page{}, false, nil
	}
	var q http.Header
	if x.req != nil {
		q = x.req.rec.HTTP.HTTPHeader()
	}
	switch navSignal(q) {
	case "no":
		return Page{}, false, nil
	case "":
		if signals || e.Method != http.MethodGet {
			return Page{}, false, nil
		}
	}
	src := x
	if x.orig != nil {
		src = x.orig // a revisit's payload is its original's
	}
	if !src.decodedDone {
		return Page{URL: e.URL, TS: e.TS, Fetched: e.Method}, true, nil
	}
	title, err := src.htmlTitle(sp)
	if err != nil {
		return Page{}, false, err
	}
	return Page{URL: e.URL, TS: e.TS, Fetched: e.Method, Title: title}, true, nil
}

// HTMLTitle returns the text of the first <title> element of an HTML document, blanks
// collapsed, at most 300 bytes, or "" when there is none; it reads at most the first 1 MiB
// of doc.
func HTMLTitle(doc []byte) string {
	if len(doc) > 1<<20 {
		doc = doc[:1<<20]
	}
	z := html.NewTokenizer(bytes.NewReader(doc))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken:
			name, _ := z.TagName()
			if string(name) != "title" {
				continue
			}
			var sb strings.Builder
			for {
				tt := z.Next()
				if tt == html.TextToken {
					sb.Write(z.Text())
					continue
				}
				break
			}
			t := strings.Join(strings.Fields(sb.String()), " ")
			if len(t) > 300 {
				t = t[:300]
			}
			return t
		}
	}
}
