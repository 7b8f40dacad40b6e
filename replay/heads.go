package replay

// This file is the Server's cache of parsed response heads and small payloads.

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unique"

	"github.com/pab-dev/pab/internal/textcut"
	"github.com/pab-dev/pab/recording"
)

// maxCachedHeads and maxCachedHeadBytes bound the response heads a Server keeps parsed:
// at most this many heads, of at most this many bytes together (headBytes: most heads are
// a few hundred bytes, but a recording's head may have up to warc.MaxHTTPHeaderBytes of
// fields); when either would be passed, the cache starts again empty. A lookup's memo keeps
// the head of its answer only up to maxMemoHeadBytes (servedResult.head), so that what the
// memos hold stays bounded too (maxResults of them).
const (
	maxCachedHeads     = 1 << 14
	maxCachedHeadBytes = 64 << 20
	maxMemoHeadBytes   = 8 << 10
)

// responseHead is the parsed head of one recorded response, shared read-only by every
// answer of its entry.
type responseHead struct {
	status   int
	header   http.Header   // replayHeader of the recorded fields; cloned per answer
	fields   []headerField // header as a list, for answer.write (answerFields)
	clock    bool          // wantsClock of the recorded status and fields
	size     int64
	clen     []string // Content-Length's value: size in decimal (shared and read-only)
	recordID string
	entryID  string      // the entry's ID, for the log (read here, not from the entry: an answer reads the head anyway)
	note     string      // the payload's notes for the log (servedNote)
	ra       io.ReaderAt // data.warc, read at off
	off      int64
	reader   io.Reader // the payload reader, when not a section of ra (then never cached)
	bytes    int       // headBytes of the head: what keeping it costs, about
	// small is the payload in memory once headCache.smallBody read it (shared and
	// read-only), nil before and after headCache's budget was spent (bodyHeads)
	small atomic.Pointer[[]byte]
}

// headerField is one field of an answer's header: its canonical name and its values
// (shared and read-only; nil values suppress a field net/http would add).
type headerField struct {
	name   string
	values []string
}

// answerFields lists the fields answer.write puts in the answer's header for header h:
// each of h's, then Date and Content-Type with no value when h has none (net/http then adds
// neither). Made once per recorded head, so that an answer copies a list instead of
// ranging over a map.
func answerFields(h http.Header) []headerField {
	fs := make([]headerField, 0, len(h)+2)
	for k, vs := range h {
		fs = append(fs, headerField{k, vs})
	}
	for _, k := range []string{"Date", "Content-Type"} {
		if _, ok := h[k]; !ok {
			fs = append(fs, headerField{k, nil})
		}
	}
	return fs
}

// body returns a reader of the payload with its own position.
func (h *responseHead) body() io.Reader {
	if h.ra != nil {
		return recording.StreamSection(h.ra, h.off, h.size)
	}
	return h.reader
}

// headCache keeps the parsed response heads of the entries served, and the payloads of
// the small ones (smallBody) on their heads; safe for concurrent use.
type headCache struct {
	m readMostly[*recording.Entry, *responseHead]

	headMu    sync.Mutex // held while a head is stored, for headBytes
	headBytes int        // the bytes (responseHead.bytes) of the heads in m
	maxBytes  int        // the bound of headBytes; 0: maxCachedHeadBytes (tests set less)

	internMu sync.Mutex
	values   map[string][]string // interned single field values (intern), under internMu

	bodyMu    sync.Mutex      // held while a body is stored
	bodyHeads []*responseHead // the heads whose small payload is set, under bodyMu
	bodyBytes int64           // the bytes of their payloads, under bodyMu
}

// smallBody returns h's payload from memory, reading it once from the WARC, when it is
// at most maxCachedBody bytes and a section of the file; else nil (the caller streams it).
// The payload is kept on h (responseHead.small), so an answer served again reads it
// without a lookup; once the payloads kept come to maxCachedBodies bytes, every head's is
// dropped and the count starts again.
func (c *headCache) smallBody(h *responseHead) []byte {
	if h.ra == nil || h.size <= 0 || h.size > maxCachedBody {
		return nil
	}
	if p := h.small.Load(); p != nil {
		return *p
	}
	data := make([]byte, h.size)
	if _, err := h.ra.ReadAt(data, h.off); err != nil {
		return nil // streamed instead, and the read error reported there
	}
	c.bodyMu.Lock()
	defer c.bodyMu.Unlock()
	if p := h.small.Load(); p != nil { // another request's, stored first
		return *p
	}
	if c.bodyBytes+h.size > maxCachedBodies {
		for _, o := range c.bodyHeads {
			o.small.Store(nil)
		}
		clear(c.bodyHeads)
		c.bodyHeads, c.bodyBytes = c.bodyHeads[:0], 0
	}
	h.small.Store(&data)
	c.bodyHeads = append(c.bodyHeads, h)
	c.bodyBytes += h.size
	return data
}

// keptBodyBytes is the bytes of the payloads kept in memory (smallBody).
func (c *headCache) keptBodyBytes() int64 {
	c.bodyMu.Lock()
	defer c.bodyMu.Unlock()
	return c.bodyBytes
}

// get returns e's response head from the cache, or reads it from b (recording.Bundle.Response)
// and keeps it. Errors are not kept: the next request tries again.
func (c *headCache) get(b *recording.Bundle, e *recording.Entry) (*responseHead, error) {
	if h, ok := c.m.load(e); ok {
		return h, nil
	}
	resp, err := b.Response(e)
	if err != nil {
		return nil, err
	}
	if resp.Status < 200 || resp.Status > 999 {
		return nil, fmt.Errorf("entry %s: recorded status %d cannot be replayed", e.ID, resp.Status)
	}
	h := &responseHead{status: resp.Status, header: c.intern(replayHeader(resp.Header)), clock: wantsClock(resp.Status, resp.Header),
		size: resp.Size, clen: []string{strconv.FormatInt(resp.Size, 10)}, recordID: resp.RecordID, entryID: e.ID, note: servedNote(resp.Notes)}
	h.fields = answerFields(h.header)
	h.bytes = headBytes(h)
	sr, ok := resp.Body.(*io.SectionReader)
	if !ok {
		h.reader = resp.Body
		return h, nil
	}
	h.ra, h.off, _ = sr.Outer()
	return c.keep(e, h), nil
}

// keep stores h as e's head, after emptying the cache when it holds maxCachedHeads heads or
// h would take it over maxBytes (maxCachedHeadBytes when 0), and returns the head kept for
// e: h, or another request's stored first.
func (c *headCache) keep(e *recording.Entry, h *responseHead) *responseHead {
	limit := cmp.Or(c.maxBytes, maxCachedHeadBytes)
	c.headMu.Lock()
	stored := c.m.store(e, h, func(n int) bool {
		full := n >= maxCachedHeads || c.headBytes+h.bytes > limit
		if full {
			c.headBytes = 0
		}
		return full
	})
	if stored {
		c.headBytes += h.bytes
	}
	c.headMu.Unlock()
	if !stored {
		if kept, ok := c.m.load(e); ok { // another request's, stored first
			return kept
		}
	}
	return h
}

// headBytes is about what keeping h costs in memory: its fields' names and values (the
// map and the list answer.write copies hold the same strings), their slice and string
// headers, and the head itself.
func headBytes(h *responseHead) int {
	n := 256 + len(h.recordID) + len(h.entryID) + len(h.note)
	for name, vs := range h.header {
		n += 2 * (len(name) + 64)
		for _, v := range vs {
			n += len(v) + 16
		}
	}
	return n
}

// Bounds of the field values headCache interns: at most maxInternedValues values, each at
// most maxInternedValue bytes; others are kept as they are.
const (
	maxInternedValues = 1 << 12
	maxInternedValue  = 128
)

// sharedFields are the fields whose values most responses of a site share (a few content
// types, one cache policy, one server name): the ones whose values intern keeps. Others
// (Date, ETag, Last-Modified, Content-Length, cookies) differ from response to response on
// most sites and would only fill the table.
var sharedFields = map[string]bool{
	"Content-Type": true, "Cache-Control": true, "Vary": true, "Server": true, "Accept-Ranges": true,
	"Content-Encoding": true, "Content-Language": true, "Pragma": true, "Via": true,
	"Access-Control-Allow-Origin": true, "Access-Control-Allow-Credentials": true, "Timing-Allow-Origin": true,
	"X-Content-Type-Options": true, "X-Frame-Options": true, "X-Xss-Protection": true, "Referrer-Policy": true,
	"Strict-Transport-Security": true, "Cross-Origin-Resource-Policy": true, "Cross-Origin-Opener-Policy": true,
}

// intern returns h with its field names, and the single values of its sharedFields, shared
// with every other head's equal ones (internValue), so that the fields an answer copies
// (Content-Type, Cache-Control) are the same few strings whichever entry answers: warm in
// the CPU's caches, not one copy per entry read once per round of a site's URLs. h itself is
// edited in place and returned.
func (c *headCache) intern(h http.Header) http.Header {
	for name, vs := range h {
		if len(vs) == 1 && sharedFields[name] {
			vs = c.internValue(vs[0])
		}
		// an equal key: the map keeps the string assigned (a string key is updated), so
		// the name's copy is replaced by the shared one and no key is added while ranging
		h[unique.Make(name).Value()] = vs
	}
	return h
}

// internValue returns a one-value list of v, shared with every other list internValue gave
// for v while it has room (maxInternedValues), else a list of its own. The list is
// read-only.
func (c *headCache) internValue(v string) []string {
	if len(v) > maxInternedValue {
		return []string{v}
	}
	c.internMu.Lock()
	defer c.internMu.Unlock()
	if vs, ok := c.values[v]; ok {
		return vs
	}
	vs := []string{unique.Make(v).Value()}
	if len(c.values) < maxInternedValues {
		if c.values == nil {
			c.values = make(map[string][]string)
		}
		c.values[vs[0]] = vs
	}
	return vs
}

// servedNote joins the payload notes that say it is served as recorded although a browser
// would have shown something else (recording.NoteServedAsRecorded: chunk framing kept, HTML
// longer than its Content-Length), for the log line of every answer with it; "" when none.
func servedNote(notes []string) string {
	var out []string
	for _, n := range notes {
		if strings.HasPrefix(n, recording.NoteServedAsRecorded) {
			out = append(out, textcut.Fit(n, 512, "…"))
		}
	}
	return strings.Join(out, "; ")
}

// Bounds of the payloads kept in memory: each at most maxCachedBody bytes, all together
// at most maxCachedBodies (when full, the cache starts again empty). Serving a small
// payload again costs no read of the WARC file.
const (
	maxCachedBody   = 64 << 10
	maxCachedBodies = 16 << 20
)
