package crawl

// body.go: what the browser received, compared with the recording. After a page settles,
// the body of every request that replay answered from the recording is read back from
// Chromium (Network.getResponseBody: the payload after the browser removed the transfer
// and content codings, text decoded by its charset) and compared with the payload a
// browser should have received: the stored payload, with any chunked framing it still
// holds removed (RFC 9112 section 7.1), gzip bytes stored as text decoded, a content
// coding kept in the stored header removed, and the page clock put in as replay puts it.
// A body that differs, or a payload the recording marks WARC-Truncated, is a problem of
// the page: broken.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"

	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/warc"
)

// Bounds of the body comparison.
const (
	// MaxCompareBody is the largest recorded payload whose body a crawl compares, in bytes;
	// a larger one is counted as not compared.
	MaxCompareBody = 16 << 20
	// bodyWait bounds reading one body from Chromium; bodyBudget all of a page's.
	bodyWait   = 5 * time.Second
	bodyBudget = 30 * time.Second
	// maxExpected bounds the recorded payloads' digests a crawl keeps between pages.
	maxExpected = 20000
)

// Outcomes of one body comparison (bodyCheck.state).
const (
	bodySame       = "same"
	bodyDiffers    = "differs"
	bodyUnverified = "unverified"
)

// bodyCheck is the comparison of one request's body with the recording.
type bodyCheck struct {
	state  string
	reason string // for differs: what differs and why; for unverified: why not compared
}

// expected is the payload a browser should receive for one recorded exchange.
type expected struct {
	digest string // hex sha256 of body
	size   int
	cause  string // what the stored bytes hold that a browser would not show ("" none)
	err    string // why it cannot be known ("" when digest is set)
	// for a second look at a text body the browser decoded by its charset: the payload
	// and its served Content-Type (only kept while comparing, never cached)
	body  []byte
	ctype string
}

// expect computes (and caches by entry) what a browser should receive for e.
func (r *recorded) expect(e *recording.Entry, keepBody bool) *expected {
	if x, ok := r.exp[e.ID]; ok && !keepBody {
		return x
	}
	x := r.computeExpected(e)
	if len(r.exp) >= maxExpected {
		clear(r.exp)
	}
	r.exp[e.ID] = &expected{digest: x.digest, size: x.size, cause: x.cause, err: x.err}
	if !keepBody {
		x.body = nil
	}
	return x
}

func (r *recorded) computeExpected(e *recording.Entry) *expected {
	resp, err := r.b.Response(e)
	if err != nil {
		return &expected{err: "cannot read the recording: " + err.Error()}
	}
	if resp.Size > MaxCompareBody {
		return &expected{err: fmt.Sprintf("payload of %d bytes, over %d", resp.Size, MaxCompareBody)}
	}
	body, err := readlimit.All(resp.Body, MaxCompareBody)
	if err != nil {
		return &expected{err: "cannot read the recording: " + err.Error()}
	}
	if int64(len(body)) != resp.Size {
		return &expected{err: fmt.Sprintf("the recording gave %d of its %d payload bytes", len(body), resp.Size)}
	}
	h := resp.Header.Clone()
	x := &expected{}
	var causes []string
	if t := resp.Truncated; t != "" {
		causes = append(causes, fmt.Sprintf("the recording holds only %d bytes of it (WARC-Truncated: %s)", len(body), t))
	}
	if out, ok := dechunkFramed(body); ok {
		causes = append(causes, fmt.Sprintf("the recorded payload still holds its chunked framing (%d bytes framed, %d de-chunked)", len(body), len(out)))
		body = out
	}
	if h.Get("Content-Encoding") != "" {
		// replay serves the stored coding with its field: the browser removes it
		if dec, orig, err := warc.DecodePayloadLimit(http.Header{"Content-Encoding": h.Values("Content-Encoding")}, body, MaxCompareBody); err == nil && orig != "" {
			body = dec
			h.Del("Content-Encoding")
		}
	} else if gz := gzipText(h, body); gz != nil {
		causes = append(causes, fmt.Sprintf("the recorded payload is gzip data stored without its Content-Encoding (%d bytes, %d decoded)", len(body), len(gz)))
		body = gz
	}
	if r.clock != nil && replay.WantsClock(resp.Status, h) && len(body) <= replay.MaxClockDocument {
		body, _ = r.clock.Inject(h, body)
	}
	sum := sha256.Sum256(body)
	x.digest, x.size, x.body, x.ctype = hex.EncodeToString(sum[:]), len(body), body, h.Get("Content-Type")
	x.cause = strings.Join(causes, "; ")
	return x
}

// lastChunk finds the last-chunk line of chunked framing (RFC 9112 section 7.1: one or
// more zeros, optional extensions): with a body that parses whole as chunks
// (warc.Dechunk), the sign that the payload is framing, not a text that happens to parse.
var lastChunk = regexp.MustCompile(`(?:^|\n)0+[ \t]*(?:;[^\r\n]*)?\r?\n`)

// dechunkFramed returns body without its chunked framing when body is framing: it parses
// whole as chunks (warc.Dechunk), holds data, and has a last chunk.
func dechunkFramed(body []byte) ([]byte, bool) {
	out, ok := warc.Dechunk(body)
	if !ok || len(out) == 0 || !lastChunk.Match(body) {
		return nil, false
	}
	return out, true
}

// gzipText returns the decoded payload when a text payload (by its Content-Type) is gzip
// data (RFC 1952 magic and method), else nil.
func gzipText(h http.Header, body []byte) []byte {
	if len(body) < 18 || body[0] != 0x1f || body[1] != 0x8b || body[2] != 8 {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if !strings.HasPrefix(mt, "text/") && !strings.Contains(mt, "javascript") && !strings.Contains(mt, "json") && !strings.Contains(mt, "xml") {
		return nil
	}
	dec, orig, err := warc.DecodePayloadLimit(http.Header{"Content-Encoding": {"gzip"}}, body, MaxCompareBody)
	if err != nil || orig == "" {
		return nil
	}
	return dec
}

// comparable reports whether an answer carries a body a browser keeps: a recorded
// answer (not a miss) to a request other than HEAD, of a status with a body that is no
// redirect and no partial content.
func comparable(method string, l *replay.LogLine) bool {
	if l == nil || !hitSource(l.Source) || l.Entry == "" || method == http.MethodHead {
		return false
	}
	s := l.Status
	return s >= 200 && s != http.StatusNoContent && s != http.StatusResetContent &&
		s != http.StatusPartialContent && s != http.StatusNotModified && (s < 300 || s >= 400)
}

// checkBodies reads back from Chromium the body of every request of the visit that replay
// answered from the recording and compares it with the recording (r.body).
func (v *visit) checkBodies(tab context.Context, rec *recorded) {
	deadline := time.Now().Add(bodyBudget)
	for _, r := range v.order {
		fl := r.lines[len(r.lines)-1]
		if !r.finished || r.failed || !comparable(r.last().method, fl) {
			continue
		}
		e := rec.b.ByID(fl.Entry)
		if e == nil {
			continue
		}
		if fl.Status != e.Status {
			continue // not the recorded answer (a 304 or an answer replay shaped)
		}
		if e.Size > MaxCompareBody {
			r.body = &bodyCheck{state: bodyUnverified, reason: fmt.Sprintf("payload of %d bytes, over %d", e.Size, MaxCompareBody)}
			continue
		}
		if time.Now().After(deadline) {
			r.body = &bodyCheck{state: bodyUnverified, reason: "the page's time for reading bodies ran out"}
			continue
		}
		x := rec.expect(e, false)
		if x.err != "" {
			r.body = &bodyCheck{state: bodyUnverified, reason: x.err}
			continue
		}
		ctx, cancel := context.WithTimeout(tab, bodyWait)
		got, err := chromedp.Call(ctx, network.GetResponseBody, network.GetResponseBodyParams{RequestID: r.id})
		cancel()
		if err != nil {
			r.body = &bodyCheck{state: bodyUnverified, reason: "Chromium kept no body: " + shorten(err.Error(), 100)}
			continue
		}
		r.body = compareBody(got.Body, got.Base64encoded, x, func() *expected { return rec.expect(e, true) })
	}
}

// compareBody compares what the browser received (text decoded by its charset unless
// raw) with x; full recomputes x with its payload for a second look at a text body.
func compareBody(got []byte, raw bool, x *expected, full func() *expected) *bodyCheck {
	sum := sha256.Sum256(got)
	d := hex.EncodeToString(sum[:])
	if d == x.digest {
		if x.cause != "" {
			return &bodyCheck{state: bodyDiffers, reason: "served as recorded, but " + x.cause}
		}
		return &bodyCheck{state: bodySame}
	}
	if !raw {
		if fx := full(); fx.body != nil && sameText(got, fx.body, fx.ctype) {
			if x.cause != "" {
				return &bodyCheck{state: bodyDiffers, reason: "served as recorded, but " + x.cause}
			}
			return &bodyCheck{state: bodySame}
		}
	}
	reason := fmt.Sprintf("the browser received %d bytes (sha256 %.12s…), the recording %d (sha256 %.12s…)", len(got), d, x.size, x.digest)
	if x.cause != "" {
		reason += "; " + x.cause
	}
	return &bodyCheck{state: bodyDiffers, reason: reason}
}

// sameText reports whether text, a body as Chromium gives it for a text resource (decoded
// by its charset, sent as UTF-8), is payload decoded as a browser may decode it: by a byte
// order mark, the Content-Type's charset or a <meta> (WHATWG encoding sniffing as
// golang.org/x/net/html/charset does it), else UTF-8 or windows-1252.
func sameText(text, payload []byte, ctype string) bool {
	encs := []encoding.Encoding{unicode.UTF8}
	if e, _, _ := charset.DetermineEncoding(payload, ctype); e != nil {
		encs = append([]encoding.Encoding{e}, encs...)
	}
	encs = append(encs, charmap.Windows1252)
	for _, e := range encs {
		dec, err := io.ReadAll(io.LimitReader(e.NewDecoder().Reader(bytes.NewReader(payload)), 4*MaxCompareBody))
		if err != nil {
			continue
		}
		dec = bytes.TrimPrefix(dec, []byte("\uFEFF"))
		if !utf8.Valid(dec) {
			dec = bytes.ToValidUTF8(dec, []byte("\uFFFD"))
		}
		if bytes.Equal(bytes.TrimPrefix(text, []byte("\uFEFF")), dec) {
			return true
		}
	}
	return false
}
