package recording

// This file checks a bundle or a published recording before it is trusted or shared
// (`pab audit`, and `pab import` of a bundle): it reports every problem it finds rather than
// stopping at the first, so a person can fix a recording in one pass.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/readlimit"
)

// Problem is one finding of Audit. File is the path of the file it concerns as the caller
// named it (inside a published recording: the recording's file, e.g. ".../entries.jsonl.gz").
// Where narrows it down: "entry e000012", "line 3", "offset 1234", or "" for the whole file.
type Problem struct {
	File  string
	Where string
	Msg   string
	// Unresolved marks the problem of a revisit whose original payload is not in the
	// recording: `pab audit` fails on it like on any problem, while `pab import`, which has
	// already warned about it, publishes the recording (the revisit replays as a miss).
	Unresolved bool
	// Kept marks the problem of a payload the import stored as recorded although a browser
	// would have removed its chunk framing (an RR-Payload-Note NoteChunkedKept): `pab
	// audit` fails on it, while `pab import`, which has warned about it, publishes the
	// recording.
	Kept bool
}

// Blocking returns the problems that are neither Unresolved revisits nor Kept payloads.
func Blocking(probs []Problem) []Problem {
	var out []Problem
	for _, p := range probs {
		if !p.Unresolved && !p.Kept {
			out = append(out, p)
		}
	}
	return out
}

// String formats the problem on one line: "FILE: WHERE: MSG" (or "FILE: MSG").
func (p Problem) String() string {
	if p.Where == "" {
		return p.File + ": " + p.Msg
	}
	return p.File + ": " + p.Where + ": " + p.Msg
}

// manifestFields are the manifest.json fields pab writes; legacyManifestFields are the
// fields seed 003 or an earlier pab defined that pab no longer uses (docs/bundle-format.md):
// every reader accepts and ignores them (manifestWithLegacy), the audit lets them pass, and
// pab recording migrate and the next import drop them. start_url was written by recorders
// before format 2. Every other field of seed 003's manifest is one of manifestFields.
var (
	manifestFields       = []string{"task_id", "captured_from", "captured_to", "not_found", "locale", "timezone", "format"}
	legacyManifestFields = []string{"start_url"}
)

// credentialHeaders may never be stored in a request record.
var credentialHeaders = []string{"Cookie", "Cookie2", "Authorization", "Proxy-Authorization"}

// auditNames are the file names shown in problems.
type auditNames struct {
	manifest, warc, entries, pages string
}

// Audit checks the bundle directory dir (docs/bundle-format.md) and returns every problem
// found, in file order; none means the bundle may be published. It checks:
//
//   - manifest.json: a JSON object of known fields only ("start_url" passes as legacy), RFC
//     3339 timestamps, and no "format" other than RecordingFormat;
//   - archive/data.warc, record by record from the start (WARC 1.1 section 4): a WARC header,
//     a Content-Length block and CRLF CRLF; a request record holding Cookie, Cookie2,
//     Authorization or Proxy-Authorization; a Set-Cookie value that is not REDACTED; an HTTP
//     header line that is not a "Name: value" field (older recorders joined repeated
//     fields with newlines); a WARC-Block-Digest or sha256 WARC-Payload-Digest that does not
//     match; a record no entry points at;
//   - indexes/entries.jsonl, line by line: strict JSON, unique ids, and each entry against
//     its records: span, WARC-Type, RR-Exchange-Id, WARC-Target-URI, status, method, payload
//     size and sha256 recomputed, request body, and revisitOf naming an earlier stored
//     payload with the same digest; an unresolved revisit is a problem too (marked
//     Problem.Unresolved);
//   - pages/pages.jsonl: strict JSON with a url and a known "fetched".
//
// Files that cannot be opened are problems too. Audit reads the manifest itself, so a
// bundle OpenBundle refuses is still audited in full.
func Audit(dir string) []Problem {
	names := auditNames{
		manifest: filepath.Join(dir, ManifestFile),
		warc:     filepath.Join(dir, WARCFile),
		entries:  filepath.Join(dir, EntriesFile),
		pages:    filepath.Join(dir, PagesFile),
	}
	var probs []Problem
	data, err := readAuditFile(dir, ManifestFile, MaxManifestBytes)
	if err != nil {
		probs = append(probs, Problem{File: names.manifest, Msg: err.Error()})
	} else {
		probs = append(probs, auditManifest(data, names.manifest, false)...)
	}
	return append(probs, auditContent(context.Background(), dir, names)...)
}

// AuditRecording checks the published recording in recordingDir (format 3, or format 2):
// its manifest must say "format": 3 or 2, and its files are unpacked into workDir (which
// must not exist or be empty; the caller removes it) and checked as Audit does. Problems
// name the recording's own files (entries.jsonl.gz for indexes/entries.jsonl, data.warc.gz
// or warc.tar.gz for archive/data.warc). For format 3, every entry's member fields must
// name the gzip member of its record: a member that starts at the part offset given, is as
// long as given, and inflates to exactly the record at respOffset (reqOffset); each such
// mismatch is one problem of the entry. A recording that cannot be unpacked (a truncated or
// corrupt gzip member; for format 2 a tar entry other than archive/data.warc, a link, a
// second entry; more bytes than DefaultUnpackLimits allow) is one problem.
func AuditRecording(recordingDir, workDir string) []Problem {
	return auditRecording(context.Background(), recordingDir, workDir)
}

// AuditRecordingContext is AuditRecording stopping once ctx is done (checked between gzip
// members and between entries): it then returns no problems and an error wrapping ctx's
// cause, and what it wrote in workDir is the caller's to remove. A progress.Meter in ctx
// (internal/progress) counts the members inflated and the compressed bytes read.
func AuditRecordingContext(ctx context.Context, recordingDir, workDir string) ([]Problem, error) {
	probs := auditRecording(ctx, recordingDir, workDir)
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("audit %s: %w", recordingDir, err)
	}
	return probs, nil
}

func auditRecording(ctx context.Context, recordingDir, workDir string) []Problem {
	files, err := RecordingFiles(recordingDir)
	if err != nil {
		return []Problem{{File: recordingDir, Msg: err.Error()}}
	}
	if len(files) == 0 {
		if f1, _ := format1Files(recordingDir); len(f1) > 0 {
			return []Problem{{File: f1[0], Msg: fmt.Sprintf("format 1 recording; this pab reads format %d (run pab recording migrate)", RecordingFormat)}}
		}
		return []Problem{{File: recordingDir, Msg: "no recording files"}}
	}
	names := auditNames{
		manifest: files[0],
		pages:    files[1],
		entries:  files[2],
		warc:     files[3] + " (" + WARCFile + ")",
	}
	data, err := readAuditFile(recordingDir, RecordingManifestFile, MaxManifestBytes)
	if err != nil {
		return []Problem{{File: names.manifest, Msg: err.Error()}}
	}
	probs := auditManifest(data, names.manifest, true)
	var probe struct {
		Format json.RawMessage `json:"format"`
	}
	if json.Unmarshal(data, &probe) != nil || (string(probe.Format) != strconv.Itoa(RecordingFormat) && string(probe.Format) != strconv.Itoa(RecordingFormat2)) {
		return probs // another format: its files are not read
	}
	format3 := string(probe.Format) == strconv.Itoa(RecordingFormat)
	if format3 != isDataFile(files[3]) {
		return append(probs, Problem{File: names.manifest, Msg: fmt.Sprintf("format %s, but the archive is %s", probe.Format, filepath.Base(files[3]))})
	}
	if format3 {
		names.warc = files[3] + " (" + WARCFile + ", inflated)"
	}
	limits, err := DefaultUnpackLimits()
	if err != nil {
		return append(probs, Problem{File: recordingDir, Msg: err.Error()})
	}
	budget, err := newUnpackBudget(recordingDir, files, limits)
	if err != nil {
		return append(probs, Problem{File: recordingDir, Msg: err.Error()})
	}
	if err := makeEmptyDir(workDir); err != nil {
		return append(probs, Problem{File: workDir, Msg: err.Error()})
	}
	for _, d := range []string{filepath.Dir(WARCFile), filepath.Dir(EntriesFile), filepath.Dir(PagesFile)} {
		if err := os.Mkdir(filepath.Join(workDir, d), 0o755); err != nil {
			return append(probs, Problem{File: workDir, Msg: err.Error()})
		}
	}
	if err := copyBounded(files[1], filepath.Join(workDir, PagesFile), MaxPagesBytes, false, budget); err != nil {
		return append(probs, Problem{File: names.pages, Msg: err.Error()})
	}
	var content []Problem
	contentDone := false
	if format3 {
		// data.warc is audited as it is inflated (auditContentStreamFrom), when it can be
		inStep := func(src io.Reader, ra io.ReaderAt) ([]Problem, bool) {
			if !auditInStep {
				return nil, false
			}
			root, err := os.OpenRoot(workDir)
			if err != nil {
				return nil, false
			}
			defer root.Close()
			ef, err := openBundleFile(root, workDir, EntriesFile)
			if err != nil {
				return nil, false
			}
			defer ef.Close()
			return auditContentStreamFrom(ctx, root, workDir, names, ef, src, -1, ra)
		}
		p, ok, c, done := auditFormat3Archive(ctx, files, workDir, names, budget, inStep)
		probs = append(probs, p...)
		if !ok {
			return probs
		}
		content, contentDone = c, done
	} else {
		if err := copyBounded(files[2], filepath.Join(workDir, EntriesFile), MaxEntriesBytes, true, budget); err != nil {
			return append(probs, Problem{File: names.entries, Msg: err.Error()})
		}
		if err := unpackWARC(files[3:], filepath.Join(workDir, WARCFile), MaxWARCBytes, budget); err != nil {
			return append(probs, Problem{File: files[3], Msg: err.Error()})
		}
	}
	if err := os.WriteFile(filepath.Join(workDir, ManifestFile), data, 0o644); err != nil {
		return append(probs, Problem{File: workDir, Msg: err.Error()})
	}
	if contentDone {
		return append(probs, content...)
	}
	return append(probs, auditContent(ctx, workDir, names)...)
}

// readAuditFile reads the regular file name inside dir (no symlink out of dir), at most max
// bytes.
func readAuditFile(dir, name string, max int64) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := openBundleFile(root, dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readlimit.All(f, max)
}

// auditManifest checks manifest.json's bytes. published: the manifest of a recording
// directory, which must carry "format": RecordingFormat.
func auditManifest(data []byte, path string, published bool) []Problem {
	var probs []Problem
	add := func(format string, args ...any) {
		probs = append(probs, Problem{File: path, Msg: fmt.Sprintf(format, args...)})
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			add("not JSON: at byte %d: %v", se.Offset, err)
		} else {
			add("not a JSON object")
		}
		return probs
	}
	keys := slices.Sorted(maps.Keys(raw))
	for _, k := range keys {
		if !slices.Contains(manifestFields, k) && !slices.Contains(legacyManifestFields, k) {
			add("unknown field %q", k)
		}
	}
	str := func(k string) (string, bool) {
		v, ok := raw[k]
		if !ok {
			return "", false
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			add("%s is not a string", k)
			return "", false
		}
		return s, true
	}
	for _, k := range []string{"task_id", "locale", "timezone", "start_url"} {
		str(k)
	}
	for _, k := range []string{"captured_from", "captured_to"} {
		if s, ok := str(k); ok && s != "" {
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				add("%s: %q is not an RFC 3339 time", k, s)
			}
		}
	}
	if v, ok := raw["not_found"]; ok {
		var nf map[string]string
		if err := json.Unmarshal(v, &nf); err != nil {
			add("not_found is not an object of strings")
		}
	}
	v, ok := raw["format"]
	switch {
	case !ok && published:
		add("no format (older than format %d); run pab recording migrate", RecordingFormat)
	case ok && !published && string(v) != strconv.Itoa(RecordingFormat):
		add("format %.20s in a bundle directory's manifest", v)
	case ok && string(v) != strconv.Itoa(RecordingFormat) && string(v) != strconv.Itoa(RecordingFormat2):
		add("format %.20s; the current format is %d", v, RecordingFormat)
	}
	return probs
}

// auditInStep lets auditContent audit in step (auditContentStream) when it can; the tests
// turn it off to compare with the audit that holds every record.
var auditInStep = true

// auditContent checks data.warc, entries.jsonl and pages.jsonl of the bundle in dir.
func auditContent(ctx context.Context, dir string, names auditNames) []Problem {
	if auditInStep {
		if probs, ok := auditContentStream(ctx, dir, names); ok {
			return probs
		}
	}
	var probs []Problem
	root, err := os.OpenRoot(dir)
	if err != nil {
		return []Problem{{File: dir, Msg: err.Error()}}
	}
	defer root.Close()

	var recs []*auditRec
	byOff := map[int64]*auditRec{}
	var warcSize int64 = -1
	if wf, err := openBundleFile(root, dir, WARCFile); err != nil {
		probs = append(probs, Problem{File: names.warc, Msg: openMsg(err)})
	} else {
		var scanProbs []Problem
		recs, warcSize, scanProbs = scanWARC(wf, names.warc)
		wf.Close()
		probs = append(probs, scanProbs...)
		for _, r := range recs {
			byOff[r.off] = r
		}
	}

	if ef, err := openBundleFile(root, dir, EntriesFile); err != nil {
		probs = append(probs, Problem{File: names.entries, Msg: openMsg(err)})
	} else {
		recordID := func(off, _ int64) string {
			if r := byOff[off]; r != nil {
				return r.recordID
			}
			return ""
		}
		probs = append(probs, auditEntries(ef, names, byOff, warcSize, recordID)...)
		ef.Close()
	}
	for _, r := range recs {
		if r.referencedFrom == "" && warcSize >= 0 {
			probs = append(probs, Problem{File: names.warc, Where: recWhere(r), Msg: fmt.Sprintf("%s record is in no entry of %s", r.typ, EntriesFile)})
		}
	}

	if pf, err := openBundleFile(root, dir, PagesFile); err != nil {
		probs = append(probs, Problem{File: names.pages, Msg: openMsg(err)})
	} else {
		probs = append(probs, auditPages(pf, names.pages)...)
		pf.Close()
	}
	return probs
}

// auditEntries checks indexes/entries.jsonl against the scanned records. warcSize is -1
// when data.warc could not be scanned to its end: records past the failure are unknown.
// recordID reads the WARC-Record-ID of the record at an offset, for messages.
func auditEntries(r io.Reader, names auditNames, byOff map[int64]*auditRec, warcSize int64, recordID func(off, n int64) string) []Problem {
	var probs []Problem
	a := newEntryAuditor(names, recordID)
	find := func(what string, off, length int64) (*auditRec, string) {
		return auditRecordAt(what, off, length, byOff, warcSize)
	}
	line, err := scanLines(r, MaxEntryLineBytes, func(line int, data []byte) error {
		a.line(line, data, find, func(p Problem) { probs = append(probs, p) })
		return nil
	})
	if err != nil {
		probs = append(probs, Problem{File: names.entries, Where: fmt.Sprintf("line %d", line), Msg: err.Error() + "; the rest of the file is not checked"})
	}
	return probs
}

// entryAuditor checks entries.jsonl one line at a time (auditEntries, and the audit in
// step with the records, auditContentStream). What it keeps of each entry, for the check of
// duplicate ids and of later revisits, is its id's 128-bit key in ids and one fixed-size
// row in seen (about 120 bytes an entry with the map's own, none of it pointers: a million
// entries cost the collector nothing to mark), not the entry.
type entryAuditor struct {
	names    auditNames
	ids      map[hkey]uint32   // entry id → its row in seen
	seen     []seenEntry       // one row per entry with an id, in the file's order
	odd      map[uint32]string // the digests of rows whose digest is not 64 lower-case hex digits
	recordID func(off, n int64) string
}

// seenEntry is what a revisit's checks need of an earlier entry.
type seenEntry struct {
	stored         bool
	hasRec         bool     // its response record was found
	oddDigest      bool     // the digest is in entryAuditor.odd, else digest holds it
	digest         [32]byte // the entry's digest, when it is 64 lower-case hex digits
	recKey         hkey     // that record's WARC-Record-ID
	recOff, recLen int64
}

func newEntryAuditor(names auditNames, recordID func(off, n int64) string) *entryAuditor {
	return &entryAuditor{names: names, ids: map[hkey]uint32{}, odd: map[uint32]string{}, recordID: recordID}
}

// digestOf renders the digest of row i as written.
func (a *entryAuditor) digestOf(i uint32) string {
	if a.seen[i].oddDigest {
		return a.odd[i]
	}
	return hex.EncodeToString(a.seen[i].digest[:])
}

// setDigest keeps d as the digest of row i, compactly.
func (a *entryAuditor) setDigest(i uint32, d string) {
	s := &a.seen[i]
	if b, err := hex.DecodeString(d); err == nil && len(b) == 32 && hex.EncodeToString(b) == d {
		copy(s.digest[:], b)
		return
	}
	s.oddDigest = true
	a.odd[i] = d
}

// digestIs reports whether row i's digest is d.
func (a *entryAuditor) digestIs(i uint32, d string) bool { return a.digestOf(i) == d }

// line checks one line of entries.jsonl; find gives the record an entry points at (or says
// why there is none); add takes each problem.
func (a *entryAuditor) line(line int, data []byte, find func(what string, off, length int64) (*auditRec, string), add0 func(Problem)) {
	names := a.names
	// the shape pab writes without reflection (the same value), anything else strictly
	e, err := new(Entry), error(nil)
	if !decodeEntryFast(data, e) {
		e, err = decodeStrictJSON[Entry](data)
	}
	if err != nil {
		add0(Problem{File: names.entries, Where: fmt.Sprintf("line %d", line), Msg: err.Error()})
		return
	}
	where := fmt.Sprintf("line %d", line)
	if e.ID != "" {
		where = "entry " + e.ID
	}
	add := func(file, format string, args ...any) {
		add0(Problem{File: file, Where: where, Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case e.ID == "":
		add(names.entries, "no id")
	case e.Method == "":
		add(names.entries, "no method")
	case e.URL == "":
		add(names.entries, "no url")
	case e.Status < 100 || e.Status > 999:
		add(names.entries, "status %d out of range", e.Status)
	}
	idKey := hkeyOf(e.ID)
	if e.ID != "" {
		if _, dup := a.ids[idKey]; dup {
			add(names.entries, "id used by an earlier line too")
		} else if len(a.seen) < math.MaxUint32 {
			i := uint32(len(a.seen))
			a.seen = append(a.seen, seenEntry{stored: e.RevisitOf == "" && !e.Unresolved})
			a.setDigest(i, e.Digest)
			a.ids[idKey] = i
		}
	}
	if e.Unresolved {
		add0(Problem{File: names.entries, Where: where, Unresolved: true,
			Msg: fmt.Sprintf("unresolved revisit of %.80q: its payload is not in the recording (a revisit whose original is missing, or a HAR response whose body was not captured), so replay answers it as a miss (import the capture that holds it into the same task)", e.URL)})
	}
	origKey := hkeyOf(e.RevisitOf)
	if e.RevisitOf != "" {
		orig, ok := a.ids[origKey]
		switch {
		case !ok || e.RevisitOf == e.ID:
			add(names.entries, "revisitOf %q names no earlier entry", e.RevisitOf)
		case !a.seen[orig].stored:
			add(names.entries, "revisitOf %q names a revisit, not a stored payload", e.RevisitOf)
		case !a.digestIs(orig, e.Digest):
			add(names.entries, "digest %s differs from that of its original %s (%s)", e.Digest, e.RevisitOf, a.digestOf(orig))
		}
	}
	if body, err := base64.StdEncoding.DecodeString(e.ReqBody); err != nil {
		add(names.entries, "reqBody is not base64: %v", err)
	} else {
		checkRequestRecord(e, body, find, names, add)
	}
	rec := checkResponseRecord(e, find, names, add)
	if i, ok := a.ids[idKey]; ok && e.ID != "" && !a.seen[i].hasRec && rec != nil {
		s := &a.seen[i]
		s.hasRec, s.recKey, s.recOff, s.recLen = true, hkeyOf(rec.recordID), rec.off, rec.length
	}
	if i, ok := a.ids[origKey]; ok && e.RevisitOf != "" && rec != nil && a.seen[i].hasRec && rec.typ == "revisit" &&
		rec.refersTo != "" && hkeyOf(rec.refersTo) != a.seen[i].recKey {
		orig := a.seen[i]
		add(names.entries, "the revisit record's WARC-Refers-To %s is not the record of %s (%s)", rec.refersTo, e.RevisitOf, a.recordID(orig.recOff, orig.recLen))
	}
}

// auditRecordAt finds the record an entry points at, or says why there is none.
func auditRecordAt(what string, off, length int64, byOff map[int64]*auditRec, warcSize int64) (*auditRec, string) {
	rec, ok := byOff[off]
	if !ok {
		if warcSize < 0 {
			return nil, "" // past a framing error already reported
		}
		return nil, fmt.Sprintf("%sOffset %d is not the start of a record", what, off)
	}
	if rec.length != length {
		return rec, fmt.Sprintf("%sLength %d, but the record at %d is %d bytes", what, length, off, rec.length)
	}
	return rec, ""
}

// checkResponseRecord checks the response (or revisit) record of e and returns it, or nil
// when there is none at respOffset.
func checkResponseRecord(e *Entry, find func(what string, off, length int64) (*auditRec, string), names auditNames, add func(string, string, ...any)) *auditRec {
	rec, msg := find("resp", e.RespOffset, e.RespLength)
	if msg != "" {
		add(names.entries, "%s", msg)
	}
	if rec == nil {
		return nil
	}
	rec.referencedFrom = e.ID
	want := "response"
	if e.RevisitOf != "" || e.Unresolved {
		want = "revisit"
	}
	if rec.typ != want {
		add(names.entries, "respOffset %d holds a %q record, want %q", e.RespOffset, rec.typ, want)
		return rec
	}
	checkCommon(e, rec, names, add)
	proto, rest, _ := strings.Cut(rec.firstLine, " ")
	code, _, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
	if !strings.HasPrefix(proto, "HTTP/") || code != strconv.Itoa(e.Status) {
		add(names.entries, "status %d, but the record's status line is %.60q", e.Status, rec.firstLine)
	}
	if want == "response" {
		if rec.payloadLen != e.Size {
			add(names.entries, "size %d, but the stored payload is %d bytes", e.Size, rec.payloadLen)
		}
		if rec.payloadSHA != e.Digest {
			add(names.entries, "digest %q, but the stored payload's sha256 is %s", e.Digest, rec.payloadSHA)
		}
	}
	return rec
}

func checkRequestRecord(e *Entry, body []byte, find func(what string, off, length int64) (*auditRec, string), names auditNames, add func(string, string, ...any)) {
	if e.ReqLength == 0 {
		return
	}
	rec, msg := find("req", e.ReqOffset, e.ReqLength)
	if msg != "" {
		add(names.entries, "%s", msg)
	}
	if rec == nil {
		return
	}
	if rec.referencedFrom == "" {
		rec.referencedFrom = e.ID
	}
	if rec.typ != "request" {
		add(names.entries, "reqOffset %d holds a %q record, want \"request\"", e.ReqOffset, rec.typ)
		return
	}
	checkCommon(e, rec, names, add)
	if method, _, _ := strings.Cut(rec.firstLine, " "); method != e.Method {
		add(names.entries, "method %s, but the request record's line is %.60q", e.Method, rec.firstLine)
	}
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != rec.payloadSHA {
		add(names.entries, "reqBody differs from the request record's body")
	}
}

// checkCommon compares what both records of an exchange carry with the entry.
func checkCommon(e *Entry, rec *auditRec, names auditNames, add func(string, string, ...any)) {
	if rec.exchID != e.ID {
		add(names.entries, "the %s record at offset %d has RR-Exchange-Id %q", rec.typ, rec.off, rec.exchID)
	}
	if rec.target != e.URL {
		add(names.entries, "url %.80q, but the %s record's WARC-Target-URI is %.80q", e.URL, rec.typ, rec.target)
	}
}

// auditPages checks pages/pages.jsonl line by line.
func auditPages(r io.Reader, path string) []Problem {
	var probs []Problem
	line, err := scanLines(r, MaxPageLineBytes, func(line int, data []byte) error {
		where := fmt.Sprintf("line %d", line)
		p, err := decodeStrictJSON[Page](data)
		switch {
		case err != nil:
			probs = append(probs, Problem{File: path, Where: where, Msg: err.Error()})
		case p.URL == "":
			probs = append(probs, Problem{File: path, Where: where, Msg: "no url"})
		case p.Fetched != "" && p.Fetched != "GET" && p.Fetched != "POST" && p.Fetched != "none":
			probs = append(probs, Problem{File: path, Where: where, Msg: fmt.Sprintf("fetched %q is not GET, POST or none", p.Fetched)})
		}
		return nil
	})
	if err != nil {
		probs = append(probs, Problem{File: path, Where: fmt.Sprintf("line %d", line), Msg: err.Error()})
	}
	return probs
}

// openMsg is an open error without the path, which the problem names already.
func openMsg(err error) string {
	if u := errors.Unwrap(err); u != nil {
		return "cannot open: " + u.Error()
	}
	return err.Error()
}

// auditFormat3Archive writes the entries (as they are, member fields included) and the
// inflated archive of a format 3 recording into workDir and checks the entries' member
// fields against the members found. A member that does not inflate (corrupt, truncated) is
// one problem naming its part file, its offset and the entries whose member it is; ok is
// false then, and whenever the files could not be read far enough for the bundle checks
// to follow.
//
// inStep, when not nil, audits data.warc's content while it is being inflated, reading it
// from src as it is written (ra reads what was written, for messages); its answer is
// returned as content with contentDone, when it ran to its end on an archive that
// inflated whole. Otherwise contentDone is false, and the caller audits the content of
// workDir once the archive is there.
func auditFormat3Archive(ctx context.Context, files []string, workDir string, names auditNames, budget *unpackBudget,
	inStep func(src io.Reader, ra io.ReaderAt) ([]Problem, bool)) (probs []Problem, ok bool, content []Problem, contentDone bool) {
	if err := copyBounded(files[2], filepath.Join(workDir, EntriesFile), MaxEntriesBytes, true, budget); err != nil {
		return []Problem{{File: names.entries, Msg: err.Error()}}, false, nil, false
	}
	// the entries are read a line at a time, here and below, never all held
	entriesPath := filepath.Join(workDir, EntriesFile)
	each := func(fn func(e *Entry) error) error {
		f, err := os.Open(entriesPath)
		if err != nil {
			return err
		}
		defer f.Close()
		return eachEntry(f, names.entries, MaxWARCBytes, func(_ int, e *Entry) error { return fn(e) })
	}
	// where the entries say members start: the members between are inflated in parallel
	starts := make([][]int64, len(files)-3)
	entriesErr := each(func(e *Entry) error {
		starts = addMemberStarts(starts, e)
		return nil
	})
	if errors.Is(entriesErr, os.ErrNotExist) {
		return []Problem{{File: names.entries, Msg: entriesErr.Error()}}, false, nil, false
	}
	var spans []memberSpan
	err := atomicfile.WriteNew(filepath.Join(workDir, WARCFile), 0o644, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 256<<10)
		var pw *io.PipeWriter
		stepDone := make(chan struct{})
		if inStep != nil && entriesErr == nil {
			var pr *io.PipeReader
			pr, pw = io.Pipe()
			// one buffer in front of both: the content audit is handed 256 KiB at a time
			// (not each member: goroutines that meet once a member of a few hundred bytes
			// spend more on meeting than on auditing), and every byte it has is in the copy
			// already, for its messages
			bw = bufio.NewWriterSize(io.MultiWriter(w, pw), 256<<10)
			ra, _ := w.(io.ReaderAt)
			if ra == nil {
				ra = noReaderAt{}
			}
			go func() {
				defer close(stepDone)
				content, contentDone = inStep(pr, ra)
				io.Copy(io.Discard, pr) // the rest, when it stopped early
			}()
		}
		var err error
		spans, err = inflateMembers(ctx, files[3:], bw, MaxWARCBytes, budget, starts...)
		starts = nil
		if err == nil {
			err = bw.Flush()
		}
		if pw != nil {
			pw.CloseWithError(err) // nil: the content audit reads to the end
			<-stepDone
		}
		return err
	})
	if err != nil {
		p := Problem{File: files[3], Msg: err.Error()}
		if me, isMember := errors.AsType[*memberError](err); isMember {
			p.File = files[3+me.part]
			var ids []string
			if entriesErr == nil {
				_ = each(func(e *Entry) error {
					if entryHolds(e, me.part, me.zoff) {
						ids = append(ids, e.ID)
					}
					return nil
				})
			}
			if len(ids) > 0 {
				p.Where = "entry " + strings.Join(ids, ", ")
			} else {
				p.Where = fmt.Sprintf("offset %d (no entry's member)", me.zoff)
			}
		}
		return []Problem{p}, false, nil, false
	}
	if entriesErr != nil {
		return nil, true, nil, false // auditEntries reports the line
	}
	var eprobs []entryProblem
	if err := each(func(e *Entry) error {
		eprobs = checkEntryMembers(eprobs, e, spans)
		return nil
	}); err != nil {
		return append(probs, Problem{File: names.entries, Msg: err.Error()}), false, nil, false
	}
	for _, p := range eprobs {
		probs = append(probs, Problem{File: names.entries, Where: "entry " + p.id, Msg: p.msg})
	}
	return probs, true, content, contentDone
}

// noReaderAt reads nothing: a record's id is then left out of a message.
type noReaderAt struct{}

func (noReaderAt) ReadAt([]byte, int64) (int, error) { return 0, errors.New("not readable") }
