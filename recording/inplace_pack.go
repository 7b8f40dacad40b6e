package recording

// This file writes and unpacks format 3 (packMembers, writeEntriesGz, unpackFormat3) and
// writes format 2 for tests and tools (PackFormat2).

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/klauspost/compress/gzip"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/iobuf"
	"github.com/pab-dev/pab/internal/progress"
)

// packMembers writes b's archive as gzip members, one per record, into dir: data.warc.gz,
// or data-000.warc.gz, ... when the members add up to more than partSize bytes (a part is
// cut only between members, so a part holds at least one member and is at most partSize
// bytes unless that one member is larger). Bytes between the records the entries name (none
// in a bundle pab wrote) become members of their own. It returns b's entries with their
// member fields set. Every member has the same fixed gzip header (no name, no time, OS
// unknown), so the output is deterministic.
func packMembers(b *Bundle, dir string, partSize int64) ([]Entry, error) {
	type span struct {
		off, n int64
		entry  int
		req    bool
	}
	spans := make([]span, 0, 2*len(b.Entries))
	for i := range b.Entries {
		e := &b.Entries[i]
		spans = append(spans, span{e.RespOffset, e.RespLength, i, false})
		if e.ReqLength > 0 {
			spans = append(spans, span{e.ReqOffset, e.ReqLength, i, true})
		}
	}
	slices.SortFunc(spans, func(a, b span) int {
		switch {
		case a.off < b.off:
			return -1
		case a.off > b.off:
			return 1
		}
		return 0
	})
	// the members to write: every record, and every gap between records
	var all []span
	var at int64
	for _, s := range spans {
		if s.off < at {
			return nil, fmt.Errorf("entry %s: record at offset %d overlaps the record before it", b.Entries[s.entry].ID, s.off)
		}
		if s.off > at {
			all = append(all, span{at, s.off - at, -1, false})
		}
		all = append(all, s)
		at = s.off + s.n
	}
	if at < b.warcSize {
		all = append(all, span{at, b.warcSize - at, -1, false})
	}

	entries := slices.Clone(b.Entries)
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	var (
		parts   []*os.File
		partOff int64
	)
	defer func() {
		for _, f := range parts {
			f.Close()
		}
	}()
	newPart := func() error {
		f, err := os.OpenFile(filepath.Join(dir, RecordingDataPart(len(parts))), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		parts = append(parts, f)
		partOff = 0
		return nil
	}
	src := io.NewSectionReader(b.warc, 0, b.warcSize)
	for _, s := range all {
		buf.Reset()
		zw.Reset(&buf)
		if _, err := io.Copy(zw, io.NewSectionReader(src, s.off, s.n)); err != nil {
			return nil, fmt.Errorf("read %s at offset %d: %w", WARCFile, s.off, err)
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		zn := int64(buf.Len())
		if len(parts) == 0 || (partOff > 0 && partOff+zn > partSize) {
			if len(parts) == maxParts {
				return nil, fmt.Errorf("archive needs more than %d parts of %d bytes", maxParts, partSize)
			}
			if err := newPart(); err != nil {
				return nil, err
			}
		}
		if _, err := parts[len(parts)-1].Write(buf.Bytes()); err != nil {
			return nil, err
		}
		if s.entry >= 0 {
			e := &entries[s.entry]
			if s.req {
				e.ReqPart, e.ReqGzOffset, e.ReqGzLength = len(parts)-1, partOff, zn
			} else {
				e.RespPart, e.RespGzOffset, e.RespGzLength = len(parts)-1, partOff, zn
			}
		}
		partOff += zn
	}
	if len(parts) == 0 { // an empty archive: one empty file
		if err := newPart(); err != nil {
			return nil, err
		}
	}
	for _, f := range parts {
		if err := f.Sync(); err != nil {
			return nil, err
		}
	}
	if len(parts) == 1 {
		return entries, os.Rename(filepath.Join(dir, RecordingDataPart(0)), filepath.Join(dir, RecordingDataFile))
	}
	return entries, nil
}

// writeEntriesGz writes entries as entries.jsonl.gz (one JSON line each, as the bundle
// writer writes them) to the new file path.
func writeEntriesGz(path string, entries []Entry) error {
	return atomicfile.WriteNew(path, 0o644, func(w io.Writer) error {
		return gzipTo(w, func(zw io.Writer) error {
			bw := bufio.NewWriterSize(zw, 64<<10)
			for i := range entries {
				if err := writeJSONLine(bw, &entries[i]); err != nil {
					return err
				}
			}
			return bw.Flush()
		})
	})
}

// memberSpan is one member found by scanning a part: its compressed span and the logical
// offset and length of what it inflates to.
type memberSpan struct {
	part     int
	zoff, zn int64
	off, n   int64
}

// inflateMembers reads the parts in order, member by member, writing what they inflate to
// into w (within the budget u), and returns every member found. Each part must be a
// sequence of whole gzip members; a truncated or corrupt member, or a member that inflates
// to more than max bytes in all, is an error naming the part and the member's offset.
//
// starts, when not nil, gives for each part the offsets where its members are expected to
// start (the entries' member fields): the members between them are then inflated by
// several goroutines at once (inflate_parallel.go). It is only a hint: a member that does
// not end exactly where the next expected one starts is read again from its start one
// member at a time, as without starts, so w receives the same bytes, the spans and errors
// are the same, whatever starts holds.
func inflateMembers(ctx context.Context, parts []string, w io.Writer, max int64, u *unpackBudget, starts ...[]int64) ([]memberSpan, error) {
	st := &memberInflater{w: w, u: u, max: max, meter: progress.FromContext(ctx), zr: new(gzip.Reader)}
	for pi, path := range parts {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		var hint []int64
		if pi < len(starts) {
			hint = starts[pi]
		}
		err = st.part(ctx, pi, path, f, fi.Size(), hint)
		f.Close()
		if err != nil {
			return nil, err
		}
		st.before += fi.Size()
	}
	return st.spans, nil
}

// memberInflater is the state of one inflateMembers: what was written so far and where.
type memberInflater struct {
	w      io.Writer
	u      *unpackBudget
	max    int64
	meter  *progress.Meter
	zr     *gzip.Reader
	spans  []memberSpan
	total  int64 // bytes inflated so far
	before int64 // the compressed bytes of the parts before this one
}

// sequential inflates the members of part pi (path, open as f, size bytes) from offset
// from to the part's end, one member at a time; one, when set, stops after the first
// member. It returns the offset where it stopped.
func (st *memberInflater) sequential(ctx context.Context, pi int, path string, f *os.File, from, size int64, one bool) (int64, error) {
	cr := newCountReader(io.NewSectionReader(f, from, size-from))
	for from+cr.offset() < size {
		if err := context.Cause(ctx); err != nil {
			return 0, err
		}
		start := from + cr.offset()
		if err := st.zr.Reset(cr.br); err != nil {
			return 0, &memberError{part: pi, zoff: start, err: fmt.Errorf("read %s at offset %d: %w", path, start, err)}
		}
		st.zr.Multistream(false)
		n, err := iobuf.Copy(&budgetWriter{w: st.w, u: st.u}, io.LimitReader(st.zr, st.max-st.total+1))
		if le, ok := asLimitError(err); ok {
			return 0, le
		}
		if err != nil {
			return 0, &memberError{part: pi, zoff: start, err: fmt.Errorf("read %s: gzip member at offset %d: %w", path, start, err)}
		}
		st.total += n
		if st.total > st.max {
			return 0, fmt.Errorf("read %s: the archive expands to more than %d bytes", path, st.max)
		}
		st.spans = append(st.spans, memberSpan{part: pi, zoff: start, zn: from + cr.offset() - start, off: st.total - n, n: n})
		st.meter.Record(st.before + from + cr.offset())
		if one {
			break
		}
	}
	return from + cr.offset(), nil
}

// memberError is an error of inflateMembers reading the gzip member that starts at zoff of
// part number part (its message names the part's path and the offset).
type memberError struct {
	part int
	zoff int64
	err  error
}

func (e *memberError) Error() string { return e.err.Error() }

func (e *memberError) Unwrap() error { return e.err }

// entriesAt returns the ids of the entries whose response or request member, as the entry
// fields give it, holds byte zoff of part: the entries a corrupt member found there belongs
// to (none when the fields name no member there).
func entriesAt(entries []Entry, part int, zoff int64) []string {
	var ids []string
	for i := range entries {
		if entryHolds(&entries[i], part, zoff) {
			ids = append(ids, entries[i].ID)
		}
	}
	return ids
}

// entryHolds reports whether e's response or request member, as its fields give it, holds
// byte zoff of part.
func entryHolds(e *Entry, part int, zoff int64) bool {
	in := func(p int, off, n int64) bool { return p == part && n > 0 && off <= zoff && zoff < off+n }
	return in(e.RespPart, e.RespGzOffset, e.RespGzLength) || (e.ReqLength > 0 && in(e.ReqPart, e.ReqGzOffset, e.ReqGzLength))
}

// checkMemberFields compares the member fields of every entry with the members found by
// inflateMembers, and returns one message per mismatch (entry id first).
func checkMemberFields(entries []Entry, spans []memberSpan) []entryProblem {
	var probs []entryProblem
	for i := range entries {
		probs = checkEntryMembers(probs, &entries[i], spans)
	}
	return probs
}

// memberAt is the member of spans (in logical order, as inflateMembers finds them) that
// starts at logical offset off (the last one, should empty members share it), or nil.
func memberAt(spans []memberSpan, off int64) *memberSpan {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].off > off }) - 1
	if i < 0 || spans[i].off != off {
		return nil
	}
	return &spans[i]
}

// checkEntryMembers appends to probs a message per mismatch between e's member fields and
// the members found (spans).
func checkEntryMembers(probs []entryProblem, e *Entry, spans []memberSpan) []entryProblem {
	check := func(what string, off, n int64, part int, zoff, zn int64) {
		m := memberAt(spans, off)
		switch {
		case m == nil:
			probs = append(probs, entryProblem{e.ID, fmt.Sprintf("%sOffset %d: no gzip member starts there", what, off)})
		case m.n != n:
			probs = append(probs, entryProblem{e.ID, fmt.Sprintf("%sLength %d, but the gzip member at %sOffset %d inflates to %d bytes", what, n, what, off, m.n)})
		case m.part != part || m.zoff != zoff || m.zn != zn:
			probs = append(probs, entryProblem{e.ID, fmt.Sprintf("%sPart %d, %sGzOffset %d, %sGzLength %d, but the record's gzip member is part %d at offset %d, %d bytes", what, part, what, zoff, what, zn, m.part, m.zoff, m.zn)})
		}
	}
	check("resp", e.RespOffset, e.RespLength, e.RespPart, e.RespGzOffset, e.RespGzLength)
	if e.ReqLength > 0 {
		check("req", e.ReqOffset, e.ReqLength, e.ReqPart, e.ReqGzOffset, e.ReqGzLength)
	} else if e.ReqGzLength != 0 || e.ReqGzOffset != 0 || e.ReqPart != 0 {
		probs = append(probs, entryProblem{e.ID, "reqGzOffset/reqGzLength/reqPart set for an entry without a request record"})
	}
	return probs
}

type entryProblem struct{ id, msg string }

// stripMemberFields returns entries without their member fields (a bundle directory's
// entries.jsonl never has them).
func stripMemberFields(entries []Entry) {
	for i := range entries {
		e := &entries[i]
		e.RespPart, e.RespGzOffset, e.RespGzLength = 0, 0, 0
		e.ReqPart, e.ReqGzOffset, e.ReqGzLength = 0, 0, 0
	}
}

// readEntriesGz reads entries.jsonl.gz (inflated within MaxEntriesBytes and the budget u)
// strictly, with the checks of OpenBundle (spans within MaxWARCBytes).
func readEntriesGz(path string, u *unpackBudget) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cr := newCountReader(f)
	zr, err := gzip.NewReader(cr.br)
	if err != nil {
		return nil, fmt.Errorf("read %s at offset %d: %w", path, cr.offset(), err)
	}
	lr := &io.LimitedReader{R: zr, N: MaxEntriesBytes + 1}
	entries, err := readEntries(lr, path, MaxWARCBytes)
	if err != nil {
		return nil, err
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("%s expands to more than %d bytes", path, int64(MaxEntriesBytes))
	}
	if _, err := io.Copy(io.Discard, zr); err != nil { // the checksum at the end
		return nil, fmt.Errorf("read %s at offset %d: %w", path, cr.offset(), err)
	}
	if err := u.add(MaxEntriesBytes + 1 - lr.N); err != nil {
		return nil, err
	}
	return entries, nil
}

// unpackFormat3 writes the bundle files of the format 3 recording whose files are files
// into destDir (its directories made): data.warc inflated member by member,
// entries.jsonl without member fields, pages.jsonl as is. Every entry's member fields must
// match the members found. Bounds: as Unpack.
func unpackFormat3(recordingDir string, files []string, destDir string, u *unpackBudget) error {
	entriesPath := files[2]
	entries, err := readEntriesGz(entriesPath, u)
	if err != nil {
		return err
	}
	var spans []memberSpan
	err = atomicfile.WriteNew(filepath.Join(destDir, WARCFile), 0o644, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 256<<10)
		var err error
		starts := make([][]int64, len(files)-3)
		for i := range entries {
			starts = addMemberStarts(starts, &entries[i])
		}
		spans, err = inflateMembers(context.Background(), files[3:], bw, MaxWARCBytes, u, starts...)
		if err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return err
	}
	if probs := checkMemberFields(entries, spans); len(probs) > 0 {
		return fmt.Errorf("read %s: entry %s: %s", entriesPath, probs[0].id, probs[0].msg)
	}
	stripMemberFields(entries)
	return atomicfile.WriteNew(filepath.Join(destDir, EntriesFile), 0o644, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 64<<10)
		for i := range entries {
			if err := writeJSONLine(bw, &entries[i]); err != nil {
				return err
			}
		}
		return bw.Flush()
	})
}

// PackFormat2 writes the bundle in bundleDir to recordingDir in the previous published
// layout, format 2 (warc.tar.gz, split into parts of partSize bytes), as Pack did before
// format 3. pab itself never writes format 2; this is for tests and tools that need such a
// recording (the format 2 readers: Unpack, AuditRecording, MigrateRecording).
func PackFormat2(bundleDir, recordingDir string, partSize int64) error {
	staged, err := packStaged(context.Background(), bundleDir, recordingDir, partSize, RecordingFormat2)
	if err != nil {
		return err
	}
	return Publish(staged, recordingDir)
}
