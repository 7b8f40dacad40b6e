package recording

// writer.go: writes a bundle (docs/bundle-format.md): archive/data.warc (WARC 1.1,
// uncompressed records), indexes/entries.jsonl, pages/pages.jsonl and manifest.json.
//
// Records are built with gowarc's record builder and serialised with its marshaler into
// one counting writer, so every entry's offset and length are exact. gowarc's
// WarcFileWriter is not used: it names files itself (with an ".open" suffix), writes
// from goroutines and would need its WriteResponse offsets mapped back; one file written
// in order is simpler and deterministic.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/httpx"
	"github.com/pab-dev/pab/internal/iobuf"
	"github.com/pab-dev/pab/warc"
	"golang.org/x/net/http/httpguts"
)

// DedupMinSize is the payload size, in bytes, from which identical payloads are stored
// once: a later exchange with the same payload becomes a revisit record.
const DedupMinSize = 1024

// RevisitProfile is the WARC-Profile of the revisit records written here
// (WARC 1.1 section 6.7.2).
const RevisitProfile = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"

// TimeFormat is the layout of every timestamp the bundle writes (WARC-Date, entries'
// ts, manifest dates): RFC 3339 in UTC with milliseconds, "2026-10-22T10:40:57.458Z".
const TimeFormat = "2006-01-02T15:04:05.000Z"

// FormatTime formats t with TimeFormat in UTC.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Exchange is one recorded HTTP exchange handed to BundleWriter.Add.
type Exchange struct {
	// Method is the request method; "" means GET.
	Method string
	// URL is the absolute request URL (http or https); it becomes WARC-Target-URI.
	URL string
	// Date is when the exchange was recorded; it becomes the WARC-Date of both records.
	Date time.Time
	// ReqHeader and ReqBody are the request as sent. Cookie, Authorization and
	// Proxy-Authorization are never written.
	ReqHeader http.Header
	ReqBody   []byte
	// Status is the response status code (100-999).
	Status int
	// Proto is the response's HTTP version; "HTTP/1.0" is kept, anything else
	// (HTTP/1.1, HTTP/2, "") is written as HTTP/1.1, the syntax of the stored message.
	Proto string
	// RespHeader is the response header as received. Transfer-Encoding is dropped,
	// Content-Length is set to len(Body), every Set-Cookie value is written as REDACTED.
	// Content-Encoding is dropped when OrigEncoding is set; when OrigEncoding is empty a
	// Content-Encoding is kept and means Body is still encoded (it could not be decoded).
	RespHeader http.Header
	// Body is the response payload, decoded (see DecodePayload).
	Body []byte
	// BodyAt, when set, holds the payload instead of Body: its first BodySize bytes. It is
	// read twice (digest, then copy) through fixed-size buffers, never into memory whole,
	// so a payload may be of any size (an import hands a region of its spool file here).
	BodyAt   io.ReaderAt
	BodySize int64
	// OrigEncoding is the Content-Encoding removed from Body ("gzip", "br"); it is written
	// as RR-Original-Content-Encoding.
	OrigEncoding string
	// ResourceType is written as RR-Resource-Type ("document", "image", ...); may be "".
	ResourceType string
	// Protocols are the WARC-Protocol values (WARC 1.1 section 5.15: "h2", "tls/1.3", ...)
	// of the exchange, written once each, in order, on both of its records.
	Protocols []string
	// Truncated, when set, is written as WARC-Truncated on the response record: the stored
	// payload is shorter than the one sent ("length", "time", "disconnect", "unspecified";
	// bundle-format.md, rule F3). It is not written on a revisit record.
	Truncated string
	// PayloadNotes are written as RR-Payload-Note fields on the response record, one each
	// (HeaderPayloadNote): what the import found of the stored payload that replay and
	// pab audit tell about. Not written on a revisit record.
	PayloadNotes []string
	// RevisitOf, when set, names an exchange already added (its Entry.ID) that holds this
	// exchange's payload: a revisit record is written whatever the size, and Body is
	// ignored. When that exchange is itself a revisit, its original is used.
	RevisitOf string
	// Unresolved, when set, makes this a revisit whose original payload is not in the
	// bundle (Entry.Unresolved); Body is ignored and its fields say what is known of the
	// original.
	Unresolved *UnresolvedRevisit
}

// UnresolvedRevisit is what an input revisit record said about its missing original.
type UnresolvedRevisit struct {
	// TargetURI and Date become WARC-Refers-To-Target-URI and WARC-Refers-To-Date when set.
	TargetURI string
	Date      time.Time
	// PayloadDigest is the input's WARC-Payload-Digest, copied as is ("sha1:...").
	PayloadDigest string
}

// BundleWriter writes a bundle into a temporary directory next to its destination and
// renames it into place on Close; after an error, or Abort, nothing is left. It is not
// safe for concurrent use. Output is deterministic: the same manifest, exchanges and
// pages give the same bytes (record ids are derived from the content). Payloads are
// streamed to archive/data.warc and entry lines to indexes/entries.jsonl as they are added;
// what the writer keeps in memory per exchange is its entry without the request body.
type BundleWriter struct {
	dir, tmp string
	m        Manifest
	f        *os.File
	bw       *bufio.Writer
	ef       *os.File      // indexes/entries.jsonl
	ebw      *bufio.Writer // over ef
	off      int64
	n        int              // entries written
	origs    *origSpill       // per entry: what a revisit of it needs, on disk
	byDigest map[uint64]int32 // sha256 of payloads >= DedupMinSize (its first 8 bytes) -> entry index
	pf       *os.File         // pages/pages.jsonl
	pbw      *bufio.Writer    // over pf
	from, to time.Time
	warnings []string
	err      error
	done     bool
	marshal  gowarc.Marshaler
	tee      *packTee // the pack of the records as they are written (packInto), or nil
}

// original is what a revisit needs to know about the record holding a payload.
type original struct {
	recordID string
	url      string
	date     string
	digest   string // sha256 hex
	size     int64
	stored   bool // a response record (not itself a revisit or unresolved)
	// revisitOf is the index of the entry whose payload a revisit record refers to, or -1
	revisitOf int32
}

// NewBundleWriter starts a bundle at dir. The parent directory is created if needed. An
// existing dir is replaced on Close (it must be a directory, not a symlink). Manifest
// fields left empty are filled on Close: CapturedFrom and CapturedTo from the earliest
// and latest exchange Date.
func NewBundleWriter(dir string, m Manifest) (*BundleWriter, error) {
	dir = filepath.Clean(dir)
	if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("write bundle %s: exists and is not a directory", dir)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("write bundle %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("write bundle %s: %w", dir, err)
	}
	w := &BundleWriter{dir: dir, tmp: tmp, m: m, byDigest: map[uint64]int32{}, marshal: gowarc.NewMarshaler()}
	for _, sub := range []string{filepath.Dir(WARCFile), filepath.Dir(EntriesFile), filepath.Dir(PagesFile)} {
		if err := os.MkdirAll(filepath.Join(tmp, sub), 0o755); err != nil {
			w.Abort()
			return nil, fmt.Errorf("write bundle %s: %w", dir, err)
		}
	}
	w.f, err = os.OpenFile(filepath.Join(tmp, WARCFile), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		w.Abort()
		return nil, fmt.Errorf("write bundle %s: %w", dir, err)
	}
	w.bw = bufio.NewWriterSize(w.f, 256<<10)
	w.ef, err = os.OpenFile(filepath.Join(tmp, EntriesFile), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		w.Abort()
		return nil, fmt.Errorf("write bundle %s: %w", dir, err)
	}
	w.ebw = bufio.NewWriterSize(w.ef, 64<<10)
	w.pf, err = os.OpenFile(filepath.Join(tmp, PagesFile), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		w.Abort()
		return nil, fmt.Errorf("write bundle %s: %w", dir, err)
	}
	w.pbw = bufio.NewWriterSize(w.pf, 64<<10)
	if w.origs, err = newOrigSpill(parent); err != nil {
		w.Abort()
		return nil, fmt.Errorf("write bundle %s: %w", dir, err)
	}
	return w, nil
}

// Warnings lists header fields that could not be written (invalid names or values),
// one line each, naming the exchange.
func (w *BundleWriter) Warnings() []string { return w.warnings }

// Add writes one exchange: a response record (or a revisit record, when the payload is
// already stored or the exchange says so) followed by its request record, and returns
// its entry. Exchange ids are e000001, e000002, ... in Add order. An error for bad input
// (no URL, no date, status out of range, unknown RevisitOf, an HTTP head longer than
// MaxHTTPHeaderBytes, a WARC header longer than MaxWARCHeaderBytes, wrapping
// ErrHeaderTooLarge, a BodyAt shorter than BodySize) leaves the writer usable; a write
// error is sticky and Close then fails.
func (w *BundleWriter) Add(x Exchange) (Entry, error) {
	if w.err != nil {
		return Entry{}, w.err
	}
	if w.done {
		return Entry{}, errors.New("bundle writer is closed")
	}
	a, err := w.checkExchange(x, entryID(w.n))
	if err != nil {
		return Entry{}, err
	}
	if err := a.buildHeads(w); err != nil {
		return Entry{}, err
	}
	if err := a.digestPayload(w); err != nil {
		return Entry{}, err
	}
	respFields, reqFields, err := a.recordFields(nil)
	if err != nil {
		return Entry{}, err
	}
	respOff := w.off
	var respLen, reqLen int64
	if w.tee != nil {
		respLen, err = w.teeRecord(true, func(b *bytes.Buffer) error {
			_, err := warc.EncodeRecord(b, respFields, a.head.Bytes(), a.payload, a.payloadLen)
			return err
		})
	} else {
		respLen, err = w.writeRecord(respFields, a.head.Bytes(), a.payload, a.payloadLen)
	}
	if err != nil {
		return Entry{}, w.fail(err)
	}
	reqOff := w.off
	if w.tee != nil {
		reqLen, err = w.teeRecord(false, func(b *bytes.Buffer) error {
			_, err := warc.EncodeRecord(b, reqFields, a.qblock.Bytes(), nil, 0)
			return err
		})
	} else {
		reqLen, err = w.writeRecord(reqFields, a.qblock.Bytes(), nil, 0)
	}
	if err != nil {
		return Entry{}, w.fail(err)
	}
	e, err := w.addEntry(a, respOff, respLen, reqOff, reqLen)
	if err == nil && w.tee != nil {
		w.tee.teeEntry(e)
	}
	return e, err
}

// adding is one exchange on its way through Add: what checkExchange found, then the two
// HTTP heads (buildHeads), then the payload's digest and whether the record is a revisit
// (digestPayload).
type adding struct {
	x       Exchange
	id      string
	u       *url.URL
	method  string
	date    string // x.Date as WARC-Date
	proto   string // "HTTP/1.1", or "HTTP/1.0" as recorded
	decoded bool   // the payload was decoded from x.OrigEncoding

	body          *io.SectionReader // the payload
	size          int64             // its length (the original's, for a revisit)
	payloadDigest string            // hex sha256 of the payload
	orig          *original         // the stored payload this exchange revisits, or nil
	origIdx       int               // orig's index in w.origs; -1 without one

	head   bytes.Buffer // the response's status line and header
	qblock bytes.Buffer // the request's request line and header, then its body

	idHash, blockHash hash.Hash // over the response record's id input and block
	revisit           bool      // the response record is a revisit (head only)
	payload           io.Reader // the payload to write after head; nil for a revisit
	payloadLen        int64
	respID            string
	protoFields       []warc.Field
}

// checkExchange checks x (an absolute URL, a date, a status of three digits, a method
// that is an HTTP token, a RevisitOf that holds a payload, a BodyAt with a size) and
// starts its adding under exchange id.
func (w *BundleWriter) checkExchange(x Exchange, id string) (*adding, error) {
	u, err := url.Parse(x.URL)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return nil, fmt.Errorf("exchange %s: URL %q is not absolute", id, x.URL)
	}
	if x.Date.IsZero() {
		return nil, fmt.Errorf("exchange %s (%s): no date", id, x.URL)
	}
	if x.Status < 100 || x.Status > 999 {
		return nil, fmt.Errorf("exchange %s (%s): status %d out of range", id, x.URL, x.Status)
	}
	a := &adding{x: x, id: id, u: u, method: x.Method, origIdx: -1, date: FormatTime(x.Date), proto: "HTTP/1.1",
		decoded: x.OrigEncoding != "", protoFields: warc.ProtocolFields(x.Protocols)}
	if a.method == "" {
		a.method = http.MethodGet
	}
	if !warc.IsHTTPToken(a.method) {
		return nil, fmt.Errorf("exchange %s (%s): bad method %q", id, x.URL, a.method)
	}
	if x.RevisitOf != "" {
		i, ok := entryIndex(x.RevisitOf, w.n)
		var o original
		if ok {
			var err error
			if o, err = w.origs.get(i); err != nil {
				return nil, w.fail(err)
			}
			if !o.stored && o.revisitOf >= 0 {
				i = int(o.revisitOf) // a revisit's payload is its original's
				if o, err = w.origs.get(i); err != nil {
					return nil, w.fail(err)
				}
			}
		}
		if !ok || !o.stored {
			return nil, fmt.Errorf("exchange %s (%s): revisit of %q, which holds no payload", id, x.URL, x.RevisitOf)
		}
		a.origIdx, a.orig = i, &o
	}
	if x.Proto == "HTTP/1.0" {
		a.proto = x.Proto
	}
	a.body = io.NewSectionReader(bytes.NewReader(x.Body), 0, int64(len(x.Body)))
	if x.BodyAt != nil {
		if x.BodySize < 0 {
			return nil, fmt.Errorf("exchange %s (%s): negative body size %d", id, x.URL, x.BodySize)
		}
		a.body = io.NewSectionReader(x.BodyAt, 0, x.BodySize)
	}
	a.size = a.body.Size()
	if a.orig != nil {
		a.payloadDigest, a.size = a.orig.digest, a.orig.size
	}
	return a, nil
}

// buildHeads writes the response head (status line and header; the block is the head,
// then the payload unless the record is a revisit) and the request head, with the fields
// pab never stores (cookies, credentials) removed or redacted, and checks each against
// MaxHTTPHeaderBytes.
func (a *adding) buildHeads(w *BundleWriter) error {
	x := a.x
	rh := cloneHeader(x.RespHeader)
	delHeader(rh, "Transfer-Encoding")
	delHeader(rh, "Content-Length")
	if a.decoded {
		delHeader(rh, "Content-Encoding")
	}
	if x.Unresolved == nil {
		rh["Content-Length"] = []string{strconv.FormatInt(a.size, 10)}
	}
	for k, vs := range rh {
		if strings.EqualFold(k, "Set-Cookie") || strings.EqualFold(k, "Set-Cookie2") {
			for i := range vs {
				vs[i] = "REDACTED"
			}
		}
	}
	fmt.Fprintf(&a.head, "%s %d %s\r\n", a.proto, x.Status, http.StatusText(x.Status))
	w.writeHeader(&a.head, rh, a.id, "response")
	a.head.WriteString("\r\n")
	if a.head.Len() > warc.MaxHTTPHeaderBytes {
		return fmt.Errorf("exchange %s (%s): the response's HTTP header is %d bytes, more than the limit of %d", a.id, x.URL, a.head.Len(), warc.MaxHTTPHeaderBytes)
	}
	qh := cloneHeader(x.ReqHeader)
	for _, name := range []string{"Cookie", "Cookie2", "Authorization", "Proxy-Authorization", "Transfer-Encoding", "Content-Length"} {
		delHeader(qh, name)
	}
	if getHeader(qh, "Host") == "" {
		qh["Host"] = []string{a.u.Host}
	}
	if len(x.ReqBody) > 0 || a.method == http.MethodPost || a.method == http.MethodPut || a.method == http.MethodPatch {
		qh["Content-Length"] = []string{strconv.Itoa(len(x.ReqBody))}
	}
	fmt.Fprintf(&a.qblock, "%s %s %s\r\n", a.method, a.u.RequestURI(), a.proto)
	w.writeHeader(&a.qblock, qh, a.id, "request")
	a.qblock.WriteString("\r\n")
	if a.qblock.Len() > warc.MaxHTTPHeaderBytes {
		return fmt.Errorf("exchange %s (%s): the request's HTTP header is %d bytes, more than the limit of %d", a.id, x.URL, a.qblock.Len(), warc.MaxHTTPHeaderBytes)
	}
	a.qblock.Write(x.ReqBody)
	return nil
}

// digestPayload reads the payload once for its digest, the block digest and the record
// id; an identical payload already stored (at least DedupMinSize bytes) makes the record a
// revisit (head only).
func (a *adding) digestPayload(w *BundleWriter) error {
	x := a.x
	a.idHash = warc.RecordIDHash(a.id, "response", x.URL, a.date)
	a.idHash.Write(a.head.Bytes())
	a.blockHash = sha256.New()
	a.blockHash.Write(a.head.Bytes())
	if x.Unresolved == nil && a.origIdx < 0 {
		ph := sha256.New()
		n, err := iobuf.Copy(io.MultiWriter(ph, a.blockHash, a.idHash), io.NewSectionReader(a.body, 0, a.size))
		if err != nil {
			return fmt.Errorf("exchange %s (%s): read payload: %w", a.id, x.URL, err)
		}
		if n != a.size {
			return fmt.Errorf("exchange %s (%s): payload has %d bytes, not %d", a.id, x.URL, n, a.size)
		}
		a.payloadDigest = hex.EncodeToString(ph.Sum(nil))
		if a.size >= DedupMinSize {
			i, ok := w.byDigest[digestKey(a.payloadDigest)]
			var o original
			if ok {
				if o, err = w.origs.get(int(i)); err != nil {
					return w.fail(err)
				}
				// the key is 64 bits of the digest: the whole digest decides
				ok = o.digest == a.payloadDigest
			}
			if ok {
				a.origIdx, a.orig = int(i), &o
				a.payloadDigest, a.size = a.orig.digest, a.orig.size
				a.idHash = warc.RecordIDHash(a.id, "response", x.URL, a.date)
				a.idHash.Write(a.head.Bytes())
				a.blockHash = sha256.New()
				a.blockHash.Write(a.head.Bytes())
			}
		}
	}
	a.revisit = a.orig != nil || x.Unresolved != nil
	if !a.revisit {
		a.payload, a.payloadLen = io.NewSectionReader(a.body, 0, a.size), a.size
	}
	a.respID = warc.RecordIDFrom(a.idHash)
	return nil
}

// recordFields are the WARC header fields of the response (or revisit) record, with extra
// after pab's own, and of the request record. An exchange whose header would be longer than
// MaxWARCHeaderBytes, which no reader of the bundle would read back (a URL of tens of
// kilobytes), is an error wrapping ErrHeaderTooLarge.
func (a *adding) recordFields(extra []warc.Field) (resp, req []warc.Field, err error) {
	resp, req = append(a.responseFields(), extra...), a.requestFields()
	for _, r := range []struct {
		kind   string
		fields []warc.Field
		block  int64
	}{{"response", resp, int64(a.head.Len()) + a.payloadLen}, {"request", req, int64(a.qblock.Len())}} {
		if n := warc.HeaderSize(r.fields, r.block); n > warc.MaxWARCHeaderBytes {
			return nil, nil, fmt.Errorf("exchange %s (%s): %w: its %s record's WARC header would be %d bytes, more than the limit of %d (a URL of %d bytes)",
				a.id, warc.ClipText([]byte(a.x.URL)), warc.ErrHeaderTooLarge, r.kind, n, warc.MaxWARCHeaderBytes, len(a.x.URL))
		}
	}
	return resp, req, nil
}

// responseFields are the WARC header fields of the response (or revisit) record.
func (a *adding) responseFields() []warc.Field {
	x := a.x
	var hdr []warc.Field
	if a.revisit {
		hdr = append(hdr, warc.Field{Name: "WARC-Type", Value: "revisit"})
	} else {
		hdr = append(hdr, warc.Field{Name: "WARC-Type", Value: "response"})
	}
	hdr = append(hdr,
		warc.Field{Name: "WARC-Record-ID", Value: a.respID},
		warc.Field{Name: "WARC-Date", Value: a.date},
		warc.Field{Name: "WARC-Target-URI", Value: x.URL},
	)
	if a.revisit {
		hdr = append(hdr, warc.Field{Name: "WARC-Profile", Value: RevisitProfile})
		switch {
		case a.orig != nil:
			hdr = append(hdr,
				warc.Field{Name: "WARC-Refers-To", Value: a.orig.recordID},
				warc.Field{Name: "WARC-Refers-To-Target-URI", Value: a.orig.url},
				warc.Field{Name: "WARC-Refers-To-Date", Value: a.orig.date})
		default:
			if x.Unresolved.TargetURI != "" {
				hdr = append(hdr, warc.Field{Name: "WARC-Refers-To-Target-URI", Value: x.Unresolved.TargetURI})
			}
			if !x.Unresolved.Date.IsZero() {
				hdr = append(hdr, warc.Field{Name: "WARC-Refers-To-Date", Value: FormatTime(x.Unresolved.Date)})
			}
		}
	}
	hdr = append(hdr, a.protoFields...)
	hdr = append(hdr, warc.Field{Name: "Content-Type", Value: "application/http; msgtype=response"})
	switch {
	case a.payloadDigest != "":
		hdr = append(hdr, warc.Field{Name: "WARC-Payload-Digest", Value: "sha256:" + a.payloadDigest})
	case x.Unresolved != nil && x.Unresolved.PayloadDigest != "":
		hdr = append(hdr, warc.Field{Name: "WARC-Payload-Digest", Value: x.Unresolved.PayloadDigest})
	}
	hdr = append(hdr, warc.Field{Name: "WARC-Block-Digest", Value: "sha256:" + hex.EncodeToString(a.blockHash.Sum(nil))},
		warc.Field{Name: warc.HeaderExchangeID, Value: a.id})
	if x.ResourceType != "" {
		hdr = append(hdr, warc.Field{Name: warc.HeaderResourceType, Value: x.ResourceType})
	}
	if a.decoded {
		hdr = append(hdr, warc.Field{Name: warc.HeaderOriginalContentEncoding, Value: x.OrigEncoding})
	}
	if t := strings.TrimSpace(x.Truncated); t != "" && !a.revisit && warc.ValidFieldValue(t) {
		hdr = append(hdr, warc.Field{Name: "WARC-Truncated", Value: t})
	}
	for _, n := range x.PayloadNotes {
		if n = strings.TrimSpace(n); n != "" && !a.revisit && warc.ValidFieldValue(n) {
			hdr = append(hdr, warc.Field{Name: warc.HeaderPayloadNote, Value: n})
		}
	}
	return hdr
}

// requestFields are the WARC header fields of the request record, written after the
// response and concurrent to it.
func (a *adding) requestFields() []warc.Field {
	x := a.x
	qhdr := []warc.Field{
		{Name: "WARC-Type", Value: "request"},
		{Name: "WARC-Record-ID", Value: warc.RecordID(a.id, "request", x.URL, a.date, a.qblock.Bytes())},
		{Name: "WARC-Date", Value: a.date},
		{Name: "WARC-Target-URI", Value: x.URL},
		{Name: "WARC-Concurrent-To", Value: a.respID},
	}
	qhdr = append(qhdr, a.protoFields...)
	return append(qhdr, []warc.Field{
		{Name: "Content-Type", Value: "application/http; msgtype=request"},
		{Name: "WARC-Payload-Digest", Value: "sha256:" + sha256Hex(x.ReqBody)},
		{Name: "WARC-Block-Digest", Value: "sha256:" + sha256Hex(a.qblock.Bytes())},
		{Name: warc.HeaderExchangeID, Value: a.id},
	}...)
}

// addEntry writes the exchange's line to indexes/entries.jsonl and keeps its entry (without
// ReqBody), its payload for later revisits, and the capture's time span.
func (w *BundleWriter) addEntry(a *adding, respOff, respLen, reqOff, reqLen int64) (Entry, error) {
	x := a.x
	e := Entry{
		ID: a.id, TS: a.date, Method: a.method, URL: x.URL, Status: x.Status,
		Mime:       httpx.MediaType(getHeader(x.RespHeader, "Content-Type")),
		Digest:     a.payloadDigest,
		Size:       a.size,
		ReqOffset:  reqOff,
		ReqLength:  reqLen,
		RespOffset: respOff,
		RespLength: respLen,
		ReqType:    httpx.RequestKeyType(getHeader(x.ReqHeader, "Content-Type")),

		ResourceType: x.ResourceType,
	}
	if len(x.ReqBody) > 0 {
		e.ReqBody = base64.StdEncoding.EncodeToString(x.ReqBody)
	}
	o := original{recordID: a.respID, url: x.URL, date: a.date, digest: a.payloadDigest, size: a.size, stored: !a.revisit, revisitOf: -1}
	switch {
	case a.orig != nil:
		e.RevisitOf = entryID(a.origIdx)
		o.revisitOf = int32(a.origIdx)
	case x.Unresolved != nil:
		e.Unresolved = true
		e.Size = 0
	default:
		if a.size >= DedupMinSize {
			if _, dup := w.byDigest[digestKey(a.payloadDigest)]; !dup {
				w.byDigest[digestKey(a.payloadDigest)] = int32(w.n)
			}
		}
	}
	if w.n >= maxTableEntries {
		return Entry{}, w.fail(fmt.Errorf("more than %d exchanges", maxTableEntries))
	}
	if err := writeJSONLine(w.ebw, e); err != nil {
		return Entry{}, w.fail(err)
	}
	if err := w.origs.add(o); err != nil {
		return Entry{}, w.fail(err)
	}
	w.n++
	if w.from.IsZero() || x.Date.Before(w.from) {
		w.from = x.Date
	}
	if x.Date.After(w.to) {
		w.to = x.Date
	}
	return e, nil
}

// AddPage appends a line to pages/pages.jsonl; pages are written in the order added.
func (w *BundleWriter) AddPage(p Page) error {
	if w.err != nil {
		return w.err
	}
	if p.URL == "" {
		return errors.New("page without URL")
	}
	if err := writeJSONLine(w.pbw, p); err != nil {
		return w.fail(err)
	}
	return nil
}

func (w *BundleWriter) fail(err error) error {
	w.err = fmt.Errorf("write bundle %s: %w", w.dir, err)
	return w.err
}

// writeRecord writes one record (EncodeRecord) to archive/data.warc and returns its
// length.
func (w *BundleWriter) writeRecord(hdr []warc.Field, head []byte, payload io.Reader, payloadLen int64) (int64, error) {
	n, err := warc.EncodeRecord(w.bw, hdr, head, payload, payloadLen)
	w.off += n
	return n, err
}

// writeHeader writes header fields, names sorted, one line per value. A value holding
// line breaks (older recorders joined repeated fields with "\n") becomes one line per
// part. Fields whose name is not an HTTP token, or whose value holds control bytes, are
// left out with a warning.
func (w *BundleWriter) writeHeader(b *bytes.Buffer, h http.Header, id, what string) {
	keys := slices.Sorted(maps.Keys(h))
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) {
			w.warnings = append(w.warnings, fmt.Sprintf("%s: %s header %q left out: not a valid header name", id, what, k))
			continue
		}
		for _, v := range h[k] {
			for part := range strings.SplitSeq(v, "\n") {
				part = strings.TrimSpace(part)
				if !httpguts.ValidHeaderFieldValue(part) {
					w.warnings = append(w.warnings, fmt.Sprintf("%s: %s header %s value %q left out: control bytes", id, what, k, warc.ClipText([]byte(part))))
					continue
				}
				b.WriteString(k)
				b.WriteString(": ")
				b.WriteString(part)
				b.WriteString("\r\n")
			}
		}
	}
}

// Close finishes the bundle: it flushes archive/data.warc, writes indexes/entries.jsonl,
// pages/pages.jsonl and manifest.json (each fsynced), and renames the directory into
// place. On any error the temporary directory is removed and dir is left as it was.
func (w *BundleWriter) Close() error {
	if w.done {
		return w.err
	}
	if w.err != nil {
		w.Abort()
		return w.err
	}
	w.done = true
	if err := w.finish(); err != nil {
		w.err = fmt.Errorf("write bundle %s: %w", w.dir, err)
		w.removeTmp()
		return w.err
	}
	return nil
}

func (w *BundleWriter) finish() error {
	if w.tee != nil {
		if err := w.tee.finish(nil); err != nil {
			return err
		}
	}
	if err := w.bw.Flush(); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	w.f = nil
	if err := w.ebw.Flush(); err != nil {
		return err
	}
	if err := w.ef.Sync(); err != nil {
		return err
	}
	if err := w.ef.Close(); err != nil {
		return err
	}
	w.ef = nil
	if err := w.pbw.Flush(); err != nil {
		return err
	}
	if err := w.pf.Sync(); err != nil {
		return err
	}
	if err := w.pf.Close(); err != nil {
		return err
	}
	w.pf = nil
	w.origs.close()
	m := w.m
	if m.CapturedFrom == "" && !w.from.IsZero() {
		m.CapturedFrom = FormatTime(w.from)
	}
	if m.CapturedTo == "" && !w.to.IsZero() {
		m.CapturedTo = FormatTime(w.to)
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := writeNewFile(filepath.Join(w.tmp, ManifestFile), append(mb, '\n')); err != nil {
		return err
	}
	for _, d := range []string{filepath.Dir(WARCFile), filepath.Dir(EntriesFile), filepath.Dir(PagesFile), "."} {
		if err := atomicfile.SyncDir(filepath.Join(w.tmp, d)); err != nil {
			return err
		}
	}
	if err := os.Chmod(w.tmp, 0o755); err != nil {
		return err
	}
	return swapInDir(w.tmp, w.dir)
}

// Abort removes everything written so far; the writer cannot be used afterwards.
func (w *BundleWriter) Abort() {
	w.done = true
	if w.err == nil {
		w.err = errors.New("bundle writer aborted")
	}
	if w.tee != nil {
		w.tee.finish(errBundleAborted)
	}
	w.removeTmp()
}

func (w *BundleWriter) removeTmp() {
	if w.f != nil {
		_ = w.f.Close()
		w.f = nil
	}
	if w.ef != nil {
		_ = w.ef.Close()
		w.ef = nil
	}
	if w.pf != nil {
		_ = w.pf.Close()
		w.pf = nil
	}
	if w.origs != nil {
		w.origs.close()
	}
	if w.tmp != "" {
		_ = os.RemoveAll(w.tmp)
		w.tmp = ""
	}
}

// swapInDir renames tmp to dir; an existing dir is moved aside first and removed after.
func swapInDir(tmp, dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.Rename(tmp, dir); err != nil {
			return err
		}
		return atomicfile.SyncDir(filepath.Dir(dir))
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory", dir)
	}
	old := tmp + ".old"
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.Rename(old, dir)
		return err
	}
	_ = atomicfile.SyncDir(filepath.Dir(dir))
	return os.RemoveAll(old)
}

// writeJSONLine writes v as one JSON line (encoding/json with SetEscapeHTML(false), then a
// newline); an *Entry of plain strings is written by appendEntryJSON, the same bytes.
func writeJSONLine(b io.Writer, v any) error {
	if e, ok := v.(*Entry); ok { // the most frequent line, without reflection
		var line []byte
		if bw, ok := b.(*bufio.Writer); ok {
			line = bw.AvailableBuffer()
		}
		if line, ok = appendEntryJSON(line, e); ok {
			_, err := b.Write(line)
			return err
		}
	}
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func cloneHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		out[k] = slices.Clone(vs)
	}
	return out
}

// delHeader removes name whatever the case of the map key.
func delHeader(h http.Header, name string) {
	for k := range h {
		if strings.EqualFold(k, name) {
			delete(h, k)
		}
	}
}

// getHeader returns the first value of name whatever the case of the map key; when keys
// differ only in case, the sorted-first key wins, so the answer does not depend on map order.
func getHeader(h http.Header, name string) string {
	if vs := h[http.CanonicalHeaderKey(name)]; len(vs) > 0 {
		return vs[0]
	}
	var best string
	found := false
	for k, vs := range h {
		if strings.EqualFold(k, name) && len(vs) > 0 && (!found || k < best) {
			best, found = k, true
		}
	}
	if found {
		return h[best][0]
	}
	return ""
}
