package warc

// import.go: turning WARC files written by any tool (wget, warcprox, Browsertrix, pywb,
// Webrecorder, Heritrix, node-warc) into a bundle through BundleWriter.

import (
	"bytes"
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
	"github.com/pab-dev/pab/internal/progress"
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
	// Pages is the number of pages.jsonl lines.
	Pages int `json:"pages"`
	// Skipped counts records not turned into exchanges, by reason: a WARC-Type
	// ("warcinfo", "metadata", "resource", ...), "dns" (dns: lookups), "non-http"
	// (other non-HTTP targets or blocks), "unpaired-request" (a request record with no
	// response), "no-date" (a response with no WARC-Date, nor its request),
	// "header-too-large" (a URL too long for the bundle's WARC header, ErrHeaderTooLarge).
	Skipped map[string]int `json:"skipped"`
	// Warnings are one line each: "FILE at offset N: message".
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

// inRec is an HTTP record of an import: its headers in memory, its body in the spool
// (rec.body).
type inRec struct {
	file, idx int
	path      string
	rec       *Record
	req       *inRec // the paired request, for responses and revisits
	used      bool   // a request already paired
	orig      *inRec // the original of a resolved revisit

	status int
	header http.Header // response header to write

	decodedDone bool
	decoded     span // the payload to store, in the spool (rec.body when nothing was removed)
	origEnc     string
	keptEnc     bool   // a Content-Encoding could not be removed: the payload is still encoded
	truncated   string // the WARC-Truncated value to write ("" when the payload is whole)
	title       string // HTML title
	titleDone   bool
	exchangeID  string
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
	sp, err := newSpool(filepath.Dir(filepath.Clean(dir)), limit)
	if err != nil {
		return rep, err
	}
	defer sp.close()
	inputs, closeInputs, err := importInputs(paths)
	defer closeInputs()
	if err != nil {
		return rep, err
	}
	var resps []*inRec
	for fi, in := range inputs {
		got, err := readHTTPRecords(ctx, in, fi, rep, warn, sp)
		if err != nil {
			return rep, err
		}
		resps = append(resps, got...)
		rep.Files++
	}
	if len(resps) == 0 {
		return rep, fmt.Errorf("import: no HTTP response records in %s (read %d records: %s)",
			strings.Join(paths, ", "), rep.Records, rep.SkippedSummary())
	}

	slices.SortStableFunc(resps, func(a, b *inRec) int {
		if c := a.rec.Date.Compare(b.rec.Date); c != 0 {
			return c
		}
		if a.file != b.file {
			return a.file - b.file
		}
		return a.idx - b.idx
	})

	if err := resolveRevisits(resps, sp, warn); err != nil {
		return rep, err
	}
	kept := settleHeads(resps, warn)
	m := Manifest{TaskID: opts.TaskID, Locale: opts.Locale, Timezone: opts.Timezone, NotFound: notFoundPages(kept)}
	return rep, writeImport(ctx, dir, m, kept, rep, warn, sp)
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
			inputs = append(inputs, importInput{name: p, open: func() (*Reader, error) { return OpenReader(p) }})
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

// settleHeads sets the status and header of every exchange (a resolved revisit takes its
// original's), needed before writing for not_found; an unresolved revisit without HTTP
// headers is kept as a 200 with a warning.
func settleHeads(resps []*inRec, warn func(string)) []*inRec {
	var kept []*inRec
	for _, x := range resps {
		switch {
		case x.rec.Type == "revisit" && x.orig != nil && (x.rec.HTTP == nil || strings.Contains(x.rec.Get("WARC-Profile"), "server-not-modified")):
			x.status, x.header = x.orig.rec.HTTP.StatusCode, repairedHeader(x.orig.rec.HTTP, x.orig, warn)
		case x.rec.HTTP != nil:
			x.status, x.header = x.rec.HTTP.StatusCode, repairedHeader(x.rec.HTTP, x, warn)
		default:
			// An unresolved revisit without HTTP headers: nothing says what was answered.
			x.status, x.header = http.StatusOK, http.Header{}
			warn(fmt.Sprintf("%s at %s: revisit without HTTP headers and without its original; kept as an unresolved 200", x.path, x.rec.Where()))
		}
		kept = append(kept, x)
	}
	return kept
}

// notFoundPages is the manifest's not_found: per lower-case host, the first recorded GET
// with a 404 text/html response; nil when there is none.
func notFoundPages(kept []*inRec) map[string]string {
	var nf map[string]string
	for _, x := range kept {
		if x.status == http.StatusNotFound && methodOf(x) == http.MethodGet && httpx.MediaType(x.header.Get("Content-Type")) == "text/html" {
			u, err := url.Parse(x.rec.TargetURI)
			if err != nil || u.Host == "" {
				continue
			}
			host := strings.ToLower(u.Host)
			if nf == nil {
				nf = map[string]string{}
			}
			if _, ok := nf[host]; !ok {
				nf[host] = x.rec.TargetURI
			}
		}
	}
	return nf
}

// writeImport writes the kept exchanges and their pages as a bundle at dir, in order,
// counting them in rep; on any error the partial bundle is removed (BundleWriter.Abort).
func writeImport(ctx context.Context, dir string, m Manifest, kept []*inRec, rep *ImportReport, warn func(string), sp *spool) error {
	signals := false
	for _, x := range kept {
		if x.req != nil && navSignal(x.req.rec.HTTP.HTTPHeader()) != "" {
			signals = true
			break
		}
	}

	bw, err := NewBundleWriter(dir, m)
	if err != nil {
		return err
	}
	for _, x := range kept {
		if err := ctx.Err(); err != nil {
			bw.Abort()
			return fmt.Errorf("import: %w", err)
		}
		ex, err := buildExchange(x, rep, warn, sp)
		if err != nil {
			bw.Abort()
			return err
		}
		e, err := bw.Add(ex)
		if errors.Is(err, ErrHeaderTooLarge) {
			// a URL of tens of kilobytes: no reader of the bundle would read the record back
			warn(fmt.Sprintf("%s at %s: %v; skipped", x.path, x.rec.Where(), err))
			rep.Skipped["header-too-large"]++
			continue
		}
		if err != nil {
			bw.Abort()
			return fmt.Errorf("import %s at %s: %w", x.path, x.rec.Where(), err)
		}
		x.exchangeID = e.ID
		rep.Exchanges++
		switch {
		case e.Unresolved:
		case e.RevisitOf != "" && x.rec.Type != "revisit":
			rep.Deduplicated++
		}
		p, ok, err := pageOf(x, e, signals, sp)
		if err != nil {
			bw.Abort()
			return err
		}
		if ok {
			if err := bw.AddPage(p); err != nil {
				bw.Abort()
				return err
			}
			rep.Pages++
			if rep.Title == "" && p.Note == "" {
				rep.Title = p.Title
			}
		}
	}
	for _, s := range bw.Warnings() {
		warn("write: " + s)
	}
	return bw.Close()
}

// importInput is one WARC stream of an import: a file, or a WARC member of a WACZ.
type importInput struct {
	name string // the file's path, or "FILE.wacz!archive/NAME.warc.gz"
	open func() (*Reader, error)
}

// readHTTPRecords reads one file, its bodies streamed into sp, and returns its responses
// and revisits, paired with their requests.
func readHTTPRecords(ctx context.Context, in importInput, fi int, rep *ImportReport, warn func(string), sp *spool) ([]*inRec, error) {
	path := in.name
	rd, err := in.open()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rd.Close() }()
	rd.spool = sp
	rd.MaxBlockSize = MaxImportBlockSize
	var reqs, resps []*inRec
	said := map[string]bool{} // record warnings given, so a file warning does not repeat one
	for idx := 0; ; idx++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("import %s: %w", path, err)
		}
		rec, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		rep.Records++
		progress.FromContext(ctx).Record(rec.Offset + rec.Length) // pab import's progress line
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
		x := &inRec{file: fi, idx: idx, path: path, rec: rec}
		if rec.Type == "request" {
			reqs = append(reqs, x)
		} else {
			resps = append(resps, x)
		}
	}
	for _, w := range rd.Warnings() {
		if said[w.Msg] {
			continue // a record's warning already said it (a resynchronised record)
		}
		warn(fmt.Sprintf("%s at %s: %s", path, w.Where, w.Msg))
	}
	if err := trimFramingExcess(path, resps, sp, warn); err != nil {
		return nil, err
	}
	pairRequests(reqs, resps)
	for _, q := range reqs {
		if !q.used {
			rep.Skipped["unpaired-request"]++
		}
	}
	// A response without WARC-Date takes its request's; without either it is skipped.
	dated := resps[:0]
	for _, x := range resps {
		if x.rec.Date.IsZero() && x.req != nil {
			x.rec.Date = x.req.rec.Date
		}
		if x.rec.Date.IsZero() {
			warn(fmt.Sprintf("%s at %s: %s record without WARC-Date skipped", path, x.rec.Where(), x.rec.Type))
			rep.Skipped["no-date"]++
			continue
		}
		dated = append(dated, x)
	}
	return dated, nil
}

// maxFramingExcess bounds the CR/LF bytes rule F1 (bundle-format.md) trims from a payload.
const maxFramingExcess = 8

// trimFramingExcess applies rule F1 (bundle-format.md, "Payload framing") to the responses
// of one file: a body not sent chunked whose length is its HTTP Content-Length plus at most
// maxFramingExcess bytes that are all CR or LF (node-warc counts the record's closing CRLF
// into the block) is cut to Content-Length. One warning per file names the first such
// record and the number of records.
func trimFramingExcess(path string, resps []*inRec, sp *spool, warn func(string)) error {
	count, first, excess := 0, "", int64(0)
	for _, x := range resps {
		if x.rec.Type != "response" || x.rec.HTTP == nil {
			continue
		}
		h := x.rec.HTTP.HTTPHeader()
		if hasToken(h.Values("Transfer-Encoding"), "chunked") {
			continue
		}
		cl, ok := singleContentLength(h)
		if !ok || x.rec.body.n <= cl || x.rec.body.n-cl > maxFramingExcess {
			continue
		}
		tail, err := sp.readPrefix(span{off: x.rec.body.off + cl, n: x.rec.body.n - cl}, maxFramingExcess)
		if err != nil {
			return fmt.Errorf("import %s at %s: %w", path, x.rec.Where(), err)
		}
		if len(bytes.Trim(tail, "\r\n")) > 0 {
			continue
		}
		if count == 0 {
			first, excess = x.rec.Where(), x.rec.body.n-cl
		}
		count++
		x.rec.body.n = cl
	}
	if count > 0 {
		warn(fmt.Sprintf("%s at %s: %d response payloads (this one first) were longer than their HTTP Content-Length by CR/LF bytes only (%d here; the record's closing CRLF counted into the block); each was cut to its Content-Length",
			path, first, count, excess))
	}
	return nil
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
func pairRequests(reqs, resps []*inRec) {
	reqByID := map[string]*inRec{}
	for _, q := range reqs {
		if id := normID(q.rec.ID); id != "" {
			if _, dup := reqByID[id]; !dup {
				reqByID[id] = q
			}
		}
	}
	respByID := map[string]*inRec{}
	for _, r := range resps {
		if id := normID(r.rec.ID); id != "" {
			if _, dup := respByID[id]; !dup {
				respByID[id] = r
			}
		}
	}
	link := func(r, q *inRec) { r.req, q.used = q, true }
	for _, r := range resps {
		for _, id := range r.rec.Header.Values("WARC-Concurrent-To") {
			if q := reqByID[normID(id)]; q != nil && !q.used {
				link(r, q)
				break
			}
		}
	}
	for _, q := range reqs {
		if q.used {
			continue
		}
		for _, id := range q.rec.Header.Values("WARC-Concurrent-To") {
			if r := respByID[normID(id)]; r != nil && r.req == nil {
				link(r, q)
				break
			}
		}
	}
	byURI := map[string][]*inRec{}
	for _, q := range reqs {
		if !q.used {
			byURI[q.rec.TargetURI] = append(byURI[q.rec.TargetURI], q)
		}
	}
	for _, r := range resps {
		if r.req != nil {
			continue
		}
		var best *inRec
		for _, q := range byURI[r.rec.TargetURI] {
			if q.used {
				continue
			}
			d, bd := abs(q.idx-r.idx), 0
			if best != nil {
				bd = abs(best.idx - r.idx)
			}
			if best == nil || d < bd || (d == bd && q.idx < best.idx) {
				best = q
			}
		}
		if best != nil {
			link(r, best)
		}
	}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// resolveRevisits finds the original response of every revisit record, across all
// files; resps is in recording order, so the first match in that order wins. Bodies are
// read back from sp only when a revisit has to be found by its payload digest.
func resolveRevisits(resps []*inRec, sp *spool, warn func(string)) error {
	byID := map[string]*inRec{}
	byURIDate := map[string]*inRec{}
	var byDigest map[string]*inRec
	for _, r := range resps {
		if r.rec.Type != "response" {
			continue
		}
		if id := normID(r.rec.ID); id != "" {
			if _, ok := byID[id]; !ok {
				byID[id] = r
			}
		}
		k := r.rec.TargetURI + " " + r.rec.Date.UTC().Format(time.RFC3339Nano)
		if _, ok := byURIDate[k]; !ok {
			byURIDate[k] = r
		}
	}
	digestIndex := func() (map[string]*inRec, error) {
		idx := map[string]*inRec{}
		add := func(k string, r *inRec) {
			if _, ok := idx[k]; !ok {
				idx[k] = r
			}
		}
		for _, r := range resps {
			if r.rec.Type != "response" {
				continue
			}
			if d, err := ParseDigest(r.rec.Get("WARC-Payload-Digest")); err == nil {
				add(d.Key(), r)
			}
			// the body as stored and de-chunked, in one read of the spool
			s1, s2, d1, d2 := sha1.New(), sha256.New(), sha1.New(), sha256.New()
			dc := newChunkDecoder(io.MultiWriter(d1, d2))
			if _, err := io.Copy(io.MultiWriter(s1, s2, dc), sp.section(r.rec.body)); err != nil {
				return nil, fmt.Errorf("import %s at %s: read spool: %w", r.path, r.rec.Where(), err)
			}
			add("sha1:"+hex.EncodeToString(s1.Sum(nil)), r)
			add("sha256:"+hex.EncodeToString(s2.Sum(nil)), r)
			if dc.ok() {
				add("sha1:"+hex.EncodeToString(d1.Sum(nil)), r)
				add("sha256:"+hex.EncodeToString(d2.Sum(nil)), r)
			}
		}
		return idx, nil
	}
	for _, v := range resps {
		if v.rec.Type != "revisit" {
			continue
		}
		if id := normID(v.rec.Get("WARC-Refers-To")); id != "" {
			v.orig = byID[id]
		}
		if v.orig == nil {
			uri := CleanTargetURI(v.rec.Get("WARC-Refers-To-Target-URI"))
			if t, err := ParseWARCDate(v.rec.Get("WARC-Refers-To-Date")); uri != "" && err == nil {
				v.orig = byURIDate[uri+" "+t.Format(time.RFC3339Nano)]
			}
		}
		if v.orig == nil {
			if d, err := ParseDigest(v.rec.Get("WARC-Payload-Digest")); err == nil {
				if byDigest == nil {
					var err error
					if byDigest, err = digestIndex(); err != nil {
						return err
					}
				}
				v.orig = byDigest[d.Key()]
			}
		}
		if v.orig == nil {
			warn(fmt.Sprintf("%s at %s: revisit of %s: original not in the input; kept as unresolved", v.path, v.rec.Where(), v.rec.TargetURI))
		}
	}
	return nil
}
