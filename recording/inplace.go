package recording

// This file is the published layout format 3 (docs/bundle-format.md "Published layout"):
// the archive is data.warc.gz, one gzip member per WARC record (WARC 1.1 Annex D), split
// into data-000.warc.gz, data-001.warc.gz, ... at member boundaries when larger than
// PartSize, and every entry of entries.jsonl.gz names the member of each of its records
// (part, compressed offset and length). A recording of this format is opened for replay in
// place (OpenBundle on the recording directory): nothing is unpacked, a record is one
// pread of its member and one inflate.

import (
	"bufio"
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
	"sync/atomic"

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
	// memberCacheBytes bounds the inflated small members and head prefixes kept (least
	// recently used out): enough for the records of the requests in flight, whose head and
	// body reads follow one another (the proxy keeps hot payloads itself).
	memberCacheBytes = 256 << 10
	// maxIdleCursors bounds the streaming inflaters kept between reads.
	maxIdleCursors = 16
	// maxSpare bounds the spare inflaters (about 80 KiB each with their read buffers) kept
	// for the next member opened.
	maxSpare = 4
	// headPrefix is how much of a streamed member is inflated once and kept in the member
	// cache: the WARC head and the HTTP head that a response's first reads ask for (4 KiB
	// each, readHeadLines) are served from it without an inflate of their own.
	headPrefix = 8 << 10
	// memberBufSize is the read buffer of an inflater over a member's compressed bytes.
	memberBufSize = 32 << 10
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
	names []string    // the parts' paths, for errors
	mems  []zmember   // sorted by off, not overlapping; nil when tab is set
	size  int64       // end of the last member
	tab   *entryTable // the members of a bundle opened with OpenBundleTable, else nil
	sizes []int64     // the parts' sizes, in bytes

	mu      sync.Mutex
	cache   map[int]*list.Element // member index -> element of lru (*cachedMember)
	lru     list.List
	cached  int64
	cursors []*zcursor // idle, positioned inside a member
	spare   []inflater // idle, at no member

	opens atomic.Int64 // members opened (inflated from their start), for the tests
}

// cachedMember is a member's inflated bytes in the cache: all of a small member, the first
// headPrefix bytes of a streamed one.
type cachedMember struct {
	i    int
	data []byte
}

// inflater is a gzip reader with the buffered reader it reads a member's compressed bytes
// through; both are reset for the next member.
type inflater struct {
	zr *gzip.Reader
	br *bufio.Reader
}

// zcursor is an inflater positioned at logical offset pos inside member i.
type zcursor struct {
	i   int
	pos int64
	inflater
}

// mem returns member i: from mems, or decoded from the entry table (tab) of a bundle
// opened with OpenBundleTable, where a member that does not lie inside its part comes back
// with no compressed bytes (its read then fails, naming it).
func (z *zarchive) mem(i int) zmember {
	if z.tab != nil {
		return z.tab.member(i, z.sizes)
	}
	return z.mems[i]
}

// memberAt returns the index of the member holding logical offset off, or -1.
func (z *zarchive) memberAt(off int64) int {
	if z.tab != nil {
		return z.tab.memberAt(off)
	}
	i := sort.Search(len(z.mems), func(i int) bool { return z.mems[i].off+z.mems[i].n > off })
	if i < len(z.mems) && z.mems[i].off <= off {
		return i
	}
	return -1
}

// where names member i in errors: the part file and the member's compressed offset.
func (z *zarchive) where(i int) string {
	m := z.mem(i)
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
	m := z.mem(i)
	want := min(int64(len(p)), m.off+m.n-off)
	if m.n <= smallMember {
		data, err := z.smallMember(i)
		if err != nil {
			return 0, err
		}
		return copy(p[:want], data[off-m.off:]), nil
	}
	if off < m.off+min(headPrefix, m.n) {
		head, err := z.prefix(i)
		if err != nil {
			return 0, err
		}
		return copy(p[:want], head[off-m.off:]), nil
	}
	c, err := z.cursor(i, off)
	if err != nil {
		return 0, err
	}
	k, done, err := z.readCursor(c, p[:want], off)
	if err == nil && !done {
		z.park(c)
	}
	return k, err
}

// readCursor reads len(p) bytes (at most to the member's end) of cursor c's member at
// logical offset off, at or after c's position. done reports that c reached the member's
// end, or failed: then c's inflater is given back (drop) and c must not be used again.
func (z *zarchive) readCursor(c *zcursor, p []byte, off int64) (k int, done bool, err error) {
	i := c.i
	m := z.mem(i)
	if skip := off - c.pos; skip > 0 {
		if _, err := io.CopyN(io.Discard, c.zr, skip); err != nil {
			z.drop(c)
			return 0, true, z.inflateErr(i, err)
		}
		c.pos = off
	}
	k, err = io.ReadFull(c.zr, p)
	c.pos += int64(k)
	if err != nil {
		z.drop(c)
		return k, true, z.inflateErr(i, err)
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
			return 0, true, z.inflateErr(i, err)
		}
		if string(tail[:]) != "\r\n\r\n" {
			z.drop(c)
			return 0, true, fmt.Errorf("read %s: the record does not end with CRLF CRLF", z.where(i))
		}
	}
	if c.pos == m.off+m.n {
		err := z.finish(c)
		z.drop(c)
		if err != nil {
			return 0, true, err
		}
		return k, true, nil
	}
	return k, false, nil
}

// StreamSection returns a reader of the n bytes of ra from off, for a payload read once
// from its start to its end; ra is the archive a Response.Body reads (the Outer of its
// *io.SectionReader). Over the archive of a format 3 recording read in place, the reader
// owns the inflater of the streamed member it is in: reads that continue one another never
// go through the archive's shared list of parked inflaters, which enough concurrent streams
// would evict (each then inflating its member again from the start), and the inflater is
// given back at the member's end or on an error. Any other ra gives
// io.NewSectionReader(ra, off, n). The reader is not safe for concurrent use; its errors
// are those of a read of Response.Body (the part file and the member's offset).
func StreamSection(ra io.ReaderAt, off, n int64) io.Reader {
	z, ok := ra.(*zarchive)
	if !ok || off < 0 || n < 0 || off > z.size-n {
		return io.NewSectionReader(ra, off, n)
	}
	return &zstream{z: z, off: off, end: off + n}
}

// zstream is StreamSection's reader over a format 3 archive: the logical bytes [off, end),
// read through c, the cursor it owns, inside streamed members.
type zstream struct {
	z        *zarchive
	off, end int64
	c        *zcursor // nil, or owned: not in the archive's lists
}

func (s *zstream) Read(p []byte) (int, error) {
	if s.off >= s.end {
		return 0, io.EOF
	}
	if rest := s.end - s.off; int64(len(p)) > rest {
		p = p[:rest]
	}
	if len(p) == 0 {
		return 0, nil
	}
	z := s.z
	if s.c == nil || s.c.pos != s.off {
		i := z.memberAt(s.off)
		if i < 0 {
			return 0, fmt.Errorf("offset %d of %s is in no gzip member", s.off, WARCFile)
		}
		m := z.mem(i)
		if m.n <= smallMember {
			k, err := z.readMember(i, p, s.off) // from the member cache
			s.off += int64(k)
			return k, err
		}
		if s.off < m.off+headPrefix {
			if head := z.cachedData(i); head != nil && s.off < m.off+int64(len(head)) {
				k := copy(p, head[s.off-m.off:])
				s.off += int64(k)
				return k, nil
			}
			// the head prefix was let go: this stream's own cursor reads from here
		}
		if s.c == nil || s.c.i != i || s.c.pos > s.off {
			if s.c != nil {
				z.drop(s.c)
			}
			c, err := z.cursor(i, s.off)
			if err != nil {
				s.c = nil
				return 0, err
			}
			s.c = c
		}
	}
	m := z.mem(s.c.i)
	want := min(int64(len(p)), m.off+m.n-s.off)
	k, done, err := z.readCursor(s.c, p[:want], s.off)
	if done {
		s.c = nil
	}
	s.off += int64(k)
	return k, err
}

// place names byte off of b's archive in errors: "DIR/archive/data.warc at offset OFF"
// for an unpacked bundle; for a format 3 recording read in place, the part file, the
// compressed offset of the gzip member holding the byte, and the byte's offset in what the
// members inflate to ("DIR/data-001.warc.gz, gzip member at offset Z, byte OFF of the
// records").
func (b *Bundle) place(off int64) string {
	if b.z != nil {
		if i := b.z.memberAt(off); i >= 0 {
			return fmt.Sprintf("%s, gzip member at offset %d, byte %d of the records", b.z.names[b.z.mem(i).part], b.z.mem(i).zoff, off)
		}
		return fmt.Sprintf("%s, byte %d of the records (in no gzip member)", filepath.Join(b.Dir, RecordingDataFile), off)
	}
	return fmt.Sprintf("%s at offset %d", filepath.Join(b.Dir, WARCFile), off)
}

// entriesPath is the path of b's entries file, for errors: entries.jsonl.gz of a format 3
// recording read in place, else indexes/entries.jsonl.
func (b *Bundle) entriesPath() string {
	if b.z != nil {
		return filepath.Join(b.Dir, RecordingEntriesFile)
	}
	return filepath.Join(b.Dir, EntriesFile)
}

// inflateErr is a read error of member i: a member that ends early is named as such.
func (z *zarchive) inflateErr(i int, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("read %s: gzip member inflates to fewer than the record's %d bytes", z.where(i), z.mem(i).n)
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
		return fmt.Errorf("read %s: gzip member inflates to more than the record's %d bytes", z.where(c.i), z.mem(c.i).n)
	case err != io.EOF:
		return fmt.Errorf("read %s: %w", z.where(c.i), err)
	}
	return nil
}

// openMember returns an inflater at the start of member i (the spare list's, with its
// read buffer, when it has one).
func (z *zarchive) openMember(i int) (inflater, error) {
	z.opens.Add(1)
	m := z.mem(i)
	src := io.NewSectionReader(z.parts[m.part], m.zoff, m.zn)
	z.mu.Lock()
	var f inflater
	if k := len(z.spare); k > 0 {
		f, z.spare = z.spare[k-1], z.spare[:k-1]
	}
	z.mu.Unlock()
	var err error
	if f.zr == nil {
		f.br = bufio.NewReaderSize(src, memberBufSize)
		f.zr, err = gzip.NewReader(f.br)
	} else {
		f.br.Reset(src)
		err = f.zr.Reset(f.br)
	}
	if err != nil {
		// the inflater is fine (Reset again for the next member), the member is not
		z.drop(&zcursor{inflater: f})
		return inflater{}, fmt.Errorf("read %s: %w", z.where(i), err)
	}
	f.zr.Multistream(false)
	return f, nil
}

// smallMember returns member i inflated whole, from the cache or read now (and kept).
func (z *zarchive) smallMember(i int) ([]byte, error) { return z.inflateKept(i, z.mem(i).n) }

// keep puts data, member i's inflated bytes (all or its head prefix), in the cache, the
// least recently used out beyond memberCacheBytes.
func (z *zarchive) keep(i int, data []byte) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if _, ok := z.cache[i]; ok {
		return
	}
	if z.cache == nil {
		z.cache = make(map[int]*list.Element)
	}
	z.cache[i] = z.lru.PushFront(&cachedMember{i: i, data: data})
	z.cached += int64(len(data))
	for z.cached > memberCacheBytes && z.lru.Len() > 1 {
		old := z.lru.Remove(z.lru.Back()).(*cachedMember)
		delete(z.cache, old.i)
		z.cached -= int64(len(old.data))
	}
}

// cachedData returns member i's bytes in the cache (marked recently used), or nil.
func (z *zarchive) cachedData(i int) []byte {
	z.mu.Lock()
	defer z.mu.Unlock()
	if el, ok := z.cache[i]; ok {
		z.lru.MoveToFront(el)
		return el.Value.(*cachedMember).data
	}
	return nil
}

// prefix returns the first headPrefix bytes (all, when fewer) of the streamed member i,
// from the cache or inflated now (and kept); the cursor that inflated them is parked at
// their end, where the body's read continues.
func (z *zarchive) prefix(i int) ([]byte, error) { return z.inflateKept(i, headPrefix) }

// inflateKept returns the first limit bytes (all, when fewer) of member i, from the cache
// or inflated now and kept there; when the member has more, the cursor that inflated them
// is parked at their end. A member read to its end is checked there (finish).
func (z *zarchive) inflateKept(i int, limit int64) ([]byte, error) {
	if data := z.cachedData(i); data != nil {
		return data, nil
	}
	m := z.mem(i)
	f, err := z.openMember(i)
	if err != nil {
		return nil, err
	}
	c := &zcursor{i: i, pos: m.off, inflater: f}
	data := make([]byte, min(limit, m.n))
	_, done, err := z.readCursor(c, data, m.off)
	if err != nil {
		return nil, err
	}
	if !done {
		z.park(c)
	}
	z.keep(i, data)
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
	f, err := z.openMember(i)
	if err != nil {
		return nil, err
	}
	return &zcursor{i: i, pos: z.mem(i).off, inflater: f}, nil
}

// park keeps c for a later read that continues where it stopped.
func (z *zarchive) park(c *zcursor) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if len(z.cursors) >= maxIdleCursors {
		old := z.cursors[0]
		z.cursors = slices.Delete(z.cursors, 0, 1)
		if len(z.spare) < maxSpare {
			z.spare = append(z.spare, old.inflater)
		}
	}
	z.cursors = append(z.cursors, c)
}

// drop gives c's inflater back to the spare list (kept up to maxSpare).
func (z *zarchive) drop(c *zcursor) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if len(z.spare) < maxSpare {
		z.spare = append(z.spare, c.inflater)
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

// formatName is "format N" for messages.
func formatName(n int) string { return "format " + strconv.Itoa(n) }
