package warc

// reader.go: a tolerant, bounded WARC reader (WARC 1.0 and 1.1, ISO 28500; the pre-ISO
// WARC/0.17 and 0.18 drafts are read with a warning). It frames records itself and uses
// gowarc (github.com/nlnwa/gowarc/v3) to parse each record's WARC header fields (a header
// of the common shape is split by fastfields.go into the same fields, gowarc naming them).
//
// Why the framing is ours: gowarc's reader assumes one gzip member per record and silently
// drops the rest of a member (whole-file gzip loses records), it resynchronises on "WARC/"
// anywhere after a wrong Content-Length, and with validation off it discards the block
// before returning the record. Framing here reads the uncompressed stream record by record,
// checks each record's end marker, and keeps the block (bounded) for the caller.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	gowarc "github.com/nlnwa/gowarc/v3"
)

// DefaultMaxBlockSize bounds the block (the bytes counted by WARC Content-Length) that
// Next holds in memory: 256 MiB. A response, request or revisit record above it is an
// error; the block of any other record type above it is skipped with a warning.
const DefaultMaxBlockSize int64 = 256 << 20

// maxHeaderSize bounds a record's WARC header (version line and fields): 1 MiB.
const maxHeaderSize = 1 << 20

// Errors a Reader returns (wrapped with the file and offset); test with errors.Is.
var (
	// ErrNotWARC: the bytes where a record should start are not "WARC/".
	ErrNotWARC = errors.New("not a WARC record")
	// ErrTruncated: the file ends inside a record's header or block.
	ErrTruncated = errors.New("truncated record")
	// ErrContentLength: the block is not followed by the record end marker (CRLF CRLF)
	// nor by the next record, so the record's WARC Content-Length is wrong.
	ErrContentLength = errors.New("WARC Content-Length does not match the record")
	// ErrTooLarge: a record block, or a WARC header, is larger than the reader's bounds.
	ErrTooLarge = errors.New("record too large")
	// ErrBadHeader: a WARC header field the reader needs (Content-Length) is missing or invalid.
	ErrBadHeader = errors.New("bad WARC header")
)

// Field is one header field, name and value as recorded (surrounding blanks trimmed).
type Field struct {
	Name  string
	Value string
}

// Fields is an ordered header: repeated names are kept, in recording order.
type Fields []Field

// Get returns the first value of name (case-insensitive), or "".
func (fs Fields) Get(name string) string {
	for _, f := range fs {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// Values returns every value of name (case-insensitive), in recording order.
func (fs Fields) Values(name string) []string {
	var vs []string
	for _, f := range fs {
		if strings.EqualFold(f.Name, name) {
			vs = append(vs, f.Value)
		}
	}
	return vs
}

// Has reports whether name (case-insensitive) occurs.
func (fs Fields) Has(name string) bool {
	for _, f := range fs {
		if strings.EqualFold(f.Name, name) {
			return true
		}
	}
	return false
}

// Record is one WARC record as read by Reader.Next.
type Record struct {
	// Version is the version line's number: "1.0", "1.1", or "0.17" for the draft.
	Version string
	// Type is the WARC-Type, lower case ("response", "request", "revisit", "warcinfo", ...).
	Type string
	// ID is the WARC-Record-ID with its angle brackets, e.g. "<urn:uuid:...>".
	ID string
	// TargetURI is WARC-Target-URI without the angle brackets of the WARC 1.0 draft
	// syntax and with literal spaces percent-encoded; "" when absent.
	TargetURI string
	// Date is the WARC-Date; the zero time when absent or unreadable (with a warning).
	Date time.Time
	// Offset and Length locate the record in the file, in bytes. In a plain file they
	// cover the whole record (header, block and end marker). In a gzip file they are the
	// compressed offset and length of the gzip member when the record is exactly one whole
	// member (what the WARC standard recommends, annex D); a record that shares a member
	// with other records or spans several members (whole-file gzip) has Offset and
	// Length -1: it can only be reached by reading the file from the start.
	Offset int64
	Length int64
	// Pos is the record's offset in the uncompressed stream (equal to Offset in a plain file).
	Pos int64
	// Header is the WARC header, fields in recording order; names are in gowarc's
	// canonical form ("WARC-Record-ID", "Rr-Exchange-Id"), lookups ignore case.
	Header Fields
	// BlockSize is the WARC Content-Length.
	BlockSize int64
	// Block is the record block; nil when it was too large to load (see DefaultMaxBlockSize),
	// and in an import's streamed reading, where bodies go to a spool file instead.
	Block []byte
	// HTTP is the parsed HTTP message of a response, request or revisit record whose
	// block is HTTP (Content-Type application/http, or an http(s) target); else nil.
	HTTP *HTTPMessage
	// Warnings lists what was odd but readable in this record, one line each.
	Warnings []string

	where string
	// Body is where the HTTP Body lies in the reader's spool (streamed reading, see
	// Reader.spool); Block is then nil and HTTP.Body empty.
	Body Span
}

// Get returns the first value of a WARC header field (case-insensitive), or "".
func (r *Record) Get(name string) string { return r.Header.Get(name) }

// Where describes the record's place for messages: "offset 1197", or for a record
// inside a shared gzip member "offset 0 (uncompressed 2012)".
func (r *Record) Where() string { return r.where }

// SetWhere sets what Where returns: a record rebuilt from a parked copy (the import's
// Spool) keeps the place it was read from.
func (r *Record) SetWhere(where string) { r.where = where }

// Warning is a file-level finding of a Reader (not tied to one record's content).
type Warning struct {
	// Where is "offset N" or "offset N (uncompressed M)".
	Where string
	Msg   string
}

// Reader reads the records of one WARC file in order. It is not safe for concurrent use.
type Reader struct {
	// MaxBlockSize bounds the block held in memory per record (in an import's streamed
	// reading, the block of a response, request or revisit record, which goes to disk);
	// set before the first Next.
	MaxBlockSize int64
	// Strict refuses a record whose WARC Content-Length does not match where it ends
	// (ErrContentLength), as WARC 1.1 section 5.1 requires. Without it (the default) the
	// reader finds the real end within ResyncWindow bytes, corrects the block, and warns
	// on the file and on the record (see Resyncs).
	Strict bool
	// VerifyDigests checks WARC-Block-Digest and WARC-Payload-Digest (sha1, sha256,
	// sha512, md5; base16, base32, base64 or base64url) and adds a warning on mismatch.
	VerifyDigests bool

	path     string
	File     io.Closer
	fileSize int64         // the size of file (OpenReader), else 0
	gz       *memberReader // nil for a plain file
	br       *bufio.Reader // the uncompressed stream, read through pb
	pb       *pushbackReader
	ring     *tailRing // the last bytes of a streamed block
	// resyncs counts records whose Content-Length was corrected.
	resyncs int
	pos     int64 // bytes consumed from the uncompressed stream
	size    int64 // file size for a plain file, else -1
	err     error // sticky error (io.EOF at the end)
	warns   []Warning

	warnedVersion map[string]bool
	once          map[string]int // warning kind -> index in warns
	onceCount     map[string]int

	// Spool, when set (by an import), makes Next stream the block of every response,
	// request and revisit record into it (only the HTTP head stays in memory, at most
	// MaxHTTPHeaderBytes) and read the block of every other record through without keeping
	// it. Digests are checked on the way.
	Spool *Spool
	blk   *bufio.Reader // reads one block in streamed reading

	um   gowarc.Unmarshaler
	hdr  []byte
	hrd  *bytes.Reader
	hbr  *bufio.Reader
	recs int
	// names maps field names to gowarc's canonical form (fastFields)
	names map[string]string
}

// OpenReader opens a WARC file, plain or gzip-compressed (one member per record, or one
// member for the whole file, or members that do not line up with records), and detects
// which from the first bytes, not from the name. Errors name the file.
func OpenReader(path string) (*Reader, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	r, err := NewReader(path, f, 0, fi.Size())
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	r.File = f
	r.fileSize = fi.Size()
	return r, nil
}

// Progress is how far the reader is into its file: the bytes of the file read so far
// (compressed, as read from the disk, including what the buffers read ahead) and the
// file's size; both -1 when the reader does not read a file of its own (a WACZ member).
func (r *Reader) Progress() (read, size int64) {
	f, ok := r.File.(*os.File)
	if !ok || r.fileSize <= 0 {
		return -1, -1
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return -1, -1
	}
	return off, r.fileSize
}

// ReadRecordAt reads the one record at off in ra, as a bundle's entries.jsonl locates it
// (Entry.RespOffset/RespLength): length bounds the bytes read. name is used in errors.
func ReadRecordAt(ra io.ReaderAt, name string, off, length int64) (*Record, error) {
	r, err := NewReader(name, io.NewSectionReader(ra, off, length), off, length)
	if err != nil {
		return nil, err
	}
	rec, err := r.Next()
	if err == io.EOF {
		return nil, fmt.Errorf("read %s at offset %d: %w: no record there", name, off, ErrNotWARC)
	}
	return rec, err
}

// NewReader reads size bytes of src, which start at file offset base.
func NewReader(name string, src io.Reader, base, size int64) (*Reader, error) {
	r := &Reader{
		MaxBlockSize:  DefaultMaxBlockSize,
		VerifyDigests: true,
		path:          name,
		pos:           base,
		size:          base + size,
		warnedVersion: map[string]bool{},
		once:          map[string]int{},
		onceCount:     map[string]int{},
		um:            gowarc.NewUnmarshaler(gowarc.WithNoValidation()),
		hrd:           bytes.NewReader(nil),
	}
	r.hbr = bufio.NewReaderSize(r.hrd, 4096)
	cr := &countingReader{r: src}
	raw := bufio.NewReaderSize(cr, 64<<10)
	magic, _ := raw.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		r.gz = &memberReader{br: raw, cr: cr, base: base}
		r.pos = 0
		r.pb = &pushbackReader{r: r.gz}
		r.size = -1
	} else {
		r.pb = &pushbackReader{r: raw}
	}
	r.br = bufio.NewReaderSize(r.pb, ResyncWindow)
	return r, nil
}

// InflateAhead makes a gzip-compressed Reader inflate its file in a goroutine of its own,
// at most 1 MiB of uncompressed bytes ahead of Next, so that inflating and parsing records
// use two cores. What Next returns (records, offsets, warnings, errors) is the same; the
// goroutine holds the file until Close, which stops it. It does nothing on a plain file.
// Call it before the first Next; the Reader is still for one goroutine's use.
func (r *Reader) InflateAhead() {
	if r.gz != nil && r.gz.ahead == nil && r.recs == 0 {
		r.gz.startInflateAhead()
	}
}

// Close stops the goroutine of InflateAhead and releases the file.
func (r *Reader) Close() error {
	if r.gz != nil && r.gz.ahead != nil {
		r.gz.ahead.close()
	}
	if r.File != nil {
		err := r.File.Close()
		r.File = nil
		return err
	}
	return nil
}

// Resyncs returns how many records so far had a wrong WARC Content-Length that the reader
// corrected (each also has a file warning and a record warning); always 0 when Strict.
func (r *Reader) Resyncs() int { return r.resyncs }

// Warnings returns the file-level warnings so far: an unsupported version, gzip members
// holding several records, record end markers that are not CRLF CRLF, bytes skipped
// between records or after the last record. A finding that recurs is listed once, at its
// first place, with the number of records it concerns.
func (r *Reader) Warnings() []Warning {
	out := make([]Warning, len(r.warns))
	copy(out, r.warns)
	for kind, i := range r.once {
		if n := r.onceCount[kind]; n > 1 {
			out[i].Msg += fmt.Sprintf(" (%d records)", n)
		}
	}
	return out
}

// warnOnce records a warning of a kind the first time it occurs and counts the rest.
func (r *Reader) warnOnce(kind string, pos int64, msg string) {
	r.onceCount[kind]++
	if _, ok := r.once[kind]; ok {
		return
	}
	r.once[kind] = len(r.warns)
	r.warn(pos, "%s", msg)
}

// where describes an uncompressed stream position as a file location.
func (r *Reader) where(pos int64) string {
	if r.gz == nil {
		return "offset " + strconv.FormatInt(pos, 10)
	}
	m, ok := r.gz.memberAt(pos)
	if !ok {
		return "uncompressed offset " + strconv.FormatInt(pos, 10)
	}
	if m.dStart == pos {
		return "offset " + strconv.FormatInt(m.cOff, 10)
	}
	return fmt.Sprintf("offset %d (uncompressed %d)", m.cOff, pos)
}

func (r *Reader) fail(pos int64, err error) error {
	var ge *gzipError
	if errors.As(err, &ge) {
		r.err = fmt.Errorf("read %s at offset %d: %w", r.path, ge.off, err)
	} else {
		r.err = fmt.Errorf("read %s at %s: %w", r.path, r.where(pos), err)
	}
	return r.err
}

func (r *Reader) warn(pos int64, format string, args ...any) {
	r.warns = append(r.warns, Warning{Where: r.where(pos), Msg: fmt.Sprintf(format, args...)})
}

func isBlank(b byte) bool {
	return b == '\r' || b == '\n' || b == ' ' || b == '\t' || b == 0
}

// Next returns the next record, or io.EOF after the last one. After an error every
// further call returns the same error. Errors read "read FILE at offset N: ...".
func (r *Reader) Next() (*Record, error) {
	if r.err != nil {
		return nil, r.err
	}
	// Blank bytes between records (extra CRLFs, NUL padding) are skipped with a warning.
	skipStart := r.pos
	for {
		b, err := r.br.Peek(1)
		if err != nil {
			if err == io.EOF {
				if r.pos > skipStart {
					r.warn(skipStart, "%d blank bytes after the last record", r.pos-skipStart)
				}
				if r.recs == 0 {
					return nil, r.fail(r.pos, fmt.Errorf("%w: empty file", ErrNotWARC))
				}
				if r.gz != nil && r.gz.trailing > 0 {
					r.warns = append(r.warns, Warning{
						Where: "offset " + strconv.FormatInt(r.gz.trailingOff, 10),
						Msg:   fmt.Sprintf("%d blank bytes after the last gzip member ignored", r.gz.trailing)})
				}
				r.err = io.EOF
				return nil, io.EOF
			}
			return nil, r.fail(r.pos, err)
		}
		if !isBlank(b[0]) {
			break
		}
		_, _ = r.br.Discard(1)
		r.pos++
		if r.pos-skipStart > maxHeaderSize {
			return nil, r.fail(skipStart, fmt.Errorf("%w: more than %d blank bytes where a record should start", ErrNotWARC, maxHeaderSize))
		}
	}
	if r.pos > skipStart && r.recs > 0 {
		r.warn(skipStart, "%d blank bytes between records skipped", r.pos-skipStart)
	} else if r.pos > skipStart {
		r.warn(skipStart, "%d blank bytes before the first record skipped", r.pos-skipStart)
	}
	if r.gz != nil {
		r.gz.prune(r.pos)
	}
	start := r.pos
	rec, err := r.readRecord(start)
	if err != nil {
		return nil, r.fail(start, err)
	}
	r.recs++
	return rec, nil
}

func (r *Reader) readRecord(start int64) (*Record, error) {
	rec, err := r.readHeader(start)
	if err != nil {
		return nil, err
	}
	cl := rec.BlockSize
	httpType := rec.Type == "response" || rec.Type == "request" || rec.Type == "revisit"
	streamed, err := r.readBlock(rec, cl, httpType)
	if err != nil {
		return nil, err
	}
	if streamed, err = r.readEnd(rec, start, cl, streamed, httpType); err != nil {
		return nil, err
	}
	r.locate(rec, start)
	r.readHTTP(rec, streamed, httpType)
	return rec, nil
}

// readHeader reads the WARC header of the record at start (the version line and the
// fields up to the empty line, WARC 1.1 section 4) and the fields every record has: type,
// id, target URI, date and Content-Length (rec.BlockSize).
func (r *Reader) readHeader(start int64) (*Record, error) {
	magic, err := r.br.Peek(5)
	if !bytes.Equal(magic, []byte("WARC/")) {
		if err != nil && err != io.EOF {
			return nil, err
		}
		what := "the file does not start with a WARC record"
		if r.recs > 0 {
			what = "expected the next record"
		}
		return nil, fmt.Errorf("%w: %s, found %q", ErrNotWARC, what, magic)
	}

	// WARC header: the version line and fields up to the empty line.
	r.hdr = r.hdr[:0]
	lineStart := true
	firstLine := true
	for {
		line, err := r.br.ReadSlice('\n')
		r.pos += int64(len(line))
		r.hdr = append(r.hdr, line...)
		if len(r.hdr) > maxHeaderSize {
			return nil, fmt.Errorf("%w: WARC header longer than %d bytes", ErrTooLarge, maxHeaderSize)
		}
		if err == bufio.ErrBufferFull {
			lineStart = false
			continue
		}
		if err != nil {
			if err == io.EOF {
				return nil, fmt.Errorf("%w: the file ends inside the WARC header", ErrTruncated)
			}
			return nil, err
		}
		whole := lineStart
		lineStart = true
		if whole && !firstLine && len(bytes.TrimLeft(line, "\r")) == 1 && len(line) <= 3 {
			break
		}
		firstLine = false
	}
	if bytes.Contains(r.hdr, []byte("\r\r\n")) {
		// Lines ended by CR CR LF (a CRLF written through a text-mode LF to CRLF
		// conversion): read as CRLF, for gowarc too.
		r.warnOnce("header-crcrlf", start, "WARC header lines end with CR CR LF, not CRLF")
		r.hdr = bytes.ReplaceAll(r.hdr, []byte("\r\r\n"), []byte("\r\n"))
	}
	nl := bytes.IndexByte(r.hdr, '\n')
	version := string(bytes.TrimSpace(r.hdr[5:nl]))

	rec := &Record{Version: version, Pos: start, Offset: -1, Length: -1}
	if fields, ok := r.fastFields(r.hdr); ok {
		rec.Header = fields
	} else {
		r.hrd.Reset(r.hdr)
		r.hbr.Reset(r.hrd)
		grec, _, _, err := r.um.Unmarshal(r.hbr)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadHeader, err)
		}
		for _, nv := range *grec.WarcHeader() {
			rec.Header = append(rec.Header, Field{Name: nv.Name, Value: nv.Value})
		}
		_ = grec.Close()
	}

	switch version {
	case "1.0", "1.1":
	default:
		if !r.warnedVersion[version] {
			r.warnedVersion[version] = true
			r.warn(start, "WARC/%s is not WARC 1.0 or 1.1; read as WARC 1.0", version)
		}
	}
	rec.Type = strings.ToLower(rec.Header.Get("WARC-Type"))
	rec.ID = rec.Header.Get("WARC-Record-ID")
	rec.TargetURI = CleanTargetURI(rec.Header.Get("WARC-Target-URI"))
	if d := rec.Header.Get("WARC-Date"); d != "" {
		t, err := ParseWARCDate(d)
		if err != nil {
			rec.Warnings = append(rec.Warnings, fmt.Sprintf("unreadable WARC-Date %q", d))
		}
		rec.Date = t
	}

	clText := rec.Header.Get("Content-Length")
	cl, err := strconv.ParseInt(strings.TrimSpace(clText), 10, 64)
	if err != nil || cl < 0 {
		return nil, fmt.Errorf("%w: missing or invalid Content-Length %q", ErrBadHeader, clText)
	}
	rec.BlockSize = cl
	return rec, nil
}

// readBlock reads the record's block of cl bytes: streamed through the spool when the
// reader streams (only the HTTP head stays in memory), skipped with a warning when over
// MaxBlockSize (an error for an HTTP record), else into rec.Block.
func (r *Reader) readBlock(rec *Record, cl int64, httpType bool) (*streamedBlock, error) {
	if r.size >= 0 && r.pos+cl > r.size {
		return nil, fmt.Errorf("%w: Content-Length is %d but the file ends %d bytes after the header",
			ErrTruncated, cl, r.size-r.pos)
	}
	var streamed *streamedBlock
	if r.Spool != nil {
		// Streamed: nothing of the block stays in memory but the HTTP head.
		if cl > r.MaxBlockSize && httpType {
			return nil, fmt.Errorf("%w: %s block of %d bytes is over the %d byte limit", ErrTooLarge, rec.Type, cl, r.MaxBlockSize)
		}
		var err error
		if streamed, err = r.streamBlock(rec, cl, httpType); err != nil {
			return nil, err
		}
	} else if cl > r.MaxBlockSize {
		if httpType {
			return nil, fmt.Errorf("%w: %s block of %d bytes is over the %d byte limit", ErrTooLarge, rec.Type, cl, r.MaxBlockSize)
		}
		n, err := io.CopyN(io.Discard, r.br, cl)
		r.pos += n
		if err != nil {
			return nil, blockReadErr(err, cl, n)
		}
		rec.Warnings = append(rec.Warnings, fmt.Sprintf("%s block of %d bytes not loaded (over the %d byte limit)", rec.Type, cl, r.MaxBlockSize))
	} else if r.size >= 0 || cl <= 8<<20 {
		// Exact allocation: a plain file's size was checked above, and a gzip stream's
		// claim is trusted up to 8 MiB.
		rec.Block = make([]byte, cl)
		n, err := io.ReadFull(r.br, rec.Block)
		r.pos += int64(n)
		if err != nil {
			return nil, blockReadErr(err, cl, int64(n))
		}
	} else {
		var buf bytes.Buffer
		buf.Grow(int(min(cl, 1<<20)))
		n, err := io.CopyN(&buf, r.br, cl)
		r.pos += n
		if err != nil {
			return nil, blockReadErr(err, cl, n)
		}
		rec.Block = buf.Bytes()
	}
	return streamed, nil
}

// readEnd reads the end marker, CRLF CRLF (WARC 1.1 section 5.1); a wrong Content-Length
// is corrected here unless Strict (resync.go), and the block cut or grown to match.
func (r *Reader) readEnd(rec *Record, start, cl int64, streamed *streamedBlock, httpType bool) (*streamedBlock, error) {
	var tail []byte
	switch {
	case streamed != nil:
		tail = streamed.tail
	case rec.Block != nil:
		tail = rec.Block[max(0, len(rec.Block)-ResyncWindow):]
	}
	var shortOK func(k int) bool
	if v := rec.Header.Get("WARC-Block-Digest"); v != "" && r.VerifyDigests {
		if d, err := ParseDigest(v); err == nil {
			switch {
			case streamed != nil:
				shortOK = func(k int) bool { return streamed.ends.matchesShort(d, k) }
			case rec.Block != nil:
				shortOK = func(k int) bool { return !d.Matches(rec.Block) && d.Matches(rec.Block[:len(rec.Block)-k]) }
			}
		}
	}
	fix, err := r.endRecord(rec, start, cl, tail, shortOK)
	if err != nil {
		return nil, err
	}
	if fix != nil {
		rec.BlockSize = fix.size
		switch {
		case streamed != nil:
			if streamed, err = r.restream(rec, streamed, cl, fix, httpType); err != nil {
				return nil, err
			}
		case rec.Block != nil && fix.cut > 0:
			rec.Block = rec.Block[:len(rec.Block)-fix.cut]
		case rec.Block != nil:
			rec.Block = append(rec.Block, fix.stray...)
		}
	}
	return streamed, nil
}

// locate sets the record's Offset and Length: in the file, or for a .warc.gz those of the
// gzip member holding exactly this record (-1 when members and records do not line up).
func (r *Reader) locate(rec *Record, start int64) {
	if r.gz == nil {
		rec.Offset, rec.Length = start, r.pos-start
		rec.where = "offset " + strconv.FormatInt(start, 10)
	} else {
		_, _ = r.br.Peek(1) // read on past the record, so the member table knows where its member ends
		if m, ok := r.gz.memberAt(start); ok && m.dStart == start && m.ended && m.dEnd == r.pos {
			rec.Offset, rec.Length = m.cOff, m.cEnd-m.cOff
		} else {
			r.warnOnce("shared-member", start, "gzip members do not hold one record each (whole-file gzip or records split across members): such records have offset -1")
		}
		rec.where = r.where(start)
	}

}

// readHTTP parses the HTTP message of a response, request or revisit block (or takes the
// streamed one), and checks the record's digests when VerifyDigests.
func (r *Reader) readHTTP(rec *Record, streamed *streamedBlock, httpType bool) {
	if streamed != nil {
		rec.HTTP, rec.Body = streamed.msg, streamed.body
		rec.Warnings = append(rec.Warnings, streamed.warnings...)
	}
	if httpType && rec.Block != nil {
		ct := strings.ToLower(rec.Header.Get("Content-Type"))
		u := strings.ToLower(rec.TargetURI)
		if strings.HasPrefix(ct, "application/http") || strings.HasPrefix(u, "http:") || strings.HasPrefix(u, "https:") {
			if len(rec.Block) > 0 || rec.Type != "revisit" {
				msg, warns, err := ParseHTTP(rec.Block, rec.Type == "request")
				if err != nil {
					rec.Warnings = append(rec.Warnings, "block is not an HTTP message: "+err.Error())
				} else {
					rec.HTTP = msg
					rec.Warnings = append(rec.Warnings, warns...)
				}
			}
		}
	}
	if r.VerifyDigests && rec.Block != nil {
		rec.Warnings = append(rec.Warnings, verifyDigests(rec)...)
	}
}

func blockReadErr(err error, want, got int64) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: Content-Length is %d but the file ends after %d bytes of the block", ErrTruncated, want, got)
	}
	return err
}

// verifyDigests checks the record's block and payload digests; it returns warnings.
func verifyDigests(rec *Record) []string {
	var warns []string
	if v := rec.Header.Get("WARC-Block-Digest"); v != "" {
		d, err := ParseDigest(v)
		if err != nil {
			warns = append(warns, fmt.Sprintf("unreadable WARC-Block-Digest %q: %v", v, err))
		} else if !d.Matches(rec.Block) {
			warns = append(warns, fmt.Sprintf("WARC-Block-Digest %s does not match the block", v))
		}
	}
	if v := rec.Header.Get("WARC-Payload-Digest"); v != "" && rec.Type != "revisit" {
		var payload []byte
		switch {
		case rec.HTTP != nil:
			payload = rec.HTTP.Body
		case rec.Type == "response" || rec.Type == "request":
			return warns // payload unknown: the block is not HTTP
		default:
			payload = rec.Block
		}
		d, err := ParseDigest(v)
		if err != nil {
			warns = append(warns, fmt.Sprintf("unreadable WARC-Payload-Digest %q: %v", v, err))
		} else if !d.Matches(payload) {
			// Some writers digest the de-chunked entity, others the bytes as stored.
			if dc, ok := Dechunk(payload); !ok || !d.Matches(dc) {
				warns = append(warns, fmt.Sprintf("WARC-Payload-Digest %s does not match the payload", v))
			}
		}
	}
	return warns
}

// CleanTargetURI removes the angle brackets of the WARC 1.0 draft syntax
// ("<http://example.com/>"), trims blanks, and percent-encodes literal spaces, as
// warcio does.
func CleanTargetURI(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '<' && s[len(s)-1] == '>' {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	return strings.ReplaceAll(s, " ", "%20")
}

// ParseWARCDate reads a WARC-Date (WARC 1.1 section 5.4: W3C ISO 8601, UTC, with optional
// fractional seconds). It also accepts a date without its "Z", a numeric offset without a
// colon ("2009-03-25T08:43:19-0800", as ClueWeb09's WARC/0.18 writes it), with or without
// fractional seconds, and the 14-digit timestamps of older tools. The result is in UTC.
func ParseWARCDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04:05.999999999-0700",
		"20060102150405", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("unreadable date %q", s)
}
