package record

// exchange.go: one exchange on its way through the recorder: the request sent upstream,
// the response body captured as it is forwarded, and what of both is stored.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/pab-dev/pab/internal/mitm"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/warc"
)

// pending is an exchange whose response body is being forwarded.
type pending struct {
	r       *Recorder
	start   time.Time
	method  string
	url     string // redacted
	typ     string
	reqHdr  http.Header
	reqBody []byte
	page    string
	note    string // page note
	resp    *http.Response
	skip    string // why the exchange cannot be stored ("" = it can)
	host    string
	scheme  string
	// probeHeader is the request header a not-found probe copies (documents only).
	probeHeader http.Header
	// cancel, when set, releases the upstream request's context.
	cancel func()
}

// release ends the exchange: its upstream context is released and Shutdown stops
// waiting for it.
func (p *pending) release() {
	if p.cancel != nil {
		p.cancel()
	}
	p.r.inflight.Done()
}

// outbound reads the request body (up to MaxBody is kept for the journal; a longer one
// is streamed on and marks the exchange as not stored) and builds the upstream request.
func (p *pending) outbound(req *http.Request) (*http.Request, error) {
	out := req.Clone(req.Context())
	out.RequestURI = ""
	// hop-by-hop fields are never forwarded, nor Expect: the whole body is read before
	// forwarding
	mitm.RemoveHopByHop(out.Header)
	out.Header.Del("Expect")
	if req.Body != nil && req.Body != http.NoBody {
		max := p.r.opts.MaxBody
		buf, err := io.ReadAll(io.LimitReader(req.Body, max+1))
		if err != nil {
			return nil, err
		}
		if int64(len(buf)) > max {
			p.skip = fmt.Sprintf("request body larger than %d bytes", max)
			out.Body = io.NopCloser(io.MultiReader(bytes.NewReader(buf), req.Body))
			out.ContentLength = req.ContentLength
		} else {
			p.reqBody = buf
			out.Body = io.NopCloser(bytes.NewReader(buf))
			out.ContentLength = int64(len(buf))
		}
		out.TransferEncoding = nil
	} else {
		out.Body = nil
		out.ContentLength = 0
	}
	p.reqHdr = out.Header.Clone()
	return out, nil
}

func (p *pending) upstreamError(err error) {
	p.r.upErr.Add(1)
	p.r.log(LogLine{Time: recording.FormatTime(p.start), Event: "upstream-error", Method: p.method, URL: p.url,
		Type: p.typ, Note: p.r.opts.Redact.String(err.Error())})
	p.release()
}

// done logs a request that is not stored and releases it.
func (p *pending) done(status int, why string) {
	if why == "" {
		why = p.skip
	}
	p.r.notStored.Add(1)
	p.r.log(LogLine{Time: recording.FormatTime(p.start), Event: "not-stored", Method: p.method, URL: p.url,
		Status: status, Type: p.typ, Note: p.r.opts.Redact.String(why)})
	p.release()
}

// finish stores the exchange whose whole response body is raw (nil readErr), or logs why
// it cannot. It releases the exchange, after starting the host's not-found probe.
func (p *pending) finish(raw []byte, readErr error) {
	status := p.resp.StatusCode
	if readErr != nil {
		p.done(status, "response body incomplete: "+readErr.Error())
		return
	}
	if p.skip != "" {
		p.done(status, "")
		return
	}
	r := p.r
	hdr := p.resp.Header.Clone()
	body, enc, err := warc.DecodePayloadLimit(hdr, raw, r.opts.MaxBody)
	if err != nil {
		p.done(status, fmt.Sprintf("response body of %d bytes cannot be decoded (Content-Encoding %q): %v", len(raw), hdr.Get("Content-Encoding"), err))
		return
	}
	x := &exchange{Exchange: recording.Exchange{
		Method: p.method, URL: p.url, Date: p.start, ReqBody: r.opts.Redact.Bytes(p.reqBody),
		Status: status, Proto: p.resp.Proto, Body: r.opts.Redact.Bytes(body), OrigEncoding: enc,
		ResourceType: p.typ,
	}, Page: p.page, PageNote: p.note}
	if _, err := parseAbs(x.URL); err != nil {
		p.done(status, "the redacted URL is not a URL")
		return
	}
	x.ReqHeader = storedRequestHeader(p.reqHdr, p.host, r.opts.Redact)
	x.RespHeader = storedResponseHeader(hdr, enc != "", len(x.Body), r.opts.Redact)
	b, warnings, err := x.encode()
	if err == nil {
		err = r.journal.append(b)
	}
	if err != nil {
		p.done(status, err.Error())
		return
	}
	r.stored.Add(1)
	note := p.note
	for _, w := range warnings { // header fields left out of the journal
		note = strings.TrimPrefix(note+"; "+w, "; ")
	}
	r.log(LogLine{Time: recording.FormatTime(p.start), Event: "stored", Method: p.method, URL: p.url, Status: status,
		Type: p.typ, Bytes: int64(len(x.Body)), Note: note})
	if p.probeHeader != nil && p.note == "" {
		r.probe(p)
	}
	p.release()
}

// storedRequestHeader is the request header as the journal keeps it: no Cookie,
// Authorization or Proxy-Authorization, a Host field, values redacted.
func storedRequestHeader(h http.Header, host string, red *Redactor) http.Header {
	out := http.Header{}
	for k, vs := range h {
		switch http.CanonicalHeaderKey(k) {
		case "Cookie", "Cookie2", "Authorization", "Proxy-Authorization", "Content-Length", "Host":
			continue
		}
		for _, v := range vs {
			out[k] = append(out[k], red.String(v))
		}
	}
	out["Host"] = []string{red.String(host)}
	return out
}

// storedResponseHeader is the response header as the journal keeps it: no
// Transfer-Encoding, Content-Length of the stored body, no Content-Encoding when the body
// was decoded, every Set-Cookie value REDACTED, other values redacted.
func storedResponseHeader(h http.Header, decoded bool, size int, red *Redactor) http.Header {
	out := http.Header{}
	for k, vs := range h {
		switch http.CanonicalHeaderKey(k) {
		case "Transfer-Encoding", "Content-Length":
			continue
		case "Content-Encoding":
			if decoded {
				continue
			}
		case "Set-Cookie", "Set-Cookie2":
			for range vs {
				out[k] = append(out[k], Redacted)
			}
			continue
		}
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vs {
			out[k] = append(out[k], red.String(v))
		}
	}
	out["Content-Length"] = []string{strconv.Itoa(size)}
	return out
}

// captureBody forwards the upstream body and keeps a copy (up to max bytes); at its end
// (EOF, a read error, or Close before EOF) it finishes the exchange once.
type captureBody struct {
	rc   io.ReadCloser
	p    *pending
	max  int64
	buf  bytes.Buffer
	over bool
	once sync.Once
}

func (c *captureBody) Read(b []byte) (int, error) {
	n, err := c.rc.Read(b)
	if n > 0 && !c.over && c.p.skip == "" { // an exchange that is not stored keeps no copy
		if int64(c.buf.Len()+n) > c.max {
			c.over = true
			c.buf = bytes.Buffer{}
		} else {
			c.buf.Write(b[:n])
		}
	}
	switch {
	case err == io.EOF:
		c.end(nil)
	case err != nil:
		c.end(err)
	}
	return n, err
}

func (c *captureBody) end(err error) {
	c.once.Do(func() {
		if err == nil && c.over {
			c.p.done(c.p.resp.StatusCode, fmt.Sprintf("response body larger than %d bytes", c.max))
			return
		}
		c.p.finish(c.buf.Bytes(), err)
	})
}

func (c *captureBody) Close() error {
	c.end(errors.New("the client closed the connection before the end of the body"))
	return c.rc.Close()
}

// bodyAllowed reports whether a response to method with status has a body (RFC 9110
// sections 6.4.1, 9.3.2).
func bodyAllowed(method string, status int) bool {
	return method != http.MethodHead && status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
