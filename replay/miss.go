package replay

import (
	"bytes"
	"html"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Notes written in the log's "note" field.
const (
	noteUnresolved = "body not in recording (a revisit without its original, or a HAR body not captured)"
	noteHTTP2      = "HTTP/2 request: HTTP/2 is turned off (--http2=false)"
	noteH2C        = "HTTP/2 without TLS (h2c prior knowledge) to the proxy itself: send requests through the proxy over HTTP/1.1, or CONNECT"
	noteWebSocket  = "WebSocket upgrade: WebSockets are not replayed"
	noteExcluded   = "excluded by rules"
)

// preflightMaxAge is the Access-Control-Max-Age (seconds) of allowed preflights.
const preflightMaxAge = "600"

// Miss answers, by request type (docs/replay.md "Miss answers"):
//
//   - tracker (a block rule matched): 204, no body.
//   - image, font, style, script, media: 404 with an empty body.
//   - document: the site's own 404 page when the manifest's not_found names a recorded page
//     for the host (served with status 404), else a small HTML page saying the address is
//     not in the recording.
//   - api: 404 with the rules' xhr_not_found body for the host; else "{}" as
//     application/json when the client accepts JSON; else an empty body.
//   - other: 404 with a one-line text/plain body.
//   - an unrecorded CORS preflight (OPTIONS with Access-Control-Request-Method): 204
//     allowing the request (source "preflight").
//
// A miss answer to a request with an Origin header allows that origin (CORS), so that a
// page's script sees the 404 instead of a network error.

// isPreflight reports a CORS preflight request (Fetch standard, section 3.2.2 "CORS
// protocol": OPTIONS with Access-Control-Request-Method).
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

// preflightAnswer allows an unrecorded CORS preflight: 204 echoing the request's Origin,
// method and headers, with credentials allowed.
func preflightAnswer(r *http.Request) *answer {
	h := http.Header{}
	origin := r.Header.Get("Origin")
	if origin == "" {
		origin = "*"
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", r.Header.Get("Access-Control-Request-Method"))
	if rh := r.Header.Get("Access-Control-Request-Headers"); rh != "" {
		h.Set("Access-Control-Allow-Headers", rh)
	}
	if origin != "*" {
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Set("Vary", "Origin")
	}
	if r.Header.Get("Access-Control-Request-Private-Network") != "" {
		h.Set("Access-Control-Allow-Private-Network", "true")
	}
	h.Set("Access-Control-Max-Age", preflightMaxAge)
	return &answer{status: http.StatusNoContent, header: h, source: SourcePreflight}
}

// blockedAnswer is the 204 sent for requests a block rule matches.
func blockedAnswer() *answer {
	return &answer{status: http.StatusNoContent, header: http.Header{}, source: SourceBlocked, typ: TypeTracker}
}

// textAnswer is a synthesized answer with a small body.
func textAnswer(status int, contentType, body string) *answer {
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	h.Set("Cache-Control", "no-store")
	return &answer{status: status, header: h, body: bytes.NewReader([]byte(body)), size: int64(len(body)), source: SourceMiss}
}

// unsupportedAnswer answers requests replay cannot serve at all (HTTP/2, WebSocket).
func unsupportedAnswer(status int, note, method, url string) *answer {
	a := textAnswer(status, "text/plain; charset=utf-8", "pab replay: "+note+"\n"+method+" "+url+"\n")
	a.note = note
	return a
}

// missAnswer builds the answer for a request nothing recorded matches.
func (s *Server) missAnswer(r *http.Request, typ, url string) *answer {
	var a *answer
	switch typ {
	case TypeImage, TypeFont, TypeStyle, TypeScript, TypeMedia:
		a = textAnswer(http.StatusNotFound, "", "")
	case TypeDocument:
		a = s.notFoundPage(r)
		if a == nil {
			a = textAnswer(http.StatusNotFound, "text/html; charset=utf-8", notFoundHTML(r.Method, url))
		}
	case TypeAPI:
		if ct, body, ok := s.ix.rs.XHRNotFound(hostname(r.URL.Host)); ok {
			a = textAnswer(http.StatusNotFound, ct, body)
			a.rule = s.ix.xhrRule(hostname(r.URL.Host))
		} else if acceptsJSON(r.Header.Get("Accept")) {
			a = textAnswer(http.StatusNotFound, "application/json", "{}")
		} else {
			a = textAnswer(http.StatusNotFound, "", "")
		}
	default:
		a = textAnswer(http.StatusNotFound, "text/plain; charset=utf-8", "pab replay: not in the recording: "+r.Method+" "+url+"\n")
	}
	if origin := r.Header.Get("Origin"); origin != "" && a.header.Get("Access-Control-Allow-Origin") == "" {
		h := a.ownHeader() // the site's own 404 page is a recorded answer: its head is shared
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Add("Vary", "Origin")
	}
	a.source = SourceMiss
	s.clockMiss(a)
	return a
}

// clockMiss gives the page clock to a miss answer pab wrote itself as text/html (the plain
// 404 page, an xhr_not_found body declared text/html): every HTML answer of a replay sees
// the recording's time, not only the recorded ones. The site's own 404 page got it already
// in recordedAnswer.
func (s *Server) clockMiss(a *answer) {
	if s.clock == nil || a.entry != nil || a.data != nil || a.size <= 0 || a.size > s.clockMax {
		return
	}
	if mt, _, err := mime.ParseMediaType(a.header.Get("Content-Type")); err != nil || mt != "text/html" {
		return
	}
	body, err := io.ReadAll(io.LimitReader(a.body, a.size))
	if err != nil {
		return
	}
	var note string
	body, note = s.clock.Inject(a.header, body)
	a.body, a.data, a.size = nil, body, int64(len(body))
	a.note = joinNote(a.note, note)
}

// notFoundPage serves the site's own recorded 404 page (manifest not_found, keyed by host
// with or without port or by site name, see NotFoundURL) with status 404, or returns nil
// when there is none to serve.
func (s *Server) notFoundPage(r *http.Request) *answer {
	u, ok := NotFoundURL(s.ix.b.Manifest.NotFound, s.ix.rs, r.URL.Host)
	if !ok {
		return nil
	}
	e := s.ix.entryForURL(u)
	if e == nil {
		return nil
	}
	a, err := s.recordedAnswer(e, nil, r)
	if err != nil {
		return nil
	}
	a.status = http.StatusNotFound
	a.note = "site's own 404 page " + e.ID
	return a
}

func notFoundHTML(method, url string) string {
	u := html.EscapeString(url)
	return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>404 Not in the recording</title></head>
<body><h1>Not in the recording</h1>
<p>This offline replay has no recorded page for ` + html.EscapeString(method) + ` <code>` + u + `</code>.</p>
</body></html>
`
}

// acceptsJSON reports whether an Accept header names application/json or a +json type.
func acceptsJSON(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if q, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
				continue
			}
		}
		if mt == "application/json" || strings.HasSuffix(mt, "+json") {
			return true
		}
	}
	return false
}

// hostname is host without its port and brackets.
func hostname(host string) string {
	h, _ := splitHostPort(host)
	return h
}

// splitHostPort splits a URL host into host name and port ("" when none), brackets of an
// IPv6 literal removed. Unlike net.SplitHostPort it takes a host without a port, and
// does not allocate for one.
func splitHostPort(hostport string) (host, port string) {
	if !strings.Contains(hostport, ":") {
		return hostport, ""
	}
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), ""
}

// isWebSocketUpgrade reports a WebSocket opening handshake (RFC 6455 section 4.1).
func isWebSocketUpgrade(r *http.Request) bool {
	if r.Method == http.MethodConnect && r.ProtoMajor >= 2 && r.Header.Get(":protocol") != "" {
		return true // extended CONNECT (RFC 8441), WebSocket over HTTP/2
	}
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

// headerHasToken reports whether a comma-separated header field holds token (any case);
// name is in canonical form (CanonicalHeaderKey).
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h[name] {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
