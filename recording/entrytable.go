package recording

// entrytable.go: the entry table, a bundle's entries (and a format 3 recording's gzip
// members) in a binary form that is read in place: OpenBundleTable opens a bundle from one
// without reading entries.jsonl, and each entry is decoded when it is first asked for.
// replay's saved index carries it (docs/bundle-format.md, "The entry table").

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
)

// entryTableMagic starts every entry table.
const entryTableMagic = "pab entry table\n"

// EntryTableVersion is the version of the entry table format this build writes and reads.
const EntryTableVersion = 1

// Sizes of the entry table's fixed parts, in bytes.
const (
	tabHeadBytes   = 64 // magic 16, version u32, 0 u32, entries u64, members u64, blob u64, size u64, 0 u64
	tabOffBytes    = 8  // one u64 offset into the blob per entry, plus one at the end
	tabIDBytes     = 12 // u64 hash of the id, u32 entry
	tabMemberBytes = 48 // off, n, zoff, zn u64; part u32; entry u32 (top bit: a request record); 0 u64
)

// maxTableEntries bounds the entries of a table: entries are numbered with 31 bits.
const maxTableEntries = 1<<31 - 1

// TableHash is the 64-bit FNV-1a hash (FIPS-free, http://www.isthe.com/chongo/tech/comp/fnv/)
// of s that the entry table and replay's saved index sort their lookup lists by: fixed, so
// the same recording always gives the same bytes.
func TableHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// EncodeEntryTable renders the entry table of b, a bundle opened with OpenBundle (its
// entries in memory): the header, each entry's offset into the blob, the ids sorted by
// TableHash then entry number, the gzip members of a format 3 recording sorted by logical
// offset, and the blob (per entry: its numbers as unsigned varints, then its strings, each
// a varint length and the bytes). The same bundle always gives the same bytes.
func EncodeEntryTable(b *Bundle) ([]byte, error) {
	if b.tab != nil {
		return append([]byte(nil), b.tab.data...), nil
	}
	n := len(b.Entries)
	if n > maxTableEntries {
		return nil, fmt.Errorf("entry table: %d entries, at most %d", n, maxTableEntries)
	}
	var mems []zmember
	if b.z != nil {
		mems = b.z.mems
	}
	var blob []byte
	offs := make([]uint64, 0, n+1)
	for i := range b.Entries {
		offs = append(offs, uint64(len(blob)))
		var err error
		if blob, err = appendEntry(blob, &b.Entries[i]); err != nil {
			return nil, fmt.Errorf("entry table: entry %s: %w", b.Entries[i].ID, err)
		}
	}
	offs = append(offs, uint64(len(blob)))
	ids := make([]idRef, n)
	for i := range b.Entries {
		ids[i] = idRef{TableHash(b.Entries[i].ID), uint32(i)}
	}
	out := bytes.NewBuffer(make([]byte, 0, tabHeadBytes+(n+1)*tabOffBytes+n*tabIDBytes+len(mems)*tabMemberBytes+len(blob)))
	if err := writeEntryTable(out, offs, ids, mems, int64(len(blob)), b.warcSize, bytes.NewReader(blob)); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// idRef is an item of the entry table's id list: the TableHash of an entry's id and the
// entry's number.
type idRef struct {
	h uint64
	i uint32
}

// writeEntryTable writes an entry table to w (EncodeEntryTable describes it): offs are the
// entries' blob offsets and the blob's length last, ids one item an entry (sorted here),
// mems the gzip members sorted by logical offset, size the bytes of records, and blob
// gives the blobLen bytes of the blob.
func writeEntryTable(w io.Writer, offs []uint64, ids []idRef, mems []zmember, blobLen, size int64, blob io.Reader) error {
	n := len(ids)
	sort.Slice(ids, func(a, c int) bool {
		if ids[a].h != ids[c].h {
			return ids[a].h < ids[c].h
		}
		return ids[a].i < ids[c].i
	})
	bw := bufio.NewWriterSize(w, 256<<10)
	le := binary.LittleEndian
	var buf [tabMemberBytes]byte
	out := append(buf[:0], entryTableMagic...)
	out = le.AppendUint32(out, EntryTableVersion)
	out = le.AppendUint32(out, 0)
	bw.Write(out)
	for _, v := range []uint64{uint64(n), uint64(len(mems)), uint64(blobLen), uint64(size), 0} {
		bw.Write(le.AppendUint64(buf[:0], v))
	}
	for _, o := range offs {
		bw.Write(le.AppendUint64(buf[:0], o))
	}
	for _, r := range ids {
		out = le.AppendUint64(buf[:0], r.h)
		bw.Write(le.AppendUint32(out, r.i))
	}
	for _, m := range mems {
		out = le.AppendUint64(buf[:0], uint64(m.off))
		out = le.AppendUint64(out, uint64(m.n))
		out = le.AppendUint64(out, uint64(m.zoff))
		out = le.AppendUint64(out, uint64(m.zn))
		out = le.AppendUint32(out, uint32(m.part))
		e := uint32(m.entry)
		if m.isRequest {
			e |= 1 << 31
		}
		out = le.AppendUint32(out, e)
		bw.Write(le.AppendUint64(out, 0))
	}
	k, err := io.Copy(bw, blob)
	if err == nil && k != blobLen {
		err = fmt.Errorf("entry table: blob of %d bytes, %d expected", k, blobLen)
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// appendEntry appends e's blob record: 13 unsigned varints (Status, Size, ReqOffset,
// ReqLength, RespOffset, RespLength, RespPart, RespGzOffset, RespGzLength, ReqPart,
// ReqGzOffset, ReqGzLength, Unresolved as 0 or 1), then ID, TS, Method, URL, Mime, Digest,
// ReqBody, ReqType, RevisitOf, ResourceType, each a varint length and the bytes; then the
// CRC-32C of the record (AppendCRC), so that a damaged byte is found when it is read.
func appendEntry(blob []byte, e *Entry) ([]byte, error) {
	start := len(blob)
	nums := [...]int64{int64(e.Status), e.Size, e.ReqOffset, e.ReqLength, e.RespOffset, e.RespLength,
		int64(e.RespPart), e.RespGzOffset, e.RespGzLength, int64(e.ReqPart), e.ReqGzOffset, e.ReqGzLength, 0}
	if e.Unresolved {
		nums[12] = 1
	}
	for _, v := range nums {
		if v < 0 {
			return nil, fmt.Errorf("negative number %d", v)
		}
		blob = binary.AppendUvarint(blob, uint64(v))
	}
	for _, s := range [...]string{e.ID, e.TS, e.Method, e.URL, e.Mime, e.Digest, e.ReqBody, e.ReqType, e.RevisitOf, e.ResourceType} {
		blob = binary.AppendUvarint(blob, uint64(len(s)))
		blob = append(blob, s...)
	}
	return AppendCRC(blob, start), nil
}

// crcTable is CRC-32C (Castagnoli), the checksum of each record of the entry table and of
// replay's saved index.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// AppendCRC appends the CRC-32C of buf[start:] (4 bytes, little-endian) to buf: the
// checksum that ends each record of the entry table and of replay's saved index.
func AppendCRC(buf []byte, start int) []byte {
	return binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf[start:], crcTable))
}

// CheckCRC returns rec without its last 4 bytes when they are the CRC-32C of the rest
// (AppendCRC), else ok false.
func CheckCRC(rec []byte) (body []byte, ok bool) {
	if len(rec) < 4 {
		return nil, false
	}
	body = rec[:len(rec)-4]
	return body, binary.LittleEndian.Uint32(rec[len(body):]) == crc32.Checksum(body, crcTable)
}

// entryTable is an entry table read in place: data is the whole table (a view of a
// memory-mapped file, which must stay mapped while the table is used). Opening it checks
// only the header and that the sections fill data exactly; every read checks its own
// bounds, so a damaged table gives errors, never a read outside data.
type entryTable struct {
	data                  []byte
	n, nmem               int
	offs, ids, mems, blob []byte
	size                  int64 // the logical data.warc's size (format 3: the members' end)

	// decoded entries, by number: each decoded once and kept, so an entry has one address
	// (replay's caches are keyed by it). The slice is allocated at open but its memory is
	// only touched for the entries asked for.
	cache []atomic.Pointer[Entry]
}

// parseEntryTable checks the header of data and cuts its sections.
func parseEntryTable(data []byte) (*entryTable, error) {
	if len(data) < tabHeadBytes || string(data[:len(entryTableMagic)]) != entryTableMagic {
		return nil, errors.New("not an entry table")
	}
	le := binary.LittleEndian
	if v := le.Uint32(data[16:]); v != EntryTableVersion {
		return nil, fmt.Errorf("entry table version %d, want %d", v, EntryTableVersion)
	}
	n, nmem, blobLen, size := le.Uint64(data[24:]), le.Uint64(data[32:]), le.Uint64(data[40:]), le.Uint64(data[48:])
	if le.Uint32(data[20:]) != 0 || le.Uint64(data[56:]) != 0 {
		return nil, errors.New("entry table: reserved header fields are not 0")
	}
	rest := uint64(len(data) - tabHeadBytes)
	// every count is checked against the bytes there are before it is multiplied
	if n > maxTableEntries || nmem > 2*n || blobLen > rest || size > MaxWARCBytes {
		return nil, fmt.Errorf("entry table: %d entries, %d members, a blob of %d bytes and %d bytes of records do not fit its %d bytes", n, nmem, blobLen, size, len(data))
	}
	want := (n+1)*tabOffBytes + n*tabIDBytes + nmem*tabMemberBytes + blobLen
	if want != rest {
		return nil, fmt.Errorf("entry table: %d bytes after the header, its counts say %d", rest, want)
	}
	t := &entryTable{data: data, n: int(n), nmem: int(nmem), size: int64(size)}
	p := data[tabHeadBytes:]
	t.offs, p = p[:(n+1)*tabOffBytes], p[(n+1)*tabOffBytes:]
	t.ids, p = p[:n*tabIDBytes], p[n*tabIDBytes:]
	t.mems, t.blob = p[:nmem*tabMemberBytes], p[nmem*tabMemberBytes:]
	if le.Uint64(t.offs) != 0 || le.Uint64(t.offs[n*tabOffBytes:]) != blobLen {
		return nil, errors.New("entry table: the entry offsets do not span the blob")
	}
	t.cache = make([]atomic.Pointer[Entry], n)
	return t, nil
}

// entry decodes entry i (0 <= i < t.n), or says why it cannot; the entry is kept, so
// that it has one address.
func (t *entryTable) entry(i int) (*Entry, error) {
	if e := t.cache[i].Load(); e != nil {
		return e, nil
	}
	e, err := t.decode(i)
	if err != nil {
		return nil, err
	}
	if t.cache[i].CompareAndSwap(nil, e) {
		return e, nil
	}
	return t.cache[i].Load(), nil
}

// decode decodes entry i (0 <= i < t.n) afresh, without keeping it.
func (t *entryTable) decode(i int) (*Entry, error) {
	le := binary.LittleEndian
	lo, hi := le.Uint64(t.offs[i*tabOffBytes:]), le.Uint64(t.offs[(i+1)*tabOffBytes:])
	if lo > hi || hi > uint64(len(t.blob)) {
		return nil, fmt.Errorf("entry %d: blob span [%d, %d) is not inside its %d bytes", i, lo, hi, len(t.blob))
	}
	e, err := decodeEntryRecord(i, t.blob[lo:hi])
	if err != nil {
		return nil, err
	}
	// a request span of no bytes is never read (OpenBundle bounds its offset only by
	// MaxWARCBytes): only spans with bytes must lie inside the records
	for _, sp := range [][2]int64{{e.RespOffset, e.RespLength}, {e.ReqOffset, e.ReqLength}} {
		if sp[1] > 0 && (sp[0] > t.size || sp[1] > t.size-sp[0]) {
			return nil, fmt.Errorf("entry %s: record span %d+%d is past the %d bytes of records", e.ID, sp[0], sp[1], t.size)
		}
	}
	return e, nil
}

// decodeEntryRecord decodes entry i's blob record rec (appendEntry's form, its checksum
// last) and checks its fields.
func decodeEntryRecord(i int, rec []byte) (*Entry, error) {
	rec, ok := CheckCRC(rec)
	if !ok {
		return nil, fmt.Errorf("entry %d: checksum does not match: damaged", i)
	}
	var nums [13]int64
	for k := range nums {
		v, w := binary.Uvarint(rec)
		if w <= 0 || v > math.MaxInt64 {
			return nil, fmt.Errorf("entry %d: number %d is not a varint", i, k)
		}
		nums[k], rec = int64(v), rec[w:]
	}
	var strs [10]string
	for k := range strs {
		v, w := binary.Uvarint(rec)
		if w <= 0 || v > uint64(len(rec)-w) {
			return nil, fmt.Errorf("entry %d: string %d runs past its record", i, k)
		}
		strs[k], rec = string(rec[w:w+int(v)]), rec[w+int(v):]
	}
	if len(rec) != 0 {
		return nil, fmt.Errorf("entry %d: %d bytes after its record", i, len(rec))
	}
	e := &Entry{Status: int(nums[0]), Size: nums[1], ReqOffset: nums[2], ReqLength: nums[3], RespOffset: nums[4], RespLength: nums[5],
		RespPart: int(nums[6]), RespGzOffset: nums[7], RespGzLength: nums[8], ReqPart: int(nums[9]), ReqGzOffset: nums[10], ReqGzLength: nums[11],
		Unresolved: nums[12] == 1,
		ID:         strs[0], TS: strs[1], Method: strs[2], URL: strs[3], Mime: strs[4], Digest: strs[5], ReqBody: strs[6], ReqType: strs[7],
		RevisitOf: strs[8], ResourceType: strs[9]}
	switch {
	case nums[12] > 1:
		return nil, fmt.Errorf("entry %d: unresolved is %d", i, nums[12])
	case e.ID == "" || e.Method == "" || e.URL == "":
		return nil, fmt.Errorf("entry %d: no id, method or url", i)
	case e.Status < 100 || e.Status > 999:
		return nil, fmt.Errorf("entry %s: status %d out of range", e.ID, e.Status)
	}
	return e, nil
}

// CheckEntryTable reads a whole entry table (docs/bundle-format.md "The entry table"), as
// pab audit does for the one a saved index carries: its header and sections, every entry's
// record (checksum, fields, spans inside the records) and the id list (each item names an
// entry below the count whose id has the item's hash, sorted by hash). The members are
// checked against the parts' sizes when the table is opened with its recording
// (OpenBundleTable). The error names the entry or the list item.
func CheckEntryTable(table []byte) error {
	t, err := parseEntryTable(table)
	if err != nil {
		return err
	}
	for i := 0; i < t.n; i++ {
		if _, err := t.entry(i); err != nil {
			return err
		}
	}
	le := binary.LittleEndian
	var prev uint64
	for k := 0; k < t.n; k++ {
		h, i := le.Uint64(t.ids[k*tabIDBytes:]), int(le.Uint32(t.ids[k*tabIDBytes+8:]))
		if i >= t.n {
			return fmt.Errorf("entry table: id list item %d names entry %d of %d", k, i, t.n)
		}
		e, _ := t.entry(i)
		if TableHash(e.ID) != h || h < prev {
			return fmt.Errorf("entry table: id list item %d does not list entry %d's id in order", k, i)
		}
		prev = h
	}
	return nil
}

// byID returns the number of the entry whose id is id, or -1.
func (t *entryTable) byID(id string) int {
	h := TableHash(id)
	le := binary.LittleEndian
	k := sort.Search(t.n, func(k int) bool { return le.Uint64(t.ids[k*tabIDBytes:]) >= h })
	for ; k < t.n && le.Uint64(t.ids[k*tabIDBytes:]) == h; k++ {
		i := int(le.Uint32(t.ids[k*tabIDBytes+8:]))
		if i >= t.n {
			return -1
		}
		if e, err := t.entry(i); err == nil && e.ID == id {
			return i
		}
	}
	return -1
}

// member decodes gzip member i, checked against the parts' sizes: one that does not lie
// inside its part, or claims more than deflate can expand, comes back with zn 0, so that
// reading it fails.
func (t *entryTable) member(i int, sizes []int64) zmember {
	le := binary.LittleEndian
	p := t.mems[i*tabMemberBytes:]
	e := le.Uint32(p[36:])
	m := zmember{off: int64(le.Uint64(p)), n: int64(le.Uint64(p[8:])), zoff: int64(le.Uint64(p[16:])), zn: int64(le.Uint64(p[24:])),
		part: int32(le.Uint32(p[32:])), entry: int32(e &^ (1 << 31)), isRequest: e&(1<<31) != 0}
	if m.part < 0 || int(m.part) >= len(sizes) || m.zoff < 0 || m.zn < minMemberBytes || m.zn > sizes[m.part] || m.zoff > sizes[m.part]-m.zn ||
		m.n <= 0 || m.n/maxMemberRatio > m.zn || m.off < 0 || m.off > t.size-m.n {
		m.part, m.zoff, m.zn = 0, 0, 0
		m.off, m.n = max(0, min(m.off, t.size)), 0
	}
	return m
}

// memberAt returns the member holding logical offset off (binary search over the members,
// sorted by offset), or -1.
func (t *entryTable) memberAt(off int64) int {
	le := binary.LittleEndian
	i := sort.Search(t.nmem, func(i int) bool {
		p := t.mems[i*tabMemberBytes:]
		return int64(le.Uint64(p))+int64(le.Uint64(p[8:])) > off
	})
	if i < t.nmem && int64(le.Uint64(t.mems[i*tabMemberBytes:])) <= off {
		return i
	}
	return -1
}

// Len is the number of entries of the bundle.
func (b *Bundle) Len() int {
	if b.tab != nil {
		return b.tab.n
	}
	return len(b.Entries)
}

// Entry returns entry i (0 <= i < Len()), in recording order: from Entries, or, for a
// bundle opened with OpenBundleTable, decoded from its entry table the first time and the
// same pointer afterwards. An entry the table cannot give (a damaged table) comes back as an
// unresolved entry with the id "damaged-N", which replay answers as a miss; EntryErr says
// why. The entry belongs to the bundle: do not modify it.
func (b *Bundle) Entry(i int) *Entry {
	e, err := b.EntryErr(i)
	if err != nil {
		return &Entry{ID: "damaged-" + strconv.Itoa(i), Method: "GET", URL: "damaged:", Status: 500, Unresolved: true}
	}
	return e
}

// EntryErr is Entry, with the error of a damaged entry table.
func (b *Bundle) EntryErr(i int) (*Entry, error) {
	if b.tab == nil {
		return &b.Entries[i], nil
	}
	e, err := b.tab.entry(i)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.tabName, err)
	}
	return e, nil
}

// DecodeEntry is EntryErr for one pass over every entry whose memory must not grow with
// their number: an entry of a bundle opened with OpenBundleTable is decoded afresh and not
// kept (each call gives a new *Entry; Entry's, kept, is the one replay's caches key by).
func (b *Bundle) DecodeEntry(i int) (*Entry, error) {
	if b.tab == nil {
		return &b.Entries[i], nil
	}
	if e := b.tab.cache[i].Load(); e != nil {
		return e, nil
	}
	e, err := b.tab.decode(i)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.tabName, err)
	}
	return e, nil
}

// AllEntries returns every entry in recording order: Entries, or for a bundle opened with
// OpenBundleTable each entry decoded (damaged ones as Entry gives them). It reads the
// whole table: for commands that look at every entry, not for replay's start.
func (b *Bundle) AllEntries() []Entry {
	if b.tab == nil {
		return b.Entries
	}
	out := make([]Entry, b.Len())
	for i := range out {
		out[i] = *b.Entry(i)
	}
	return out
}

// FromTable reports whether the bundle was opened with OpenBundleTable: its Entries field
// is then nil, and Len and Entry give its entries.
func (b *Bundle) FromTable() bool { return b.tab != nil }

// OpenBundleTable opens the bundle (or format 3 recording) dir as OpenBundle does, but
// takes its entries from table, an entry table EncodeEntryTable wrote for the same files
// (the caller makes sure of that: replay's saved index is keyed by their identity), instead
// of reading entries.jsonl: the cost of opening does not grow with the number of entries.
// name is the table's file, for errors. table must stay unchanged (and mapped) until the
// bundle is closed. Entries is nil; Len, Entry and ByID read the table. The table's header
// and section sizes are checked here, each entry when it is first read.
func OpenBundleTable(dir string, table []byte, name string) (*Bundle, error) {
	t, err := parseEntryTable(table)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open bundle %s: %w", dir, err)
	}
	defer root.Close()
	b := &Bundle{Dir: dir, tab: t, tabName: name}
	mf, err := openBundleFile(root, dir, ManifestFile)
	if err != nil {
		return nil, err
	}
	b.Manifest, err = readManifest(mf, filepath.Join(dir, ManifestFile))
	mf.Close()
	if err != nil {
		return nil, err
	}
	if _, err := root.Stat(WARCFile); b.Manifest.Format != 0 && errors.Is(err, os.ErrNotExist) {
		if b.Manifest.Format != RecordingFormat {
			return nil, fmt.Errorf("open bundle %s: a published recording of format %d; an entry table is read only with format %d", dir, b.Manifest.Format, RecordingFormat)
		}
		return openTableInPlace(root, b)
	}
	if t.nmem != 0 {
		return nil, fmt.Errorf("%s: gzip members for a bundle directory", name)
	}
	wf, err := openBundleFile(root, dir, WARCFile)
	if err != nil {
		return nil, err
	}
	fi, err := wf.Stat()
	if err != nil {
		wf.Close()
		return nil, fmt.Errorf("stat %s: %w", filepath.Join(dir, WARCFile), err)
	}
	if fi.Size() != t.size {
		wf.Close()
		return nil, fmt.Errorf("%s: written for a %s of %d bytes, it has %d", name, WARCFile, t.size, fi.Size())
	}
	b.warc, b.closer, b.warcSize = wf, wf, fi.Size()
	if err := readTablePages(root, b, PagesFile, MaxPagesBytes); err != nil {
		b.closer.Close()
		return nil, err
	}
	return b, nil
}

// openTableInPlace is openInPlace for a bundle whose entries and members come from its
// table: the parts are opened and their sizes kept for the members' checks.
func openTableInPlace(root *os.Root, b *Bundle) (*Bundle, error) {
	dir := b.Dir
	files, budget, err := inPlaceFiles(dir)
	if err != nil {
		return nil, err
	}
	z := &zarchive{tab: b.tab, size: b.tab.size}
	ok := false
	defer func() {
		if !ok {
			z.Close()
		}
	}()
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
		z.sizes = append(z.sizes, fi.Size())
	}
	if err := budget.add(z.size); err != nil {
		return nil, err
	}
	if err := readTablePages(root, b, RecordingPagesFile, MaxPagesBytes); err != nil {
		return nil, err
	}
	b.warc, b.warcSize, b.z, b.closer = z, z.size, z, z
	ok = true
	return b, nil
}

// lazyPages is the pages.jsonl of a bundle opened with OpenBundleTable, read the first
// time AllPages asks: opening a recording does not read its pages (a crawl has about as
// many pages as exchanges).
type lazyPages struct {
	name  string // the file inside the bundle directory
	limit int64
	once  sync.Once
	pages []Page
	err   error
}

// readTablePages arranges for b's pages.jsonl (at name inside root) to be read, within limit
// bytes, when AllPages is first called; here it only checks that the file is there.
func readTablePages(root *os.Root, b *Bundle, name string, limit int64) error {
	pf, err := openBundleFile(root, b.Dir, name)
	if err != nil {
		return err
	}
	pf.Close()
	b.lazy = &lazyPages{name: name, limit: limit}
	return nil
}

// AllPages returns the bundle's pages in visit order: Pages, or for a bundle opened with
// OpenBundleTable its pages.jsonl read (once, the first time it is asked; safe for
// concurrent use) within MaxPagesBytes. The error names the file and line; the pages belong
// to the bundle: do not modify them.
func (b *Bundle) AllPages() ([]Page, error) {
	l := b.lazy
	if l == nil {
		return b.Pages, nil
	}
	l.once.Do(func() {
		root, err := os.OpenRoot(b.Dir)
		if err != nil {
			l.err = fmt.Errorf("open bundle %s: %w", b.Dir, err)
			return
		}
		defer root.Close()
		pf, err := openBundleFile(root, b.Dir, l.name)
		if err != nil {
			l.err = err
			return
		}
		defer pf.Close()
		l.pages, l.err = readPages(io.LimitReader(pf, l.limit), filepath.Join(b.Dir, l.name))
	})
	return l.pages, l.err
}

// pagesLoaded is AllPages for code that has already had its error (or does not mind
// none): the pages, or nil.
func (b *Bundle) pagesLoaded() []Page {
	pages, _ := b.AllPages()
	return pages
}
