package warc

// This file is the published layout format 3 (docs/bundle-format.md "Published layout"):
// the archive is data.warc.gz, one gzip member per WARC record (WARC 1.1 Annex D), split
// into data-000.warc.gz, data-001.warc.gz, ... at member boundaries when larger than
// PartSize, and every entry of entries.jsonl.gz names the member of each of its records
// (part, compressed offset and length). A recording of this format is opened for replay in
// place (OpenBundle on the recording directory): nothing is unpacked, a record is one
// pread of its member and one inflate.

import (
	"bufio"
	"bytes"
	"container/list"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// Names of the archive of a format 3 recording: RecordingDataFile alone, or its parts
// data-000.warc.gz, data-001.warc.gz, ... (RecordingDataPart), each a complete .warc.gz of
// whole records.
const (
	RecordingDataFile = "data.warc.gz"
)

// RecordingDataPart returns the file name of part n of a split format 3 archive,
// "data-NNN.warc.gz" with three digits.
func RecordingDataPart(n int) string { return fmt.Sprintf("data-%03d.warc.gz", n) }

var dataPartName = regexp.MustCompile(`^data-([0-9]{3})\.warc\.gz$`)

// Bounds of one gzip member of a format 3 archive.
const (
	// minMemberBytes is the smallest gzip member: a 10-byte header, an empty deflate
	// block and the 8-byte trailer.
	minMemberBytes = 18
	// maxMemberRatio bounds a member's inflated size against its compressed size: deflate
	// cannot expand more than 1032 to 1, so a claim above that is a lie.
	maxMemberRatio = 1032
	// smallMember is the largest record inflated whole and kept in the member cache;
	// larger ones are streamed through cursors. The proxy keeps payloads of up to 64 KiB
	// in memory itself (replay's headCache), so after the first request a hot small body
	// costs no inflate at all; a profile under load (docs/performance.md, "Start time")
	// found inflating below 1% of the CPU, so the cache stays small: it serves the reads
	// of one record's head and body that follow one another, not a working set.
	smallMember = 64 << 10
	// memberCacheBytes bounds the inflated small members kept (least recently used out).
	memberCacheBytes = 1 << 20
	// maxIdleCursors bounds the streaming inflaters kept between reads.
	maxIdleCursors = 16
)

// zmember is one gzip member of the archive: the record at [off, off+n) of the logical
// data.warc (the members inflated and concatenated), stored at [zoff, zoff+zn) of part.
type zmember struct {
	off, n    int64
	zoff, zn  int64
	part      int32
	entry     int32 // index of the entry naming it, for errors
	isRequest bool
}

// zarchive is the logical data.warc of a format 3 recording: an io.ReaderAt over the
// concatenation of its members' inflated bytes, reading only the members a read touches.
// Safe for concurrent use.
type zarchive struct {
	parts []*os.File
	names []string  // the parts' paths, for errors
	mems  []zmember // sorted by off, not overlapping
	size  int64     // end of the last member

	mu      sync.Mutex
	cache   map[int]*list.Element // member index -> element of lru (*cachedMember)
	lru     list.List
	cached  int64
	cursors []*zcursor // idle, positioned inside a member
	spare   []*gzip.Reader
}

type cachedMember struct {
	i    int
	data []byte
}

// zcursor is an inflater positioned at logical offset pos inside member i.
type zcursor struct {
	i   int
	pos int64
	zr  *gzip.Reader
	br  *bufio.Reader
}

// memberAt returns the index of the member holding logical offset off, or -1.
func (z *zarchive) memberAt(off int64) int {
	i := sort.Search(len(z.mems), func(i int) bool { return z.mems[i].off+z.mems[i].n > off })
	if i < len(z.mems) && z.mems[i].off <= off {
		return i
	}
	return -1
}

// where names member i in errors: the part file and the member's compressed offset.
func (z *zarchive) where(i int) string {
	m := &z.mems[i]
	return fmt.Sprintf("%s at offset %d", z.names[m.part], m.zoff)
}

// ReadAt reads len(p) bytes of the logical data.warc at off. Bytes outside every member
// (there are none in a recording pab wrote) are an error.
func (z *zarchive) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	n := 0
	for n < len(p) {
		if off >= z.size {
			return n, io.EOF
		}
		i := z.memberAt(off)
		if i < 0 {
			return n, fmt.Errorf("offset %d of %s is in no gzip member", off, WARCFile)
		}
		k, err := z.readMember(i, p[n:], off)
		n += k
		off += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// readMember reads from member i at logical offset off into p, at most to the member's end.
func (z *zarchive) readMember(i int, p []byte, off int64) (int, error) {
	m := &z.mems[i]
	want := min(int64(len(p)), m.off+m.n-off)
	if m.n <= smallMember {
		data, err := z.smallMember(i)
		if err != nil {
			return 0, err
		}
		return copy(p[:want], data[off-m.off:]), nil
	}
	c, err := z.cursor(i, off)
	if err != nil {
		return 0, err
	}
	if skip := off - c.pos; skip > 0 {
		if _, err := io.CopyN(io.Discard, c.zr, skip); err != nil {
			z.drop(c)
			return 0, z.inflateErr(i, err)
		}
		c.pos = off
	}
	k, err := io.ReadFull(c.zr, p[:want])
	c.pos += int64(k)
	if err != nil {
		z.drop(c)
		return k, z.inflateErr(i, err)
	}
	if c.pos == m.off+m.n-4 {
		// a payload read to its end stops before the record's closing CRLF CRLF: read it
		// and the gzip trailer now, so a member whose CRC-32 or size is wrong fails before
		// the payload's last bytes are handed out, not never (a miss, not a damaged body)
		var tail [4]byte
		n, err := io.ReadFull(c.zr, tail[:])
		c.pos += int64(n)
		if err != nil {
			z.drop(c)
			return 0, z.inflateErr(i, err)
		}
		if string(tail[:]) != "\r\n\r\n" {
			z.drop(c)
			return 0, fmt.Errorf("read %s: the record does not end with CRLF CRLF", z.where(i))
		}
	}
	if c.pos == m.off+m.n {
		err := z.finish(c)
		z.drop(c)
		if err != nil {
			return 0, err
		}
		return k, nil
	}
	z.park(c)
	return k, nil
}

// inflateErr is a read error of member i: a member that ends early is named as such.
func (z *zarchive) inflateErr(i int, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("read %s: gzip member inflates to fewer than the record's %d bytes", z.where(i), z.mems[i].n)
	}
	return fmt.Errorf("read %s: %w", z.where(i), err)
}

// finish checks that the member of cursor c, read to its record's end, ends there: the
// gzip trailer (CRC-32 and size) follows and nothing more.
func (z *zarchive) finish(c *zcursor) error {
	var one [1]byte
	n, err := c.zr.Read(one[:])
	for n == 0 && err == nil {
		n, err = c.zr.Read(one[:])
	}
	switch {
	case n > 0:
		return fmt.Errorf("read %s: gzip member inflates to more than the record's %d bytes", z.where(c.i), z.mems[c.i].n)
	case err != io.EOF:
		return fmt.Errorf("read %s: %w", z.where(c.i), err)
	}
	return nil
}

// openMember returns a gzip reader at the start of member i (from the spare list when it
// has one).
func (z *zarchive) openMember(i int) (*gzip.Reader, *bufio.Reader, error) {
	m := &z.mems[i]
	br := bufio.NewReaderSize(io.NewSectionReader(z.parts[m.part], m.zoff, m.zn), 32<<10)
	z.mu.Lock()
	var zr *gzip.Reader
	if k := len(z.spare); k > 0 {
		zr, z.spare = z.spare[k-1], z.spare[:k-1]
	}
	z.mu.Unlock()
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(br)
	} else {
		err = zr.Reset(br)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", z.where(i), err)
	}
	zr.Multistream(false)
	return zr, br, nil
}

// smallMember returns member i inflated whole, from the cache or read now (and kept).
func (z *zarchive) smallMember(i int) ([]byte, error) {
	z.mu.Lock()
	if el, ok := z.cache[i]; ok {
		z.lru.MoveToFront(el)
		data := el.Value.(*cachedMember).data
		z.mu.Unlock()
		return data, nil
	}
	z.mu.Unlock()
	m := &z.mems[i]
	zr, _, err := z.openMember(i)
	if err != nil {
		return nil, err
	}
	data := make([]byte, m.n)
	c := &zcursor{i: i, zr: zr}
	if _, err := io.ReadFull(zr, data); err != nil {
		z.drop(c)
		return nil, z.inflateErr(i, err)
	}
	err = z.finish(c)
	z.drop(c)
	if err != nil {
		return nil, err
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if _, ok := z.cache[i]; !ok {
		if z.cache == nil {
			z.cache = make(map[int]*list.Element)
		}
		z.cache[i] = z.lru.PushFront(&cachedMember{i: i, data: data})
		z.cached += m.n
		for z.cached > memberCacheBytes && z.lru.Len() > 1 {
			old := z.lru.Remove(z.lru.Back()).(*cachedMember)
			delete(z.cache, old.i)
			z.cached -= int64(len(old.data))
		}
	}
	return data, nil
}

// cursor returns an idle cursor inside member i at or before off (the furthest), or a new
// one at the member's start.
func (z *zarchive) cursor(i int, off int64) (*zcursor, error) {
	z.mu.Lock()
	best := -1
	for k, c := range z.cursors {
		if c.i == i && c.pos <= off && (best < 0 || c.pos > z.cursors[best].pos) {
			best = k
		}
	}
	if best >= 0 {
		c := z.cursors[best]
		z.cursors = slices.Delete(z.cursors, best, best+1)
		z.mu.Unlock()
		return c, nil
	}
	z.mu.Unlock()
	zr, br, err := z.openMember(i)
	if err != nil {
		return nil, err
	}
	return &zcursor{i: i, pos: z.mems[i].off, zr: zr, br: br}, nil
}

// park keeps c for a later read that continues where it stopped.
func (z *zarchive) park(c *zcursor) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if len(z.cursors) >= maxIdleCursors {
		old := z.cursors[0]
		z.cursors = z.cursors[1:]
		z.spare = append(z.spare, old.zr)
	}
	z.cursors = append(z.cursors, c)
}

// drop gives c's inflater back to the spare list.
func (z *zarchive) drop(c *zcursor) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if len(z.spare) < maxIdleCursors {
		z.spare = append(z.spare, c.zr)
	}
}

func (z *zarchive) Close() error {
	var first error
	for _, f := range z.parts {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// recordingDataFiles lists the archive files of a format 3 recording among the directory
// entries present (names): data.warc.gz alone, or data-000.warc.gz, ... in order. It
// returns nil when there are none.
func recordingDataFiles(dir string, whole bool, parts []int) ([]string, error) {
	switch {
	case whole && len(parts) > 0:
		return nil, fmt.Errorf("recording %s: has both %s and %s", dir, RecordingDataFile, RecordingDataPart(parts[0]))
	case whole:
		return []string{filepath.Join(dir, RecordingDataFile)}, nil
	case len(parts) == 0:
		return nil, nil
	}
	slices.Sort(parts)
	files := make([]string, 0, len(parts))
	for i, n := range parts {
		if n != i {
			return nil, fmt.Errorf("recording %s: part %s is missing", dir, RecordingDataPart(i))
		}
		files = append(files, filepath.Join(dir, RecordingDataPart(n)))
	}
	return files, nil
}

// openInPlace opens the format 3 recording b.Dir (whose Manifest is read) for replay in
// place: pages.jsonl, entries.jsonl.gz (inflated within MaxEntriesBytes) and the archive's
// parts, checking every entry's member against the part sizes and the recording against
// DefaultUnpackLimits (the records may add up to at most that many bytes). On error
// nothing stays open.
func openInPlace(root *os.Root, b *Bundle) (*Bundle, error) {
	dir := b.Dir
	files, err := RecordingFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(files) < 4 || !isDataFile(files[3]) {
		return nil, fmt.Errorf("open recording %s: format %d needs %s (or its parts)", dir, RecordingFormat, RecordingDataFile)
	}
	limits, err := DefaultUnpackLimits()
	if err != nil {
		return nil, fmt.Errorf("open recording %s: %w", dir, err)
	}
	budget, err := newUnpackBudget(dir, files, limits)
	if err != nil {
		return nil, fmt.Errorf("open recording %s: %w", dir, err)
	}
	z := &zarchive{}
	ok := false
	defer func() {
		if !ok {
			z.Close()
		}
	}()
	var sizes []int64
	for _, path := range files[3:] {
		f, err := openBundleFile(root, dir, filepath.Base(path))
		if err != nil {
			return nil, err
		}
		z.parts = append(z.parts, f)
		z.names = append(z.names, path)
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", path, err)
		}
		sizes = append(sizes, fi.Size())
	}

	entriesPath := filepath.Join(dir, RecordingEntriesFile)
	ef, err := openBundleFile(root, dir, RecordingEntriesFile)
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	cr := newCountReader(ef)
	zr, err := gzip.NewReader(cr.br)
	if err != nil {
		return nil, fmt.Errorf("read %s at offset %d: %w", entriesPath, cr.offset(), err)
	}
	lr := &io.LimitedReader{R: zr, N: MaxEntriesBytes + 1}
	// inflate on a second goroutine while this one parses the lines: a start spends most of
	// its time here (docs/performance.md, "Start time")
	pr, pw := io.Pipe()
	inflated := make(chan struct{})
	go func() {
		defer close(inflated)
		_, err := io.CopyBuffer(pw, lr, make([]byte, 128<<10))
		pw.CloseWithError(err) // nil: EOF for the reader
	}()
	b.Entries, b.byID, err = readEntriesIndexed(pr, entriesPath, MaxWARCBytes, entriesHint(ef))
	pr.CloseWithError(errors.New("entries read")) // stops the inflater if the parse ended early
	<-inflated
	if err != nil {
		return nil, err
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("%s expands to more than %d bytes", entriesPath, int64(MaxEntriesBytes))
	}
	if err := budget.add(MaxEntriesBytes + 1 - lr.N); err != nil {
		return nil, err
	}
	z.mems = make([]zmember, 0, 2*len(b.Entries))
	for i := range b.Entries {
		e := &b.Entries[i]
		if err := addMember(z, e, i, false, sizes, entriesPath); err != nil {
			return nil, err
		}
		if e.ReqLength > 0 || e.ReqGzLength != 0 {
			if err := addMember(z, e, i, true, sizes, entriesPath); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(z.mems, func(a, b zmember) int {
		switch {
		case a.off < b.off:
			return -1
		case a.off > b.off:
			return 1
		}
		return 0
	})
	for k := 1; k < len(z.mems); k++ {
		prev, m := &z.mems[k-1], &z.mems[k]
		if m.off < prev.off+prev.n {
			return nil, fmt.Errorf("read %s: entry %s: record at offset %d overlaps the record of entry %s at offset %d", entriesPath, b.Entries[m.entry].ID, m.off, b.Entries[prev.entry].ID, prev.off)
		}
		// the members lie in the parts in the order of their records, none inside another
		// (so no two entries share a member, and a part's bytes are read for one record)
		if m.part < prev.part || (m.part == prev.part && m.zoff < prev.zoff+prev.zn) {
			return nil, fmt.Errorf("read %s: entry %s: %s gzip member at part %d offset %d is not after the member of entry %s (part %d, offset %d, %d bytes), though its record follows that one", entriesPath, b.Entries[m.entry].ID, memberWhat(m.isRequest), m.part, m.zoff, b.Entries[prev.entry].ID, prev.part, prev.zoff, prev.zn)
		}
	}
	if n := len(z.mems); n > 0 {
		z.size = z.mems[n-1].off + z.mems[n-1].n
	}
	if err := budget.add(z.size); err != nil {
		return nil, err
	}

	pf, err := openBundleFile(root, dir, RecordingPagesFile)
	if err != nil {
		return nil, err
	}
	b.Pages, err = readPages(io.LimitReader(pf, MaxPagesBytes), filepath.Join(dir, RecordingPagesFile))
	pf.Close()
	if err != nil {
		return nil, err
	}
	b.warc, b.warcSize, b.z, b.closer = z, z.size, z, z
	ok = true
	return b, nil
}

// entriesHint estimates the number of lines of the gzip file f from the inflated size its
// trailer states (ISIZE, the size modulo 4 GiB; a guess only, never trusted, and capped at
// 64 times the file's size, so four hostile bytes cannot make it allocate): about 400
// bytes a line, a little less than pab's entries take (424 to 641 bytes on average in the
// shipped tasks and the bench recordings), so the entries are allocated once.
func entriesHint(f *os.File) int {
	fi, err := f.Stat()
	if err != nil || fi.Size() < minMemberBytes {
		return 0
	}
	var tail [4]byte
	if _, err := f.ReadAt(tail[:], fi.Size()-4); err != nil {
		return 0
	}
	isize := int64(uint32(tail[0]) | uint32(tail[1])<<8 | uint32(tail[2])<<16 | uint32(tail[3])<<24)
	// the trailer is the file's word, not a fact: never more than JSONL compresses to
	// (64 times the file, far above the 10 to 20 times entries reach)
	return int(min(isize, fi.Size()*64) / 400)
}

func isDataFile(path string) bool {
	base := filepath.Base(path)
	return base == RecordingDataFile || dataPartName.MatchString(base)
}

// addMember checks the member fields of e's response (or request) record against the parts'
// sizes and adds the member to z.
func addMember(z *zarchive, e *Entry, i int, req bool, sizes []int64, path string) error {
	what, off, n, part, zoff, zn := "resp", e.RespOffset, e.RespLength, e.RespPart, e.RespGzOffset, e.RespGzLength
	if req {
		what, off, n, part, zoff, zn = "req", e.ReqOffset, e.ReqLength, e.ReqPart, e.ReqGzOffset, e.ReqGzLength
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("read %s: entry %s: %s", path, e.ID, fmt.Sprintf(format, args...))
	}
	switch {
	case n <= 0:
		return fail("%sGzLength %d for a %sLength of %d", what, zn, what, n)
	case part < 0 || part >= len(sizes):
		return fail("%sPart %d: the recording has %d part(s)", what, part, len(sizes))
	case zn < minMemberBytes || zoff < 0 || zn > sizes[part] || zoff > sizes[part]-zn:
		return fail("%sGzOffset %d, %sGzLength %d: not a gzip member span of %s (%d bytes)", what, zoff, what, zn, filepath.Base(partPath(z, part)), sizes[part])
	case n/maxMemberRatio > zn:
		return fail("%sLength %d from a gzip member of %d bytes: more than deflate can expand; refused as a decompression bomb", what, n, zn)
	}
	z.mems = append(z.mems, zmember{off: off, n: n, zoff: zoff, zn: zn, part: int32(part), entry: int32(i), isRequest: req})
	return nil
}

func partPath(z *zarchive, part int) string { return z.names[part] }

// memberWhat names the record kind of a member in errors: "resp" or "req", as the entry
// fields are prefixed.
func memberWhat(isRequest bool) string {
	if isRequest {
		return "req"
	}
	return "resp"
}

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
	return createSynced(path, func(w io.Writer) error {
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return err
		}
		bw := bufio.NewWriterSize(zw, 64<<10)
		for i := range entries {
			if err := writeJSONLine(bw, &entries[i]); err != nil {
				return err
			}
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		return zw.Close()
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
func inflateMembers(parts []string, w io.Writer, max int64, u *unpackBudget) ([]memberSpan, error) {
	var spans []memberSpan
	var total int64
	zr := new(gzip.Reader)
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
		cr := newCountReader(f)
		for cr.offset() < fi.Size() {
			start := cr.offset()
			if err := zr.Reset(cr.br); err != nil {
				f.Close()
				return nil, &memberError{part: pi, zoff: start, err: fmt.Errorf("read %s at offset %d: %w", path, start, err)}
			}
			zr.Multistream(false)
			n, err := io.Copy(&budgetWriter{w: w, u: u}, io.LimitReader(zr, max-total+1))
			if le, ok := asLimitError(err); ok {
				f.Close()
				return nil, le
			}
			if err != nil {
				f.Close()
				return nil, &memberError{part: pi, zoff: start, err: fmt.Errorf("read %s: gzip member at offset %d: %w", path, start, err)}
			}
			total += n
			if total > max {
				f.Close()
				return nil, fmt.Errorf("read %s: the archive expands to more than %d bytes", path, max)
			}
			spans = append(spans, memberSpan{part: pi, zoff: start, zn: cr.offset() - start, off: total - n, n: n})
		}
		f.Close()
	}
	return spans, nil
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
		e := &entries[i]
		in := func(p int, off, n int64) bool { return p == part && n > 0 && off <= zoff && zoff < off+n }
		if in(e.RespPart, e.RespGzOffset, e.RespGzLength) || (e.ReqLength > 0 && in(e.ReqPart, e.ReqGzOffset, e.ReqGzLength)) {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// checkMemberFields compares the member fields of every entry with the members found by
// inflateMembers, and returns one message per mismatch (entry id first).
func checkMemberFields(entries []Entry, spans []memberSpan) []entryProblem {
	byOff := make(map[int64]*memberSpan, len(spans))
	for i := range spans {
		byOff[spans[i].off] = &spans[i]
	}
	var probs []entryProblem
	check := func(e *Entry, what string, off, n int64, part int, zoff, zn int64) {
		m := byOff[off]
		switch {
		case m == nil:
			probs = append(probs, entryProblem{e.ID, fmt.Sprintf("%sOffset %d: no gzip member starts there", what, off)})
		case m.n != n:
			probs = append(probs, entryProblem{e.ID, fmt.Sprintf("%sLength %d, but the gzip member at %sOffset %d inflates to %d bytes", what, n, what, off, m.n)})
		case m.part != part || m.zoff != zoff || m.zn != zn:
			probs = append(probs, entryProblem{e.ID, fmt.Sprintf("%sPart %d, %sGzOffset %d, %sGzLength %d, but the record's gzip member is part %d at offset %d, %d bytes", what, part, what, zoff, what, zn, m.part, m.zoff, m.zn)})
		}
	}
	for i := range entries {
		e := &entries[i]
		check(e, "resp", e.RespOffset, e.RespLength, e.RespPart, e.RespGzOffset, e.RespGzLength)
		if e.ReqLength > 0 {
			check(e, "req", e.ReqOffset, e.ReqLength, e.ReqPart, e.ReqGzOffset, e.ReqGzLength)
		} else if e.ReqGzLength != 0 || e.ReqGzOffset != 0 || e.ReqPart != 0 {
			probs = append(probs, entryProblem{e.ID, "reqGzOffset/reqGzLength/reqPart set for an entry without a request record"})
		}
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
	err = createSynced(filepath.Join(destDir, WARCFile), func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 256<<10)
		var err error
		spans, err = inflateMembers(files[3:], bw, MaxWARCBytes, u)
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
	return createSynced(filepath.Join(destDir, EntriesFile), func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 64<<10)
		for i := range entries {
			if err := writeJSONLine(bw, &entries[i]); err != nil {
				return err
			}
		}
		return bw.Flush()
	})
}

// formatName is "format N" for messages.
func formatName(n int) string { return "format " + strconv.Itoa(n) }

// InPlaceArchive reports whether path, the last file RecordingFiles lists, is the archive of
// a format 3 recording (data.warc.gz or a part data-NNN.warc.gz), which OpenBundle reads in
// place, rather than format 2's warc.tar.gz (or a part), which must be unpacked first.
func InPlaceArchive(path string) bool { return isDataFile(path) }

// PackFormat2 writes the bundle in bundleDir to recordingDir in the previous published
// layout, format 2 (warc.tar.gz, split into parts of partSize bytes), as Pack did before
// format 3. pab itself never writes format 2; this is for tests and tools that need such a
// recording (the format 2 readers: Unpack, AuditRecording, MigrateRecording).
func PackFormat2(bundleDir, recordingDir string, partSize int64) error {
	staged, err := packStaged(bundleDir, recordingDir, partSize, RecordingFormat2)
	if err != nil {
		return err
	}
	return Publish(staged, recordingDir)
}
