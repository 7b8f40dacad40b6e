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
	"container/list"
	"errors"
	"fmt"
	"io"
	"os"
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

// formatName is "format N" for messages.
func formatName(n int) string { return "format " + strconv.Itoa(n) }
