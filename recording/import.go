package recording

// import.go: turning WARC files written by any tool (wget, warcprox, Browsertrix, pywb,
// Webrecorder, Heritrix, node-warc) into a bundle through BundleWriter.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/httpx"
	"github.com/pab-dev/pab/internal/iobuf"
	"github.com/pab-dev/pab/warc"
)

// Bounds of an import (docs/import.md, "Limits and memory"). Bodies never stay in memory:
// they are streamed into a temporary spool file beside the output directory.
const (
	// DefaultMaxImportBytes bounds the spool of an import: the HTTP bodies of every input
	// file, as recorded and decoded, together (16 GiB of disk).
	DefaultMaxImportBytes int64 = 16 << 30
	// MaxImportBlockSize bounds the block of one response, request or revisit record of an
	// imported WARC (4 GiB).
	MaxImportBlockSize int64 = 4 << 30
	// MaxImportDecodedSize bounds one decoded response payload of an import (1 GiB): a body
	// that decodes to more is kept as recorded, with a warning.
	MaxImportDecodedSize int64 = 1 << 30
	// MaxImportZstdWindow bounds the window of a zstd-encoded body (32 MiB; RFC 9659 asks
	// HTTP senders for at most 8 MB), which is what decoding it holds in memory.
	MaxImportZstdWindow = 32 << 20
	// MaxRequestBodySize bounds one request body (32 MiB): request bodies are stored in
	// indexes/entries.jsonl in base64, whose lines are at most MaxEntryLineBytes.
	MaxRequestBodySize = 32 << 20
)

// ImportOptions configures ImportWARCs.
type ImportOptions struct {
	// TaskID goes to manifest.json task_id.
	TaskID string
	// Locale and Timezone go to the manifest when set.
	Locale   string
	Timezone string
	// Logf, when set, receives each warning as it is found (one line, no newline).
	Logf func(format string, args ...any)
	// MaxBytes bounds the bytes of the spool, the temporary file every HTTP body is
	// streamed into (as recorded, and decoded); 0 means DefaultMaxImportBytes.
	MaxBytes int64
	// Context, when set, stops the import between records once it is done (Ctrl-C): the
	// import then returns its error and leaves no output directory.
	Context context.Context
	// Progress, when set, is called every 1,024 records read and exchanges written, and at
	// the end of each file and of the writing, from the importing goroutine.
	Progress func(ImportProgress)
	// PackDir, when set, is an empty directory (NewStagingDir) into which the bundle is also
	// packed into format 3 as it is written, its members compressed by other goroutines
	// while the next exchanges are written: after a successful import it holds the data
	// parts and entries.jsonl.gz PackStaged would write for the bundle (the same bytes), and
	// FinishTeePack completes it. After an error what it holds is the caller's to remove.
	PackDir string
	// partSize is the part size of PackDir's pack: 0 means PartSize (tests make it small).
	partSize int64
}

// ImportProgress is how far ImportWARCs is.
type ImportProgress struct {
	// Phase is "read" (the input files are read, their bodies spooled) or "write" (the
	// exchanges are written to the bundle, in recording order).
	Phase string
	// File is the input being read (read phase); Files the number of inputs.
	File  string
	Files int
	// Records is the number of WARC records read so far, of every input.
	Records int
	// Read and Size are the bytes of the input files read so far and their total size, as
	// stored (compressed); -1 when unknown (a WACZ's members).
	Read, Size int64
	// Written and Total are the exchanges written so far and to write (write phase).
	Written, Total int
}

// ImportReport counts what an import read and wrote.
type ImportReport struct {
	// Files is the number of input files read.
	Files int `json:"files"`
	// Records is the number of WARC records read, of every type.
	Records int `json:"records"`
	// Exchanges is the number of exchanges written (entries.jsonl lines).
	Exchanges int `json:"exchanges"`
	// RevisitsResolved counts input revisit records whose original was found.
	RevisitsResolved int `json:"revisits_resolved"`
	// RevisitsUnresolved counts input revisit records kept without their original.
	RevisitsUnresolved int `json:"revisits_unresolved"`
	// Deduplicated counts exchanges written as revisits because an identical payload of
	// DedupMinSize bytes or more was already stored.
	Deduplicated int `json:"deduplicated"`
	// DecodeFailures counts response bodies kept as recorded because their
	// Content-Encoding could not be removed.
	DecodeFailures int `json:"decode_failures"`
	// Truncated counts chunked response bodies cut short, stored de-chunked and marked
	// WARC-Truncated (bundle-format.md, rule F3).
	Truncated int `json:"truncated,omitempty"`
	// FramingRepaired counts chunked response bodies de-chunked beyond RFC 9112's
	// grammar, as browsers read them (bare LF, late trailers, a body cut in its trailer;
	// rule F2); FramingKept counts those whose chunk framing breaks off, stored as
	// recorded with an RR-Payload-Note (rule F6).
	FramingRepaired int `json:"framing_repaired,omitempty"`
	FramingKept     int `json:"framing_kept,omitempty"`
	// LongerThanLength counts HTML payloads longer than their recorded Content-Length,
	// kept whole with an RR-Payload-Note (rule F1).
	LongerThanLength int `json:"longer_than_length,omitempty"`
	// Pages is the number of pages.jsonl lines.
	Pages int `json:"pages"`
	// Skipped counts records not turned into exchanges, by reason: a WARC-Type
	// ("warcinfo", "metadata", "resource", ...), "dns" (dns: lookups), "non-http"
	// (other non-HTTP targets or blocks), "unpaired-request" (a request record with no
	// response), "no-date" (a response with no WARC-Date, nor its request),
	// "header-too-large" (a URL too long for the bundle's WARC header, ErrHeaderTooLarge).
	Skipped map[string]int `json:"skipped"`
	// Warnings are one line each: "FILE at offset N: message". The same message about
	// several records of one file is one line, at the first record, ending "(the same in K
	// more records of FILE, the last at offset M)".
	Warnings []string `json:"warnings,omitempty"`
	// Title is the <title> of the first page, "" when it has none.
	Title string `json:"title,omitempty"`
}

// Summary returns the report as a few lines for a person: the counts, and how many
// warnings there were (the warnings themselves are in Warnings).
func (r *ImportReport) Summary() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d files, %d records: %d exchanges, %d pages\n", r.Files, r.Records, r.Exchanges, r.Pages)
	fmt.Fprintf(&sb, "revisits: %d resolved, %d without their original (replayed as misses); %d identical payloads stored once\n",
		r.RevisitsResolved, r.RevisitsUnresolved, r.Deduplicated)
	if r.DecodeFailures > 0 {
		fmt.Fprintf(&sb, "%d response bodies kept encoded (their Content-Encoding could not be removed)\n", r.DecodeFailures)
	}
	if r.Truncated > 0 {
		fmt.Fprintf(&sb, "%d chunked response bodies cut short, stored de-chunked and marked WARC-Truncated\n", r.Truncated)
	}
	if r.FramingRepaired > 0 {
		fmt.Fprintf(&sb, "%d chunked response bodies de-chunked as a browser reads them (bare LF, late trailers, cut in the trailer)\n", r.FramingRepaired)
	}
	if r.FramingKept > 0 {
		fmt.Fprintf(&sb, "%d response bodies whose chunk framing breaks off, stored as recorded (framing included) and noted\n", r.FramingKept)
	}
	if r.LongerThanLength > 0 {
		fmt.Fprintf(&sb, "%d HTML payloads longer than their recorded Content-Length, kept whole and noted\n", r.LongerThanLength)
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(&sb, "skipped records: %s\n", r.SkippedSummary())
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintf(&sb, "%d warnings\n", len(r.Warnings))
	}
	return sb.String()
}

// SkippedSummary returns Skipped as "3 metadata, 1 warcinfo", sorted by reason.
func (r *ImportReport) SkippedSummary() string {
	keys := slices.Sorted(maps.Keys(r.Skipped))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", r.Skipped[k], k)
	}
	return strings.Join(parts, ", ")
}

// inRec is an HTTP record of an import between reading and writing: its record parked in
// the spool (importpark.go), its date, and its links; about 80 bytes a record. The keys that
// pair requests with responses (recKeys) are kept beside it only while its file is read.
// rec is the record read back while its exchange is written, nil otherwise. inState, the
// exchange's state while it is written, is kept afterwards only by an original some
// revisit refers to.
type inRec struct {
	in   *inFile
	park warc.Span    // the record in the spool (parkRecord)
	sec  int64        // WARC-Date (a response without one: its request's), Unix seconds
	req  *inRec       // the paired request, for responses and revisits
	orig *inRec       // the original of a resolved revisit
	rec  *warc.Record // the record read back (load), nil while parked
	*inState
	idx    int32
	nsec   int32 // and nanoseconds; noDate: there is none
	typ    byte  // 'q' request, 'r' response, 'v' revisit
	nav    int8  // a request's navSignal: 0 "", 1 "yes", -1 "no"
	used   bool  // a request already paired
	isOrig bool  // some revisit's original: keeps its inState once written
	noDate bool
}

// inFile is an input file of an import, as its records name it.
type inFile struct {
	path  string
	index int32
}

// recKeys are the keys of one record that pairing needs: its WARC-Record-ID (without angle
// brackets), its WARC-Target-URI and its first WARC-Concurrent-To (moreConc: it has more).
type recKeys struct {
	id, uri, conc hkey
	moreConc      bool
}

// date is the record's WARC-Date, the zero time when it has none.
func (x *inRec) date() time.Time {
	if x.noDate {
		return time.Time{}
	}
	return time.Unix(x.sec, int64(x.nsec)).UTC()
}

// setDate sets the record's WARC-Date.
func (x *inRec) setDate(t time.Time) {
	x.noDate = t.IsZero()
	x.sec, x.nsec = t.Unix(), int32(t.Nanosecond())
}

// inState is what writing an exchange learns about its response record.
type inState struct {
	status int
	header http.Header // response header to write

	decodedDone bool
	decoded     warc.Span // the payload to store, in the spool (rec.body when nothing was removed)
	origEnc     string
	keptEnc     bool     // a Content-Encoding could not be removed: the payload is still encoded
	truncated   string   // the WARC-Truncated value to write ("" when the payload is whole)
	notes       []string // the RR-Payload-Note values to write (Exchange.PayloadNotes)
	title       string   // HTML title
	titleDone   bool
	exchangeID  string
}

// load reads x's record back from the spool (once; unload drops it again) and gives x an
// inState.
func (x *inRec) load(sp *warc.Spool) error {
	if x.inState == nil {
		x.inState = &inState{}
	}
	if x.rec != nil {
		return nil
	}
	rec, err := unparkRecord(sp, x.park)
	if err != nil {
		return fmt.Errorf("import %s: record %d: %w", x.in.path, x.idx, err)
	}
	rec.Date = x.date()
	x.rec = rec
	return nil
}

// unload drops x's record (and, unless x is an original, its inState).
func (x *inRec) unload() {
	x.rec = nil
	if !x.isOrig {
		x.inState = nil
	} else if x.inState != nil {
		x.header = nil
	}
}

func normID(s string) string { return strings.Trim(strings.TrimSpace(s), "<>") }

// ImportWARCs reads the WARC files at paths and writes their HTTP exchanges as a bundle
// at dir (see NewBundleWriter):
//
//   - A path ending in ".wacz" is a WACZ (WACZ 1.1.1): its archive/*.warc and
//     archive/*.warc.gz members are read in name order, streamed from the ZIP, as if given
//     in its place; each counts as one file in the report and is named
//     "FILE.wacz!archive/NAME" in messages. Its pages.jsonl and indexes are ignored (pages
//     are inferred as below). A WACZ that is not a ZIP, or holds unsafe member names or
//     links, is refused (see openWACZ).
//   - Each response is paired with its request: a WARC-Concurrent-To on either record,
//     else the nearest unpaired request record of the same file with the same target URI
//     (ties go to the earlier one). A response without a request is written as a GET.
//   - Response bodies are decoded (DecodePayload); a body that cannot be decoded is kept
//     as recorded, with a warning.
//   - A revisit record is resolved to its original response in any input file, by
//     WARC-Refers-To, else WARC-Refers-To-Target-URI with WARC-Refers-To-Date, else the
//     payload digest; it is written as a revisit of that exchange. A revisit whose original
//     is absent is kept (Entry.Unresolved), never dropped.
//   - dns: records, warcinfo, metadata, resource and other non-HTTP records are skipped and
//     counted.
//   - Exchanges are written in recording order: response WARC-Date, then input file
//     order, then record order.
//   - pages.jsonl lists the top-level documents, in recording order: GET (or POST)
//     exchanges with a 2xx (not 204 or 205) or 3xx text/html response whose request says
//     it is a navigation: Sec-Fetch-Dest "document", or, without Sec-Fetch-Dest, an Accept
//     naming text/html. When no request of the input says either (no request records, or
//     a tool such as wget that sends Accept */*), every such text/html GET response counts
//     as a page. The title is the HTML <title>.
//   - manifest not_found names, per host, the first recorded GET with a 404 text/html
//     response.
//
// Bodies are never held in memory: each is streamed into a spool, a temporary file beside
// dir that is removed on return (see MaxImportBlockSize and the other bounds). An HTTP
// head longer than MaxHTTPHeaderBytes, a request body longer than MaxRequestBodySize and a
// spool past opts.MaxBytes are errors. Any read error stops the import with one line
// naming the file and offset, and no output directory is left behind. An input with no HTTP
// response at all is refused.
func ImportWARCs(paths []string, dir string, opts ImportOptions) (*ImportReport, error) {
	rep := &ImportReport{Skipped: map[string]int{}}
	// the same warning about many records of one file is one line (Logf still sees each)
	defer func() { rep.Warnings = collapseWarnings(rep.Warnings) }()
	if len(paths) == 0 {
		return rep, errors.New("import: no WARC files given")
	}
	limit := opts.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxImportBytes
	}
	warn := func(s string) {
		rep.Warnings = append(rep.Warnings, s)
		if opts.Logf != nil {
			opts.Logf("%s", s)
		}
	}

	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o755); err != nil {
		return rep, fmt.Errorf("import: %w", err)
	}
	sp, err := warc.NewSpool(filepath.Dir(filepath.Clean(dir)), limit)
	if err != nil {
		return rep, err
	}
	defer sp.Close()
	inputs, closeInputs, err := importInputs(paths)
	defer closeInputs()
	if err != nil {
		return rep, err
	}
	var resps []*inRec
	var readProgress func(*warc.Reader)
	var size, done int64
	if opts.Progress != nil {
		for _, p := range paths {
			if fi, err := os.Stat(p); err == nil {
				size += fi.Size()
			}
		}
		if len(inputs) != len(paths) {
			size = -1 // a WACZ: its members' sizes are not the file's
		}
	}
	for fi, in := range inputs {
		if opts.Progress != nil {
			readProgress = func(rd *warc.Reader) {
				p := ImportProgress{Phase: "read", File: in.name, Files: len(inputs), Records: rep.Records, Read: -1, Size: size}
				if n, _ := rd.Progress(); n >= 0 && size >= 0 {
					p.Read = done + n
				}
				opts.Progress(p)
			}
		}
		got, err := readHTTPRecords(ctx, in, fi, rep, warn, sp, readProgress)
		if err != nil {
			return rep, err
		}
		resps = append(resps, got...)
		rep.Files++
		if st, err := os.Stat(in.name); err == nil {
			done += st.Size()
		}
	}
	if len(resps) == 0 {
		return rep, fmt.Errorf("import: no HTTP response records in %s (read %d records: %s)",
			strings.Join(paths, ", "), rep.Records, rep.SkippedSummary())
	}

	slices.SortStableFunc(resps, func(a, b *inRec) int {
		if c := a.date().Compare(b.date()); c != 0 {
			return c
		}
		if a.in.index != b.in.index {
			return int(a.in.index - b.in.index)
		}
		return int(a.idx - b.idx)
	})

	if err := resolveRevisits(resps, sp, warn); err != nil {
		return rep, err
	}
	m := Manifest{TaskID: opts.TaskID, Locale: opts.Locale, Timezone: opts.Timezone}
	var writeProgress func(done, total int)
	if opts.Progress != nil {
		writeProgress = func(done, total int) {
			opts.Progress(ImportProgress{Phase: "write", Files: len(inputs), Records: rep.Records, Read: size, Size: size, Written: done, Total: total})
		}
	}
	return rep, writeImport(ctx, dir, m, resps, rep, warn, sp, writeProgress, opts.PackDir, cmp.Or(opts.partSize, PartSize))
}

// importInputs lists the WARC streams of paths: each file as itself, each WACZ as its WARC
// members (openWACZ). The returned func closes the WACZ files opened so far; call it even
// on an error.
func importInputs(paths []string) ([]importInput, func(), error) {
	var inputs []importInput
	var closers []io.Closer
	closeAll := func() {
		for _, c := range closers {
			c.Close()
		}
	}
	for _, path := range paths {
		if !strings.HasSuffix(strings.ToLower(path), ".wacz") {
			p := path
			inputs = append(inputs, importInput{name: p, open: func() (*warc.Reader, error) { return warc.OpenReader(p) }})
			continue
		}
		zr, members, err := openWACZ(path)
		if err != nil {
			return nil, closeAll, err
		}
		closers = append(closers, zr)
		for _, m := range members {
			inputs = append(inputs, importInput{name: m.name, open: m.open})
		}
	}
	return inputs, closeAll, nil
}

// settleHead sets the status and header of the exchange of x, loaded (a resolved revisit
// takes its original's, which must be loaded too); an unresolved revisit without HTTP
// headers is kept as a 200 with a warning.
func settleHead(x *inRec, warn func(string)) {
	switch {
	case x.typ == 'v' && x.orig != nil && (x.rec.HTTP == nil || strings.Contains(x.rec.Get("WARC-Profile"), "server-not-modified")):
		x.status, x.header = x.orig.rec.HTTP.StatusCode, repairedHeader(x.orig.rec.HTTP, x.orig, warn)
	case x.rec.HTTP != nil:
		x.status, x.header = x.rec.HTTP.StatusCode, repairedHeader(x.rec.HTTP, x, warn)
	default:
		// An unresolved revisit without HTTP headers: nothing says what was answered.
		x.status, x.header = http.StatusOK, http.Header{}
		warn(fmt.Sprintf("%s at %s: revisit without HTTP headers and without its original; kept as an unresolved 200", x.in.path, x.rec.Where()))
	}
}

// addNotFound adds x, settled, to the manifest's not_found when it is the first recorded
// GET of its lower-case host with a 404 text/html response.
func addNotFound(nf map[string]string, x *inRec) {
	if x.status != http.StatusNotFound || methodOf(x) != http.MethodGet || httpx.MediaType(x.header.Get("Content-Type")) != "text/html" {
		return
	}
	u, err := url.Parse(x.rec.TargetURI)
	if err != nil || u.Host == "" {
		return
	}
	host := strings.ToLower(u.Host)
	if _, ok := nf[host]; !ok {
		nf[host] = x.rec.TargetURI
	}
}

// writeImport writes the exchanges of resps (in recording order) and their pages as a
// bundle at dir, counting them in rep; each record is read back from the spool for its
// exchange and dropped after it. The manifest's not_found is gathered on the way. On any
// error the partial bundle is removed (BundleWriter.Abort).
func writeImport(ctx context.Context, dir string, m Manifest, resps []*inRec, rep *ImportReport, warn func(string), sp *warc.Spool, progress func(done, total int), packDir string, partSize int64) error {
	signals := false
	for _, x := range resps {
		if x.req != nil && x.req.nav != 0 {
			signals = true
			break
		}
	}

	bw, err := NewBundleWriter(dir, m)
	if err != nil {
		return err
	}
	if packDir != "" {
		bw.packInto(ctx, packDir, partSize)
	}
	nf := map[string]string{}
	for k, x := range resps {
		if err := ctx.Err(); err != nil {
			bw.Abort()
			return fmt.Errorf("import: %w", err)
		}
		if progress != nil && k%1024 == 0 {
			progress(k, len(resps))
		}
		if err := writeOne(bw, x, nf, signals, rep, warn, sp); err != nil {
			bw.Abort()
			return err
		}
		resps[k] = nil // nothing refers to x any more unless it is an original
	}
	if progress != nil {
		progress(len(resps), len(resps))
	}
	if len(nf) > 0 {
		bw.m.NotFound = nf
	}
	for _, s := range bw.Warnings() {
		warn("write: " + s)
	}
	return bw.Close()
}

// writeOne writes the exchange of x, and its page when it is one: x, its request and its
// original are read back from the spool, and dropped again afterwards.
func writeOne(bw *BundleWriter, x *inRec, nf map[string]string, signals bool, rep *ImportReport, warn func(string), sp *warc.Spool) error {
	for _, y := range []*inRec{x, x.req, x.orig} {
		if y != nil {
			if err := y.load(sp); err != nil {
				return err
			}
		}
	}
	defer func() {
		for _, y := range []*inRec{x, x.req, x.orig} {
			if y != nil {
				y.unload()
			}
		}
	}()
	settleHead(x, warn)
	addNotFound(nf, x)
	ex, err := buildExchange(x, rep, warn, sp)
	if err != nil {
		return err
	}
	e, err := bw.Add(ex)
	if errors.Is(err, warc.ErrHeaderTooLarge) {
		// a URL of tens of kilobytes: no reader of the bundle would read the record back
		warn(fmt.Sprintf("%s at %s: %v; skipped", x.in.path, x.rec.Where(), err))
		rep.Skipped["header-too-large"]++
		return nil
	}
	if err != nil {
		return fmt.Errorf("import %s at %s: %w", x.in.path, x.rec.Where(), err)
	}
	x.exchangeID = e.ID
	rep.Exchanges++
	switch {
	case e.Unresolved:
	case e.RevisitOf != "" && x.typ != 'v':
		rep.Deduplicated++
	}
	p, ok, err := pageOf(x, e, signals, sp)
	if err != nil {
		return err
	}
	if ok {
		if err := bw.AddPage(p); err != nil {
			return err
		}
		rep.Pages++
		if rep.Title == "" && p.Note == "" {
			rep.Title = p.Title
		}
	}
	return nil
}

// importInput is one WARC stream of an import: a file, or a WARC member of a WACZ.
type importInput struct {
	name string // the file's path, or "FILE.wacz!archive/NAME.warc.gz"
	open func() (*warc.Reader, error)
}

// readHTTPRecords reads one file, its bodies streamed into sp and its HTTP records parked
// there, and returns its responses and revisits, paired with their requests.
func readHTTPRecords(ctx context.Context, in importInput, fi int, rep *ImportReport, warn func(string), sp *warc.Spool, progress func(rd *warc.Reader)) ([]*inRec, error) {
	path := in.name
	rd, err := in.open()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rd.Close() }()
	rd.InflateAhead() // inflating on one core, parsing and parking on the other
	rd.Spool = sp
	rd.MaxBlockSize = MaxImportBlockSize
	var reqs, resps []*inRec
	var reqKeys, respKeys []recKeys
	file := &inFile{path: path, index: int32(fi)}
	said := map[string]bool{} // record warnings given, so a file warning does not repeat one
	var trim framingTrim
	var parkBuf []byte // parkRecord's memory, one record's at a time
	for idx := 0; ; idx++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("import %s: %w", path, err)
		}
		if progress != nil && idx%1024 == 0 {
			progress(rd)
		}
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		rep.Records++
		for _, w := range rec.Warnings {
			said[w] = true
			warn(fmt.Sprintf("%s at %s: %s", path, rec.Where(), w))
		}
		target := strings.ToLower(rec.TargetURI)
		isHTTP := strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://")
		switch rec.Type {
		case "response", "revisit", "request":
		default:
			rep.Skipped[rec.Type]++
			continue
		}
		switch {
		case strings.HasPrefix(target, "dns:"):
			rep.Skipped["dns"]++
			continue
		case !isHTTP || (rec.HTTP == nil && rec.Type != "revisit"):
			rep.Skipped["non-http"]++
			if rec.HTTP == nil && isHTTP {
				warn(fmt.Sprintf("%s at %s: %s record without a readable HTTP message skipped", path, rec.Where(), rec.Type))
			}
			continue
		}
		if err := trim.apply(rec, sp); err != nil {
			return nil, fmt.Errorf("import %s at %s: %w", path, rec.Where(), err)
		}
		x := &inRec{in: file, idx: int32(idx)}
		x.setDate(rec.Date)
		k := recKeys{id: hkeyOf(normID(rec.ID)), uri: hkeyOf(rec.TargetURI)}
		if cs := rec.Header.Values("WARC-Concurrent-To"); len(cs) > 0 {
			k.conc, k.moreConc = hkeyOf(normID(cs[0])), len(cs) > 1
		}
		if x.park, parkBuf, err = parkRecord(sp, rec, parkBuf); err != nil {
			if errors.Is(err, warc.ErrSpoolFull) {
				return nil, fmt.Errorf("import %s at %s: the spool holds more than %d bytes", path, rec.Where(), sp.Limit)
			}
			return nil, fmt.Errorf("import %s at %s: %w", path, rec.Where(), err)
		}
		switch rec.Type {
		case "request":
			x.typ = 'q'
			switch navSignal(rec.HTTP.HTTPHeader()) {
			case "yes":
				x.nav = 1
			case "no":
				x.nav = -1
			}
			reqs, reqKeys = append(reqs, x), append(reqKeys, k)
		case "response":
			x.typ = 'r'
			resps, respKeys = append(resps, x), append(respKeys, k)
		default:
			x.typ = 'v'
			resps, respKeys = append(resps, x), append(respKeys, k)
		}
	}
	if progress != nil {
		progress(rd)
	}
	for _, w := range rd.Warnings() {
		if said[w.Msg] {
			continue // a record's warning already said it (a resynchronised record)
		}
		warn(fmt.Sprintf("%s at %s: %s", path, w.Where, w.Msg))
	}
	trim.warn(path, warn)
	if err := pairRequests(reqs, resps, reqKeys, respKeys, sp); err != nil {
		return nil, err
	}
	reqKeys, respKeys = nil, nil
	for _, q := range reqs {
		if !q.used {
			rep.Skipped["unpaired-request"]++
		}
	}
	// A response without WARC-Date takes its request's; without either it is skipped.
	dated := resps[:0]
	for _, x := range resps {
		if x.noDate && x.req != nil {
			x.setDate(x.req.date())
		}
		if x.noDate {
			if err := x.load(sp); err != nil {
				return nil, err
			}
			warn(fmt.Sprintf("%s at %s: %s record without WARC-Date skipped", path, x.rec.Where(), x.rec.Type))
			x.unload()
			rep.Skipped["no-date"]++
			continue
		}
		dated = append(dated, x)
	}
	clear(resps[len(dated):])
	return dated, nil
}

// maxFramingExcess bounds the CR/LF bytes rule F1 (bundle-format.md) trims from a payload.
const maxFramingExcess = 8

// framingTrim applies rule F1 (bundle-format.md, "Payload framing") to the responses of one
// file as they are read: a body not sent chunked whose length is its HTTP Content-Length
// plus at most maxFramingExcess bytes that are all CR or LF (node-warc counts the record's
// closing CRLF into the block) is cut to Content-Length. One warning per file (warn) names
// the first such record and the number of records.
type framingTrim struct {
	count  int
	first  string
	excess int64
}

// apply cuts rec's body when rule F1 says so.
func (t *framingTrim) apply(rec *warc.Record, sp *warc.Spool) error {
	if rec.Type != "response" || rec.HTTP == nil {
		return nil
	}
	h := rec.HTTP.HTTPHeader()
	if warc.HasToken(h.Values("Transfer-Encoding"), "chunked") {
		return nil
	}
	cl, ok := singleContentLength(h)
	if !ok || rec.Body.N <= cl || rec.Body.N-cl > maxFramingExcess {
		return nil
	}
	tail, err := sp.ReadPrefix(warc.Span{Off: rec.Body.Off + cl, N: rec.Body.N - cl}, maxFramingExcess)
	if err != nil {
		return err
	}
	if len(bytes.Trim(tail, "\r\n")) > 0 {
		return nil
	}
	if t.count == 0 {
		t.first, t.excess = rec.Where(), rec.Body.N-cl
	}
	t.count++
	rec.Body.N = cl
	return nil
}

// warn gives the file's one warning, when a body was cut.
func (t *framingTrim) warn(path string, warn func(string)) {
	if t.count > 0 {
		warn(fmt.Sprintf("%s at %s: %d response payloads (this one first) were longer than their HTTP Content-Length by CR/LF bytes only (%d here; the record's closing CRLF counted into the block); each was cut to its Content-Length",
			path, t.first, t.count, t.excess))
	}
}

// singleContentLength is the HTTP Content-Length of h when it has one, or several that
// agree, and it is a non-negative decimal number.
func singleContentLength(h http.Header) (int64, bool) {
	vs := h.Values("Content-Length")
	if len(vs) == 0 {
		return 0, false
	}
	var n int64 = -1
	for _, v := range vs {
		v = strings.TrimSpace(v)
		if v == "" || len(v) > 18 || strings.Trim(v, "0123456789") != "" {
			return 0, false
		}
		var m int64
		for _, c := range v {
			m = m*10 + int64(c-'0')
		}
		if n >= 0 && m != n {
			return 0, false
		}
		n = m
	}
	return n, true
}

// pairRequests links responses to requests of the same file: WARC-Concurrent-To from the
// response, then from the request, then the nearest unpaired request with the same target.
// Records are matched by their keys (reqKeys and respKeys, one per record of reqs and
// resps); the rare record with more than one WARC-Concurrent-To is read back from sp for
// the others.
func pairRequests(reqs, resps []*inRec, reqKeys, respKeys []recKeys, sp *warc.Spool) error {
	concs := func(x *inRec, k recKeys) ([]hkey, error) {
		if k.conc == (hkey{}) {
			return nil, nil
		}
		if !k.moreConc {
			return []hkey{k.conc}, nil
		}
		rec, err := unparkRecord(sp, x.park)
		if err != nil {
			return nil, fmt.Errorf("import %s: record %d: %w", x.in.path, x.idx, err)
		}
		var ks []hkey
		for _, id := range rec.Header.Values("WARC-Concurrent-To") {
			ks = append(ks, hkeyOf(normID(id)))
		}
		return ks, nil
	}
	link := func(r, q *inRec) { r.req, q.used = q, true }
	anyConc := false
	for _, k := range respKeys {
		anyConc = anyConc || k.conc != hkey{}
	}
	if anyConc {
		reqByID := map[hkey]*inRec{}
		for i, q := range reqs {
			if id := reqKeys[i].id; id != (hkey{}) {
				if _, dup := reqByID[id]; !dup {
					reqByID[id] = q
				}
			}
		}
		for i, r := range resps {
			ks, err := concs(r, respKeys[i])
			if err != nil {
				return err
			}
			for _, id := range ks {
				if q := reqByID[id]; q != nil && !q.used {
					link(r, q)
					break
				}
			}
		}
	}
	// the responses by id, for the requests' WARC-Concurrent-To
	anyConc = false
	for i, q := range reqs {
		anyConc = anyConc || (!q.used && reqKeys[i].conc != hkey{})
	}
	if anyConc {
		respByID := map[hkey]*inRec{}
		for i, r := range resps {
			if id := respKeys[i].id; id != (hkey{}) {
				if _, dup := respByID[id]; !dup {
					respByID[id] = r
				}
			}
		}
		for i, q := range reqs {
			if q.used {
				continue
			}
			ks, err := concs(q, reqKeys[i])
			if err != nil {
				return err
			}
			for _, id := range ks {
				if r := respByID[id]; r != nil && r.req == nil {
					link(r, q)
					break
				}
			}
		}
	}
	byURI := map[hkey][]*inRec{}
	for i, q := range reqs {
		if !q.used {
			byURI[reqKeys[i].uri] = append(byURI[reqKeys[i].uri], q)
		}
	}
	if len(byURI) == 0 {
		return nil
	}
	for i, r := range resps {
		if r.req != nil {
			continue
		}
		var best *inRec
		for _, q := range byURI[respKeys[i].uri] {
			if q.used {
				continue
			}
			d, bd := abs(int(q.idx-r.idx)), 0
			if best != nil {
				bd = abs(int(best.idx - r.idx))
			}
			if best == nil || d < bd || (d == bd && q.idx < best.idx) {
				best = q
			}
		}
		if best != nil {
			link(r, best)
		}
	}
	return nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// resolveRevisits finds the original response of every revisit record, across all
// files; resps is in recording order, so the first match in that order wins. What it
// keeps in memory grows with the revisits, not the records: the keys the revisits ask
// for, then the responses that match them. Records are read back from sp only when a
// revisit names its original by target URI and date, and bodies only when one has to be
// found by its payload digest.
func resolveRevisits(resps []*inRec, sp *warc.Spool, warn func(string)) error {
	type want struct {
		refID, uriDate hkey
		digest         string
	}
	wants := map[*inRec]want{}
	wantID, wantURIDate, wantDigest := map[hkey]*inRec{}, map[hkey]*inRec{}, map[string]*inRec{}
	for _, v := range resps {
		if v.typ != 'v' {
			continue
		}
		rec, err := unparkRecord(sp, v.park)
		if err != nil {
			return fmt.Errorf("import %s: record %d: %w", v.in.path, v.idx, err)
		}
		var w want
		if id := normID(rec.Get("WARC-Refers-To")); id != "" {
			w.refID = hkeyOf(id)
			wantID[w.refID] = nil
		}
		uri := warc.CleanTargetURI(rec.Get("WARC-Refers-To-Target-URI"))
		if t, err := warc.ParseWARCDate(rec.Get("WARC-Refers-To-Date")); uri != "" && err == nil {
			w.uriDate = hkeyOf(uri + " " + t.Format(time.RFC3339Nano))
			wantURIDate[w.uriDate] = nil
		}
		if d, err := warc.ParseDigest(rec.Get("WARC-Payload-Digest")); err == nil {
			w.digest = d.Key()
		}
		wants[v] = w
	}
	if len(wants) == 0 {
		return nil
	}
	first := func(m map[hkey]*inRec, k hkey, r *inRec) {
		if cur, ok := m[k]; ok && cur == nil {
			m[k] = r
		}
	}
	for _, r := range resps {
		if r.typ != 'r' || (len(wantID) == 0 && len(wantURIDate) == 0) {
			continue
		}
		rec, err := unparkRecord(sp, r.park)
		if err != nil {
			return fmt.Errorf("import %s: record %d: %w", r.in.path, r.idx, err)
		}
		first(wantID, hkeyOf(normID(rec.ID)), r)
		if len(wantURIDate) > 0 {
			first(wantURIDate, hkeyOf(rec.TargetURI+" "+r.date().Format(time.RFC3339Nano)), r)
		}
	}
	// the revisits found by neither: by payload digest
	for v, w := range wants {
		v.orig = wantID[w.refID]
		if v.orig == nil && w.uriDate != (hkey{}) {
			v.orig = wantURIDate[w.uriDate]
		}
		if v.orig == nil && w.digest != "" {
			wantDigest[w.digest] = nil
		}
	}
	if len(wantDigest) > 0 {
		if err := digestMatches(resps, sp, wantDigest); err != nil {
			return err
		}
	}
	for _, v := range resps {
		if v.typ != 'v' {
			continue
		}
		if w := wants[v]; v.orig == nil && w.digest != "" {
			v.orig = wantDigest[w.digest]
		}
		if v.orig == nil {
			rec, err := unparkRecord(sp, v.park)
			if err != nil {
				return fmt.Errorf("import %s: record %d: %w", v.in.path, v.idx, err)
			}
			warn(fmt.Sprintf("%s at %s: revisit of %s: original not in the input; kept as unresolved", v.in.path, rec.Where(), rec.TargetURI))
		} else {
			v.orig.isOrig = true
		}
	}
	return nil
}

// digestMatches sets want[k], for each payload digest key k of want (Digest.Key), to the
// first response of resps (in recording order) whose WARC-Payload-Digest, or the sha1 or
// sha256 of its body as stored or de-chunked, is k. Bodies are read from sp.
func digestMatches(resps []*inRec, sp *warc.Spool, want map[string]*inRec) error {
	add := func(k string, r *inRec) {
		if cur, ok := want[k]; ok && cur == nil {
			want[k] = r
		}
	}
	for _, r := range resps {
		if r.typ != 'r' {
			continue
		}
		rec, err := unparkRecord(sp, r.park)
		if err != nil {
			return fmt.Errorf("import %s: record %d: %w", r.in.path, r.idx, err)
		}
		if d, err := warc.ParseDigest(rec.Get("WARC-Payload-Digest")); err == nil {
			add(d.Key(), r)
		}
		// the body as stored and de-chunked, in one read of the spool
		s1, s2, d1, d2 := sha1.New(), sha256.New(), sha1.New(), sha256.New()
		dc := warc.NewChunkDecoder(io.MultiWriter(d1, d2))
		if _, err := iobuf.Copy(io.MultiWriter(s1, s2, dc), sp.Section(rec.Body)); err != nil {
			return fmt.Errorf("import %s at %s: read spool: %w", r.in.path, rec.Where(), err)
		}
		add("sha1:"+hex.EncodeToString(s1.Sum(nil)), r)
		add("sha256:"+hex.EncodeToString(s2.Sum(nil)), r)
		if dc.OK() {
			add("sha1:"+hex.EncodeToString(d1.Sum(nil)), r)
			add("sha256:"+hex.EncodeToString(d2.Sum(nil)), r)
		}
	}
	return nil
}
