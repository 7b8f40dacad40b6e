package replay

// disk.go: the saved index, format 2 (docs/bundle-format.md "The saved index"): what
// NewIndex computes, written once to a file in the cache and read back in place on the next
// start (memory-mapped), so that opening costs the same whatever the number of entries and
// each lookup reads only the records it compares: sorted (hash, position) lists for the
// exact, fuzzy, not-found and search/promo steps, binary-searched, and each indexed entry's
// record decoded when first asked for. The file also carries the bundle's entry table
// (recording.EncodeEntryTable), so the bundle opens without reading entries.jsonl either.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/pab-dev/pab/recording"
	"github.com/pab-dev/pab/rules"
)

// Layout of a saved index file (all integers little-endian):
//
//	0    magic "pab saved index\n" (16 bytes)
//	16   version u32 (SavedIndexVersion), 0 u32
//	24   key (32 bytes: SavedIndexKey)
//	56   n u64: entries of the bundle
//	64   m u64: indexed entries (positions)
//	72   table u64: bytes of the entry table
//	80   recs u64: bytes of the records blob
//	88   texts u64: items of the text list
//	96   skips u64: bytes of the skip blob
//	104  0 u64 ×3
//	128  SHA-256 of bytes [0, 128)
//	160  the entry table (recording.EncodeEntryTable), then zero bytes to a multiple of 8
//	     exact, base, urls: m items each, texts: texts items; an item is 16 bytes, the
//	       TableHash u64 of its string, a position u32 and the CRC-32C of those 12 bytes,
//	       sorted by hash then position
//	     record offsets u64 ×(m+1) into the records blob
//	     the records blob: per position, the number of its bundle entry (varint), a flags
//	       byte (savedStatic, savedHTTPS, savedLoc, savedLocHTTPS), then as varint-length strings the key's method, host and path,
//	       the key string, the base, the URL key, a varint count and the parameters, and
//	       for a redirect its Location URL and key; then the CRC-32C of the record
//	       (recording.AppendCRC)
//	     the skip blob: per entry left out, its entry number (varint) and why (string)
//
// The strings of the lists: exact the key string, base key.Base(), urls "METHOD " and the
// normalized URL, texts textListKey (endpoint and base) of a search or promo candidate.
const (
	diskHeadBytes = 160
	diskItemBytes = 16
)

// textListKey is the string a search or promo candidate is listed under in the texts list:
// where the endpoint is written, its name and the key base.
func textListKey(ep *rules.Endpoint, base string) string {
	return ep.File + ":" + strconv.Itoa(ep.Line) + "\x00" + ep.Name + "\x00" + base
}

// encodeDisk renders the saved index of b (opened with its entries in memory) under key
// from out, what NewIndex computed for each entry. The same inputs give the same bytes.
func encodeDisk(key SavedIndexKey, b *recording.Bundle, out []built) ([]byte, error) {
	tab, err := recording.EncodeEntryTable(b)
	if err != nil {
		return nil, err
	}
	var recs bytes.Buffer
	w := newDiskWriter(&recs, len(out))
	for i := range out {
		if err := w.add(i, &out[i]); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	buf.Grow(w.size(len(tab)))
	if err := w.finish(&buf, key, bytes.NewReader(tab), int64(len(tab)), &recs); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// diskItem is an item of a saved index's lists before it is written: the TableHash of its
// string and the position.
type diskItem struct {
	h   uint64
	pos uint32
}

// diskWriter writes a saved index: each entry's part as it is computed (add, in entry
// order; the records go to recs at once), then the whole file (finish). encodeDisk and
// BuildSavedIndex both write through it, so both give the same bytes. What it keeps is
// about 8 bytes an indexed entry plus 16 for each of its list items, and the skip blob.
type diskWriter struct {
	n, m                     int
	exact, base, urls, texts []diskItem
	recOffs                  []uint64
	recs                     io.Writer
	recLen                   uint64
	skips                    []byte
	rec                      []byte // the record being encoded
}

// newDiskWriter is a diskWriter writing records to recs, its lists sized for n entries.
func newDiskWriter(recs io.Writer, n int) *diskWriter {
	return &diskWriter{recs: recs, exact: make([]diskItem, 0, n), base: make([]diskItem, 0, n), urls: make([]diskItem, 0, n), recOffs: make([]uint64, 0, n+1)}
}

// appendSavedString appends s as a varint length and its bytes.
func appendSavedString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// add adds entry i (the next one: entries are added in order) with o, what build computed
// for it.
func (w *diskWriter) add(i int, o *built) error {
	if i != w.n {
		return fmt.Errorf("saved index: entry %d added after %d entries", i, w.n)
	}
	w.n++
	if o.skip != "" {
		w.skips = binary.AppendUvarint(w.skips, uint64(i))
		w.skips = appendSavedString(w.skips, o.skip)
		return nil
	}
	pos := uint32(w.m)
	w.m++
	w.exact = append(w.exact, diskItem{recording.TableHash(o.keyStr), pos})
	w.base = append(w.base, diskItem{recording.TableHash(o.base), pos})
	w.urls = append(w.urls, diskItem{recording.TableHash(o.urlKey), pos})
	if o.ep != nil {
		w.texts = append(w.texts, diskItem{recording.TableHash(textListKey(o.ep, o.base)), pos})
	}
	w.recOffs = append(w.recOffs, w.recLen)
	recs := binary.AppendUvarint(w.rec[:0], uint64(i))
	var fl byte
	if o.static {
		fl |= savedStatic
	}
	if o.https {
		fl |= savedHTTPS
	}
	if o.loc != nil {
		fl |= savedLoc
		if o.loc.https {
			fl |= savedLocHTTPS
		}
	}
	recs = append(recs, fl)
	for _, s := range []string{o.key.Method, o.key.Host, o.key.Path, o.keyStr, o.base, o.urlKey} {
		recs = appendSavedString(recs, s)
	}
	recs = binary.AppendUvarint(recs, uint64(len(o.params)))
	for _, p := range o.params {
		recs = appendSavedString(recs, p)
	}
	if o.loc != nil {
		recs = appendSavedString(recs, o.loc.url)
		recs = appendSavedString(recs, o.loc.key)
	}
	recs = recording.AppendCRC(recs, 0)
	w.rec = recs
	if _, err := w.recs.Write(recs); err != nil {
		return fmt.Errorf("saved index: %w", err)
	}
	w.recLen += uint64(len(recs))
	return nil
}

// size is the bytes of the file finish writes with an entry table of tabLen bytes.
func (w *diskWriter) size(tabLen int) int {
	return diskHeadBytes + tabLen + pad8(tabLen) + diskItemBytes*(3*w.m+len(w.texts)) + 8*(w.m+1) + int(w.recLen) + len(w.skips)
}

// finish writes the saved index to out under key: the header, the entry table (tabLen
// bytes from table), the lists sorted, the record offsets, the records (read back from
// recs, what add wrote) and the skip blob.
func (w *diskWriter) finish(out io.Writer, key SavedIndexKey, table io.Reader, tabLen int64, recs io.Reader) error {
	le := binary.LittleEndian
	head := make([]byte, 0, diskHeadBytes)
	head = append(head, savedMagic...)
	head = le.AppendUint32(head, SavedIndexVersion)
	head = le.AppendUint32(head, 0)
	head = append(head, key[:]...)
	for _, v := range []uint64{uint64(w.n), uint64(w.m), uint64(tabLen), w.recLen, uint64(len(w.texts)), uint64(len(w.skips)), 0, 0, 0} {
		head = le.AppendUint64(head, v)
	}
	sum := sha256.Sum256(head)
	head = append(head, sum[:]...)
	bw := bufio.NewWriterSize(out, 256<<10)
	bw.Write(head)
	copied := func(r io.Reader, n int64, what string) error {
		k, err := io.Copy(bw, r)
		if err == nil && k != n {
			err = fmt.Errorf("%s of %d bytes, %d expected", what, k, n)
		}
		if err != nil {
			return fmt.Errorf("saved index: %w", err)
		}
		return nil
	}
	if err := copied(table, tabLen, "entry table"); err != nil {
		return err
	}
	bw.Write(make([]byte, pad8(int(tabLen))))
	for _, list := range [][]diskItem{w.exact, w.base, w.urls, w.texts} {
		slices.SortFunc(list, func(a, b diskItem) int {
			if a.h != b.h {
				if a.h < b.h {
					return -1
				}
				return 1
			}
			return int(a.pos) - int(b.pos)
		})
		for _, it := range list {
			var tmp [diskItemBytes]byte
			le.PutUint64(tmp[:], it.h)
			le.PutUint32(tmp[8:], it.pos)
			bw.Write(recording.AppendCRC(tmp[:12], 0))
		}
	}
	var tmp [8]byte
	for _, o := range w.recOffs {
		bw.Write(le.AppendUint64(tmp[:0], o))
	}
	bw.Write(le.AppendUint64(tmp[:0], w.recLen))
	if err := copied(recs, int64(w.recLen), "records"); err != nil {
		return err
	}
	bw.Write(w.skips)
	return bw.Flush()
}

// pad8 is how many zero bytes follow n bytes to reach a multiple of 8.
func pad8(n int) int { return (8 - n%8) % 8 }

// SavedIndex is a saved index file opened in place (OpenSavedIndex): its bytes mapped
// read-only. It is handed to recording.OpenBundleTable (Table) and to NewIndex
// (IndexOptions.Opened), and unmapped by Close once the index is no longer used.
type SavedIndex struct {
	path string
	data []byte
	m    mapping

	n, m2                    int
	table                    []byte
	exact, base, urls, texts []byte
	recOffs, recs, skips     []byte
}

// Path is the file the saved index was read from.
func (s *SavedIndex) Path() string { return s.path }

// Table is the bundle's entry table the file carries (for recording.OpenBundleTable).
func (s *SavedIndex) Table() []byte { return s.table }

// Close unmaps the file. Nothing read from it may be used afterwards (entries and records
// decoded from it are copies and stay valid; the index and bundle that read it do not).
func (s *SavedIndex) Close() error { return s.m.close() }

// ErrSavedIndexStale is wrapped by OpenSavedIndex's error for a whole file that is not of
// the version or key asked for: not damaged, computed from other inputs (it is replaced
// when the index is computed again).
var ErrSavedIndexStale = errors.New("saved index of other inputs")

// OpenSavedIndex maps the saved index file path and checks its header: magic, version,
// key (it must be key), the header's SHA-256, and that the sections' sizes fill the file
// exactly. Nothing else is read: the cost does not depend on the number of entries. Each
// record is checked when it is read; a damaged one is never served (the lookup misses).
// Errors say why the file cannot be used (the caller then computes the index again and
// rewrites it).
func OpenSavedIndex(path string, key SavedIndexKey) (*SavedIndex, error) {
	mp, err := mapFile(path, maxSavedIndexBytes)
	if err != nil {
		return nil, err
	}
	s, err := parseDisk(mp.data, key)
	if err != nil {
		mp.close()
		return nil, fmt.Errorf("saved index %s: %w", path, err)
	}
	s.path, s.m = path, mp
	return s, nil
}

// parseDisk checks the header of data, a saved index, and cuts its sections.
func parseDisk(data []byte, key SavedIndexKey) (*SavedIndex, error) {
	if len(data) < diskHeadBytes || string(data[:len(savedMagic)]) != savedMagic {
		return nil, errors.New("not a saved index")
	}
	le := binary.LittleEndian
	if v := le.Uint32(data[16:]); v != SavedIndexVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrSavedIndexStale, v, SavedIndexVersion)
	}
	if sum := sha256.Sum256(data[:128]); !bytes.Equal(sum[:], data[128:160]) {
		return nil, errors.New("header checksum does not match: damaged")
	}
	if !bytes.Equal(data[24:56], key[:]) {
		return nil, fmt.Errorf("%w: computed from another recording, rules or pab", ErrSavedIndexStale)
	}
	var f [9]uint64
	for i := range f {
		f[i] = le.Uint64(data[56+8*i:])
	}
	n, m, tabLen, recLen, nText, skipLen := f[0], f[1], f[2], f[3], f[4], f[5]
	if f[6] != 0 || f[7] != 0 || f[8] != 0 || le.Uint32(data[20:]) != 0 {
		return nil, errors.New("reserved header fields are not 0")
	}
	rest := uint64(len(data) - diskHeadBytes)
	// each count is bounded by the bytes there are before any product is taken
	if n > 1<<31 || m > n || nText > m || tabLen > rest || recLen > rest || skipLen > rest {
		return nil, fmt.Errorf("counts (%d entries, %d indexed, %d candidates, sections of %d, %d and %d bytes) do not fit the file's %d bytes", n, m, nText, tabLen, recLen, skipLen, len(data))
	}
	want := tabLen + uint64(pad8(int(tabLen))) + diskItemBytes*(3*m+nText) + 8*(m+1) + recLen + skipLen
	if want != rest {
		return nil, fmt.Errorf("%d bytes after the header, its counts say %d", rest, want)
	}
	s := &SavedIndex{data: data, n: int(n), m2: int(m)}
	p := data[diskHeadBytes:]
	cut := func(k uint64) []byte { b := p[:k:k]; p = p[k:]; return b }
	s.table = cut(tabLen)
	cut(uint64(pad8(int(tabLen))))
	s.exact = cut(diskItemBytes * m)
	s.base = cut(diskItemBytes * m)
	s.urls = cut(diskItemBytes * m)
	s.texts = cut(diskItemBytes * nText)
	s.recOffs = cut(8 * (m + 1))
	s.recs = cut(recLen)
	s.skips = cut(skipLen)
	if le.Uint64(s.recOffs) != 0 || le.Uint64(s.recOffs[8*m:]) != recLen {
		return nil, errors.New("the record offsets do not span the records")
	}
	return s, nil
}

// diskIndex is the part of an Index read in place from a SavedIndex.
type diskIndex struct {
	s     *SavedIndex
	cache []atomic.Pointer[indexed] // decoded positions, each once (one address per entry)

	textMu sync.Mutex
	texts  map[textKey]*textIndex // search and promo candidates built on first use

	// bad is why a record read was damaged, once one was: every lookup from then on
	// (the one that found it included) is a miss, and the file is removed so that the
	// next start computes the index again (damaged).
	bad atomic.Pointer[string]
}

// damaged records that a record of the file is damaged (err says which) and removes the
// file, when it is still the one mapped, so the next start computes the index again.
func (d *diskIndex) damaged(err error) {
	msg := fmt.Sprintf("saved index %s is damaged (%v): every request is answered as a miss; the next start computes it again", d.s.path, err)
	if d.bad.CompareAndSwap(nil, &msg) && d.s.path != "" {
		if fi, err := os.Stat(d.s.path); err == nil && d.s.m.fi != nil && os.SameFile(fi, d.s.m.fi) {
			os.Remove(d.s.path)
		}
	}
}

// maxDiskTexts bounds the text indexes built on demand; when full it starts again empty.
const maxDiskTexts = 1 << 10

// damagedKey is the key of an indexed record that cannot be read: no request has it.
const damagedKey = "\x00damaged"

// entry decodes position p (0 <= p < m), or a record no request matches when it is damaged.
func (d *diskIndex) entry(ix *Index, p int) *indexed {
	if ie := d.cache[p].Load(); ie != nil {
		return ie
	}
	ie, err := d.decode(ix, p)
	if err != nil {
		d.damaged(err)
		// never equal to a request's key or base: looked up, it is skipped
		ie = &indexed{pos: p, keyStr: damagedKey,
			e: &recording.Entry{ID: fmt.Sprintf("damaged-%d", p), Method: "GET", URL: "damaged:", Status: 500, Unresolved: true}}
	}
	if d.cache[p].CompareAndSwap(nil, ie) {
		return ie
	}
	return d.cache[p].Load()
}

// decode reads position p's record and its bundle entry.
func (d *diskIndex) decode(ix *Index, p int) (*indexed, error) {
	ei, ie, err := d.s.decodeRecord(p, ix.b.Len())
	if err != nil {
		return nil, err
	}
	if ie.e, err = ix.b.EntryErr(ei); err != nil {
		return nil, err
	}
	return ie, nil
}

// decodeRecord reads position p's record (its checksum checked) into an indexed entry
// without its bundle entry, and returns the number of that entry, below n (the bundle's
// entries).
func (s *SavedIndex) decodeRecord(p, n int) (int, *indexed, error) {
	rec, err := s.record(p)
	if err != nil {
		return 0, nil, err
	}
	r := &savedReader{s: string(rec)}
	ei := r.uv()
	if r.err != nil || ei >= uint64(n) {
		return 0, nil, fmt.Errorf("position %d: entry %d of %d", p, ei, n)
	}
	fl := r.byte1()
	if fl&^(savedStatic|savedHTTPS|savedLoc|savedLocHTTPS) != 0 || (fl&savedLocHTTPS != 0 && fl&savedLoc == 0) {
		return 0, nil, fmt.Errorf("position %d: bad flags %#x", p, fl)
	}
	ie := &indexed{pos: p, static: fl&savedStatic != 0, https: fl&savedHTTPS != 0}
	ie.key.Method, ie.key.Host, ie.key.Path = r.str(), r.str(), r.str()
	ie.keyStr = r.str()
	_, _ = r.str(), r.str() // base and URL key: compared through baseOf and urlOf
	np := r.count()
	if np > 0 {
		ie.params = make([]string, np)
		for k := range ie.params {
			ie.params[k] = r.str()
		}
	}
	if fl&savedLoc != 0 {
		ie.loc = &redirectLoc{url: r.str(), key: r.str(), https: fl&savedLocHTTPS != 0}
	}
	if r.err == nil && r.pos != len(r.s) {
		r.fail("%d bytes after the record", len(r.s)-r.pos)
	}
	if r.err == nil && ie.keyStr == "" {
		r.fail("empty key")
	}
	if r.err != nil {
		return 0, nil, fmt.Errorf("position %d: %w", p, r.err)
	}
	return int(ei), ie, nil
}

// Verify reads the whole file, as pab audit does: the entry table
// (recording.CheckEntryTable) and the padding after it, every item of the four lookup lists
// (its checksum, a position below the indexed count, the list's order by hash then
// position), every record (its checksum and its fields, an entry number below the
// entries') and the skip blob. Opening a saved index checks only its header, and lookups
// check what they read; Verify finds damage anywhere, whether a lookup would reach it or
// not. The error names the section and the item, record or byte.
func (s *SavedIndex) Verify() error {
	if err := recording.CheckEntryTable(s.table); err != nil {
		return err
	}
	for _, b := range s.data[diskHeadBytes+len(s.table) : diskHeadBytes+len(s.table)+pad8(len(s.table))] {
		if b != 0 {
			return errors.New("the padding after the entry table is not 0")
		}
	}
	le := binary.LittleEndian
	for _, l := range []struct {
		name string
		b    []byte
	}{{"exact", s.exact}, {"base", s.base}, {"urls", s.urls}, {"texts", s.texts}} {
		var prevH uint64
		prevP := -1
		for k := 0; k < len(l.b)/diskItemBytes; k++ {
			item := l.b[k*diskItemBytes : (k+1)*diskItemBytes]
			if _, ok := recording.CheckCRC(item); !ok {
				return fmt.Errorf("%s list, item %d: checksum does not match: damaged", l.name, k)
			}
			h, p := le.Uint64(item), int(le.Uint32(item[8:]))
			if p >= s.m2 {
				return fmt.Errorf("%s list, item %d: position %d of %d", l.name, k, p, s.m2)
			}
			if k > 0 && (h < prevH || (h == prevH && p <= prevP)) {
				return fmt.Errorf("%s list, item %d: out of order", l.name, k)
			}
			prevH, prevP = h, p
		}
	}
	for p := 0; p < s.m2; p++ {
		if _, _, err := s.decodeRecord(p, s.n); err != nil {
			return fmt.Errorf("records: %w", err)
		}
	}
	r := &savedReader{s: string(s.skips)}
	for r.err == nil && r.pos < len(r.s) {
		if i := r.uv(); r.err == nil && i >= uint64(s.n) {
			r.fail("entry %d of %d", i, s.n)
		}
		r.str()
	}
	if r.err != nil {
		return fmt.Errorf("skip list: %w", r.err)
	}
	return nil
}

// record returns position p's record without its checksum, checked.
func (d *diskIndex) record(p int) ([]byte, error) { return d.s.record(p) }

// record returns position p's record without its checksum, checked.
func (s *SavedIndex) record(p int) ([]byte, error) {
	le := binary.LittleEndian
	lo, hi := le.Uint64(s.recOffs[8*p:]), le.Uint64(s.recOffs[8*(p+1):])
	if lo > hi || hi > uint64(len(s.recs)) {
		return nil, fmt.Errorf("position %d: record span [%d, %d) outside the records", p, lo, hi)
	}
	rec, ok := recording.CheckCRC(s.recs[lo:hi])
	if !ok {
		return nil, fmt.Errorf("position %d: checksum does not match: damaged", p)
	}
	return rec, nil
}

// recordStrings returns the base and URL key of position p's record ("" when damaged).
func (d *diskIndex) recordStrings(p int) (base, urlKey string) {
	rec, err := d.record(p)
	if err != nil {
		d.damaged(err)
		return "", ""
	}
	r := &savedReader{s: unsafe.String(unsafe.SliceData(rec), len(rec))} // only compared, never kept
	r.uv()
	r.byte1()
	r.str()
	r.str()
	r.str()
	r.str()
	base, urlKey = r.str(), r.str()
	if r.err != nil {
		return "", ""
	}
	return base, urlKey
}

// recordKey returns the method, host and path of the key of position p as read from its
// record, without decoding the entry ("" when the record is damaged). The strings alias
// the mapped file: for comparing, never to be kept.
func (d *diskIndex) recordKey(p int) (method, host, path string) {
	rec, err := d.record(p)
	if err != nil {
		d.damaged(err)
		return "", "", ""
	}
	r := &savedReader{s: unsafe.String(unsafe.SliceData(rec), len(rec))}
	r.uv()
	r.byte1()
	method, host, path = r.str(), r.str(), r.str()
	if r.err != nil {
		return "", "", ""
	}
	return method, host, path
}

// run returns the positions listed under the hash of key in list (ascending), each
// checked by same (the hash may collide).
func (d *diskIndex) run(list []byte, key string, same func(p int) bool) []int {
	h := recording.TableHash(key)
	le := binary.LittleEndian
	n := len(list) / diskItemBytes
	bad := -1
	k := sort.Search(n, func(k int) bool {
		item := list[k*diskItemBytes : (k+1)*diskItemBytes]
		if _, ok := recording.CheckCRC(item); !ok {
			bad = k
		}
		return le.Uint64(item) >= h
	})
	if bad >= 0 {
		d.damaged(fmt.Errorf("list item %d: checksum does not match", bad))
		return nil
	}
	// every item the search compared is checked, and the two around where it ended: an
	// item whose hash was damaged is one of them when the search is for its own string
	for _, c := range [2]int{k - 1, k} {
		if c >= 0 && c < n {
			if _, ok := recording.CheckCRC(list[c*diskItemBytes : (c+1)*diskItemBytes]); !ok {
				d.damaged(fmt.Errorf("list item %d: checksum does not match", c))
				return nil
			}
		}
	}
	var out []int
	for ; k < n && le.Uint64(list[k*diskItemBytes:]) == h; k++ {
		if _, ok := recording.CheckCRC(list[k*diskItemBytes : (k+1)*diskItemBytes]); !ok {
			d.damaged(fmt.Errorf("list item %d: checksum does not match", k))
			return nil
		}
		p := int(le.Uint32(list[k*diskItemBytes+8:]))
		if p >= d.s.m2 || (len(out) > 0 && p <= out[len(out)-1]) {
			continue // damaged: out of range or out of order
		}
		if same(p) {
			out = append(out, p)
		}
	}
	return out
}

// skipped decodes the skip blob: entry id → why it is not indexed.
func (d *diskIndex) skipped(ix *Index) map[string]string {
	out := map[string]string{}
	r := &savedReader{s: string(d.s.skips)}
	for r.err == nil && r.pos < len(r.s) {
		i := r.uv()
		why := r.str()
		if r.err != nil || i >= uint64(ix.b.Len()) {
			break
		}
		out[ix.b.Entry(int(i)).ID] = why
	}
	return out
}

// newDiskIndex makes ix read its lookup lists from s.
func newDiskIndex(ix *Index, s *SavedIndex) error {
	if s.n != ix.b.Len() {
		return fmt.Errorf("saved index %s: %d entries, the bundle has %d", s.path, s.n, ix.b.Len())
	}
	ix.d = &diskIndex{s: s, cache: make([]atomic.Pointer[indexed], s.m2), texts: map[textKey]*textIndex{}}
	return nil
}

// textsOf returns the search or promo candidates of ep and base, built from the candidates
// the texts list names the first time they are asked for.
func (d *diskIndex) textsOf(ix *Index, ep *rules.Endpoint, base string) *textIndex {
	k := textKey{ep, base}
	d.textMu.Lock()
	t, ok := d.texts[k]
	d.textMu.Unlock()
	if ok {
		return t
	}
	tk := textListKey(ep, base)
	ps := d.run(d.s.texts, tk, func(p int) bool {
		b, _ := d.recordStrings(p)
		return b == base
	})
	t = nil
	for _, p := range ps {
		ie := d.entry(ix, p)
		u, err := parseTargetURL(ie.e.URL)
		if err != nil {
			continue
		}
		body, err := ix.b.RequestBody(ie.e)
		if err != nil {
			continue
		}
		r := rules.Request{Method: strings.ToUpper(ie.e.Method), URL: u, Body: body, ContentType: ie.e.RequestType(body)}
		if got := ix.rs.Endpoint(r); got != ep {
			continue
		}
		t = addTextTo(t, ep, r, ie)
	}
	if t != nil {
		t.finish()
	}
	d.textMu.Lock()
	if len(d.texts) >= maxDiskTexts {
		d.texts = map[textKey]*textIndex{}
	}
	d.texts[k] = t
	d.textMu.Unlock()
	return t
}
