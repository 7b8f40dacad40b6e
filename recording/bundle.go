package recording

// This file opens a bundle directory for replay (docs/bundle-format.md): it reads and checks
// the three small files and answers a recorded exchange's response straight from
// archive/data.warc by offset, without loading the archive or a whole payload into memory.

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pab-dev/pab/warc"
)

// Size bounds for the files of a bundle. Every file read from a bundle is treated as hostile.
const (
	// MaxManifestBytes bounds manifest.json.
	MaxManifestBytes = 1 << 20
	// MaxEntryLineBytes bounds one line of indexes/entries.jsonl. A line carries the request
	// body in base64, so it is large enough for a 40 MB upload.
	MaxEntryLineBytes = 64 << 20
	// MaxPageLineBytes bounds one line of pages/pages.jsonl.
	MaxPageLineBytes = 1 << 20
)

// ErrUnresolvedRevisit is returned (wrapped) by Bundle.Response for a revisit record whose
// original payload is not in the recording: the entry is marked "unresolved", or its
// "revisitOf" names no entry of the bundle. Replay answers such a request as a miss.
var ErrUnresolvedRevisit = errors.New("unresolved revisit")

// Bundle is an open bundle directory. Its fields are read-only after OpenBundle, and all its
// methods are safe for concurrent use: records are read with ReadAt, never through a shared
// file position.
type Bundle struct {
	// Dir is the bundle directory as given to OpenBundle.
	Dir      string
	Manifest Manifest
	// Entries are the lines of indexes/entries.jsonl in file (recording) order; nil for a
	// bundle opened with OpenBundleTable, whose entries Len and Entry give (code that may
	// be handed either kind uses those).
	Entries []Entry
	// Pages are the lines of pages/pages.jsonl in visit order; nil for a bundle opened
	// with OpenBundleTable, whose pages AllPages reads when first asked (code that may be
	// handed either kind uses AllPages).
	Pages []Page

	byID     map[string]int
	warc     io.ReaderAt // archive/data.warc, or the logical data.warc of a format 3 recording (z)
	warcSize int64
	z        *zarchive // set when the bundle is a format 3 recording read in place
	closer   io.Closer
	tab      *entryTable // the entry table of a bundle opened with OpenBundleTable, else nil
	tabName  string      // its file, for errors
	lazy     *lazyPages  // a table bundle's pages, read on first use
}

// Response is a recorded HTTP response as stored in archive/data.warc.
type Response struct {
	// Status is the HTTP status code (100 to 999).
	Status int
	// Proto is the protocol of the status line as recorded ("HTTP/1.1").
	Proto string
	// Header holds the recorded header fields, canonical names, values in recorded order.
	Header http.Header
	// Body reads the stored (decoded) payload. It is an *io.SectionReader over data.warc
	// (of a format 3 recording: over its records inflated from their gzip members), so
	// each Response has its own read position and may be read from any goroutine.
	Body io.Reader
	// Size is the payload length in bytes.
	Size int64
	// RecordID is the WARC-Record-ID of the response record, or of the revisit record when
	// the entry is a revisit.
	RecordID string
	// Truncated is the record's WARC-Truncated value (WARC 1.1 section 5.13: "length",
	// "time", "disconnect", "unspecified"): the stored payload is shorter than the one the
	// site sent. "" when the payload is whole.
	Truncated string
	// Notes are the import's notes on the payload (HeaderPayloadNote fields of the record
	// that holds it: the original's for a revisit), in order; nil when none.
	Notes []string
}

// OpenBundle opens the bundle directory dir: it reads manifest.json, indexes/entries.jsonl
// and pages/pages.jsonl, opens archive/data.warc, and checks that every entry's record
// offsets lie inside the archive. All four files must be regular files inside dir (a symlink
// that leads out of dir is refused). Unknown JSON fields are errors: the bundle files are
// written only by pab, and a field this build does not know means a format it does not read.
// Errors name the file and the line (JSONL) or byte offset (JSON). The caller must Close
// the bundle.
//
// dir may also be a published recording of format 3 (manifest.json with "format": 3,
// pages.jsonl, entries.jsonl.gz, data.warc.gz or its parts; docs/bundle-format.md), which
// is opened in place: nothing is unpacked, each record is read by inflating its own gzip
// member. Its entries keep their member fields. A published recording of another format is
// an error naming it (format 2 is unpacked first: Unpack).
func OpenBundle(dir string) (*Bundle, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open bundle %s: %w", dir, err)
	}
	defer root.Close()

	b := &Bundle{Dir: dir}
	mf, err := openBundleFile(root, dir, ManifestFile)
	if err != nil {
		return nil, err
	}
	b.Manifest, err = readManifest(mf, filepath.Join(dir, ManifestFile))
	mf.Close()
	if err != nil {
		return nil, err
	}
	if _, err := root.Stat(WARCFile); b.Manifest.Format != 0 && errors.Is(err, fs.ErrNotExist) {
		// a published recording (a bundle unpacked from one may keep the "format")
		if b.Manifest.Format == RecordingFormat {
			return openInPlace(root, b)
		}
		return nil, formatError(dir, b.Manifest.Format)
	}

	return openBundleRest(root, b)
}

// formatError is OpenBundle's error for a published recording dir of a format it does not
// read in place.
func formatError(dir string, format int) error {
	return fmt.Errorf("open bundle %s: a published recording of format %d; this pab reads format %d in place and unpacks format %d (Unpack); run pab recording migrate", dir, format, RecordingFormat, RecordingFormat2)
}

// openBundleRest opens the data files of bundle b (whose Dir and Manifest are set) from
// root: archive/data.warc, indexes/entries.jsonl (offsets checked against the archive) and
// pages/pages.jsonl. On error nothing stays open.
func openBundleRest(root *os.Root, b *Bundle) (*Bundle, error) {
	dir := b.Dir
	wf, err := openBundleFile(root, dir, WARCFile)
	if err != nil {
		return nil, err
	}
	fi, err := wf.Stat()
	if err != nil {
		wf.Close()
		return nil, fmt.Errorf("stat %s: %w", filepath.Join(dir, WARCFile), err)
	}
	b.warc, b.closer, b.warcSize = wf, wf, fi.Size()

	ef, err := openBundleFile(root, dir, EntriesFile)
	if err != nil {
		b.closer.Close()
		return nil, err
	}
	b.Entries, b.byID, err = readEntriesIndexed(ef, filepath.Join(dir, EntriesFile), b.warcSize, 0)
	ef.Close()
	if err != nil {
		b.closer.Close()
		return nil, err
	}

	pf, err := openBundleFile(root, dir, PagesFile)
	if err != nil {
		b.closer.Close()
		return nil, err
	}
	b.Pages, err = readPages(pf, filepath.Join(dir, PagesFile))
	pf.Close()
	if err != nil {
		b.closer.Close()
		return nil, err
	}
	return b, nil
}

// Close closes archive/data.warc (a format 3 recording's parts). Bodies of Responses
// returned earlier fail afterwards.
func (b *Bundle) Close() error {
	return b.closer.Close()
}

// InPlace reports whether the bundle is a published recording of format 3 read in place
// (OpenBundle on its recording directory) rather than a bundle directory.
func (b *Bundle) InPlace() bool { return b.z != nil }

// ByID returns the entry whose "id" is id, or nil. The entry belongs to the bundle: do not
// modify it.
func (b *Bundle) ByID(id string) *Entry {
	if b.tab != nil {
		if i := b.tab.byID(id); i >= 0 {
			return b.Entry(i)
		}
		return nil
	}
	i, ok := b.byID[id]
	if !ok {
		return nil
	}
	return &b.Entries[i]
}

// RequestBody returns the entry's request body, decoded from the base64 "reqBody" field
// (RFC 4648 standard encoding); nil for a bodiless request.
func (b *Bundle) RequestBody(e *Entry) ([]byte, error) {
	if e.ReqBody == "" {
		return nil, nil
	}
	body, err := base64.StdEncoding.DecodeString(e.ReqBody)
	if err != nil {
		return nil, fmt.Errorf("%s: entry %s: reqBody: %w", b.entriesPath(), e.ID, err)
	}
	return body, nil
}

// Response reads the response of entry e from archive/data.warc: the WARC record at
// e.RespOffset (a "response" record, or a "revisit" record when e.RevisitOf is set; WARC 1.1
// sections 6.3 and 6.7), its HTTP status line and header fields, and its payload as a
// section of the file. For a revisit, status and header come from the revisit record and the
// body from the original exchange's payload. An unresolved revisit gives an error wrapping
// ErrUnresolvedRevisit. A record that does not match the index (type, length, payload size)
// gives an error naming the file and offset.
func (b *Bundle) Response(e *Entry) (*Response, error) {
	if e.Unresolved {
		return nil, fmt.Errorf("entry %s (%s): %w: its original payload is not in the recording", e.ID, e.URL, ErrUnresolvedRevisit)
	}
	if e.RevisitOf == "" {
		return b.response(e, "response")
	}
	orig := b.ByID(e.RevisitOf)
	if orig == nil {
		return nil, fmt.Errorf("entry %s (%s): %w: revisitOf %q names no entry", e.ID, e.URL, ErrUnresolvedRevisit, e.RevisitOf)
	}
	if orig.RevisitOf != "" || orig.Unresolved {
		return nil, fmt.Errorf("entry %s: revisitOf %q is itself a revisit", e.ID, e.RevisitOf)
	}
	resp, err := b.response(e, "revisit")
	if err != nil {
		return nil, err
	}
	origResp, err := b.response(orig, "response")
	if err != nil {
		return nil, fmt.Errorf("entry %s: original: %w", e.ID, err)
	}
	resp.Body = origResp.Body
	resp.Size = origResp.Size
	resp.Notes = origResp.Notes
	return resp, nil
}

// response parses the record of e at e.RespOffset, which must be of WARC-Type wantType.
func (b *Bundle) response(e *Entry, wantType string) (*Response, error) {
	rec, err := b.record(e.RespOffset, e.RespLength)
	if err != nil {
		return nil, fmt.Errorf("read %s (entry %s): %w", b.place(e.RespOffset), e.ID, err)
	}
	if rec.typ != wantType {
		return nil, fmt.Errorf("read %s (entry %s): WARC-Type is %q, want %q", b.place(e.RespOffset), e.ID, rec.typ, wantType)
	}
	block := io.NewSectionReader(b.warc, rec.blockOff, rec.blockLen)
	lines, headLen, err := warc.ReadHeadLines(block, warc.MaxHTTPHeaderBytes, true)
	if err != nil {
		return nil, fmt.Errorf("read %s (entry %s): http header: %w", b.place(rec.blockOff), e.ID, err)
	}
	r, err := parseHTTPResponseHead(lines)
	if err != nil {
		return nil, fmt.Errorf("read %s (entry %s): %w", b.place(rec.blockOff), e.ID, err)
	}
	r.RecordID = rec.id
	r.Truncated = rec.fields.Get("WARC-Truncated")
	r.Notes = rec.fields.Values(warc.HeaderPayloadNote)
	r.Size = rec.blockLen - headLen
	r.Body = io.NewSectionReader(b.warc, rec.blockOff+headLen, r.Size)
	if wantType == "response" && r.Size != e.Size {
		return nil, fmt.Errorf("read %s (entry %s): payload is %d bytes, %s says %d", b.place(e.RespOffset), e.ID, r.Size, filepath.Base(b.entriesPath()), e.Size)
	}
	return r, nil
}

// warcRecord is one record of data.warc: its header fields and where its block sits.
type warcRecord struct {
	typ, id            string      // WARC-Type, WARC-Record-ID
	fields             warc.Fields // every field of its WARC header
	blockOff, blockLen int64
}

// record parses the WARC header of the record at [off, off+length) and checks that the
// header, the Content-Length block and the closing CRLF CRLF fill exactly that span
// (WARC 1.1 section 4: record = header CRLF block CRLF CRLF).
//
// The header is read with a small parser of our own (warchead.go) rather than gowarc's
// Unmarshaler: the bundle writer always writes WARC 1.1, and replay needs the block's byte
// offset in the file, which a parser over an io.SectionReader gives directly.
func (b *Bundle) record(off, length int64) (warcRecord, error) {
	sr := io.NewSectionReader(b.warc, off, length)
	lines, headLen, err := warc.ReadHeadLines(sr, warc.MaxWARCHeaderBytes, false)
	if err != nil {
		return warcRecord{}, fmt.Errorf("warc header: %w", err)
	}
	h, err := warc.ParseWARCHead(lines)
	if err != nil {
		return warcRecord{}, err
	}
	contentLength := h.ContentLength
	rec := warcRecord{typ: h.Fields.Get("WARC-Type"), id: h.Fields.Get("WARC-Record-ID"), fields: h.Fields}
	if headLen+contentLength+4 != length {
		return warcRecord{}, fmt.Errorf("record is %d bytes (header %d + Content-Length %d + 4), entries.jsonl says %d", headLen+contentLength+4, headLen, contentLength, length)
	}
	if b.z != nil && length > smallMember {
		// a streamed member: reading its tail here would inflate all of it; its length is
		// checked when it is read to the end, and its closing CRLF CRLF by pab audit
		rec.blockOff = off + headLen
		rec.blockLen = contentLength
		return rec, nil
	}
	var tail [4]byte
	if _, err := b.warc.ReadAt(tail[:], off+length-4); err != nil {
		return warcRecord{}, fmt.Errorf("record end: %w", err)
	}
	if string(tail[:]) != "\r\n\r\n" {
		return warcRecord{}, fmt.Errorf("record does not end with CRLF CRLF (found %q)", tail[:])
	}
	rec.blockOff = off + headLen
	rec.blockLen = contentLength
	return rec, nil
}

// parseHTTPResponseHead parses an HTTP/1.x status line and header fields (RFC 9112 sections
// 4 and 5) leniently, since recordings come from many tools: the version is taken as
// recorded ("HTTP/2" included), spaces around a field name are dropped, a line starting with
// a space or tab continues the previous field's value (obsolete folding), and a line with no
// colon is one more value of the field before it (older recorders joined repeated fields
// with newlines). net/http's ReadResponse is not used because it rejects all of these.
func parseHTTPResponseHead(lines []string) (*Response, error) {
	proto, rest, _ := strings.Cut(lines[0], " ")
	code, _, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
	if !strings.HasPrefix(proto, "HTTP/") {
		return nil, fmt.Errorf("malformed http status line %.60q", lines[0])
	}
	status, err := strconv.Atoi(code)
	if err != nil || len(code) != 3 || status < 100 {
		return nil, fmt.Errorf("malformed http status in %.60q", lines[0])
	}
	h := make(http.Header)
	last := ""
	for _, line := range lines[1:] {
		if line[0] == ' ' || line[0] == '\t' {
			if last == "" {
				return nil, fmt.Errorf("http header starts with a continuation line %.60q", line)
			}
			vs := h[last]
			vs[len(vs)-1] += " " + strings.Trim(line, " \t")
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.Trim(name, " \t")
		if !ok || name == "" {
			if last == "" {
				return nil, fmt.Errorf("malformed http header line %.60q", line)
			}
			h[last] = append(h[last], strings.Trim(line, " \t"))
			continue
		}
		last = textproto.CanonicalMIMEHeaderKey(name)
		h[last] = append(h[last], strings.Trim(value, " \t"))
	}
	return &Response{Status: status, Proto: proto, Header: h}, nil
}

// openBundleFile opens the regular file name inside root (a symlink may point only inside
// the bundle; a directory, device or pipe is refused before it is opened).
func openBundleFile(root *os.Root, dir, name string) (*os.File, error) {
	path := filepath.Join(dir, name)
	fi, err := root.Stat(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is named once, in full
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("open %s: not a regular file (mode %s)", path, fi.Mode())
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}
