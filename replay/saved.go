package replay

// This file is the saved index: what NewIndex computes for every entry (its key, the
// strings it is bucketed by, its redirect), written once to a file in the cache and read
// back on the next start instead of being computed again, when the file's key says the
// recording, the rules and pab are the ones it was computed from (docs/replay.md, "The
// saved index").

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/readlimit"
)

// SavedIndexVersion is the version of the saved index format; a file of another version is
// rebuilt. Callers put it into the key they compute (SavedIndexKey), so a pab that computes
// entries differently never reads another's files.
const SavedIndexVersion = 1

// savedMagic starts every saved index file.
const savedMagic = "pab saved index\n"

// maxSavedIndexBytes bounds the saved index file read: a larger file is not read (and is
// rebuilt). Entries' strings are bounded by entries.jsonl's own limit, so a real file is
// far smaller (about 250 bytes an entry).
const maxSavedIndexBytes = 1 << 30

// Flags of one entry in a saved index.
const (
	savedSkip     = 1 << iota // left out of the index: the reason follows
	savedStatic               // built.static
	savedHTTPS                // built.https
	savedLoc                  // a redirect: its Location URL and key follow
	savedLocHTTPS             // the redirect's Location is https
	savedRebuild              // a search or promo candidate: built again on load
	savedFlags    = savedRebuild<<1 - 1
)

// SavedIndexKey is the identity of what an index is computed from, as a caller states it
// (task.Open: SavedIndexVersion, the recording files' identities, the rule files' bytes and
// the pab executable's identity, hashed with SHA-256): a saved index is used only when its
// key equals the one given now.
type SavedIndexKey [sha256.Size]byte

// SavedIndexState says what NewIndex did with IndexOptions.SavedIndex: "" when none was
// given, "loaded" when the entries were read from the file, "writing: REASON" while the
// computed entries are being written (REASON says why the file was not used: missing,
// damaged, of another key), then "written: REASON", or "rebuilt: REASON; not written:
// ERROR" when the write failed. For tests and diagnostics.
func (ix *Index) SavedIndexState() string {
	ix.savedMu.Lock()
	defer ix.savedMu.Unlock()
	return ix.saved
}

// WaitSaved writes the saved index NewIndex computed now, if it has not started writing it
// yet (see saveAsync), and waits until it is written or the write failed; it returns at
// once when NewIndex writes none.
func (ix *Index) WaitSaved() {
	<-ix.savedWritten()
}

// closedChan is a channel that is closed.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// savedWritten starts the write of the saved index now, if it waits for saveDelay still,
// and returns a channel closed when the write has ended (at once when there is none).
func (ix *Index) savedWritten() <-chan struct{} {
	if ix.savedDone == nil {
		return closedChan
	}
	ix.saveOnce.Do(func() { close(ix.saveNow) })
	return ix.savedDone
}

func (ix *Index) setSaved(s string) {
	ix.savedMu.Lock()
	ix.saved = s
	ix.savedMu.Unlock()
}

// saveDelay is how long after NewIndex the saved index is written: after the first
// answers of a start, which the write would otherwise slow down (an fsync of a few MB on a
// busy disk). Server.Shutdown and WaitSaved write it at once.
const saveDelay = 2 * time.Second

// saveAsync encodes out (what NewIndex computed, under key) and writes it to path on a
// goroutine, saveDelay from now or when WaitSaved or Server.Shutdown asks for it; why is
// the reason the file was not used. out must not change afterwards.
// A process that exits before the write ends leaves no file (the next start computes the
// index again) and at most a temporary file, which a later write removes
// (removeStaleTemps).
func (ix *Index) saveAsync(path string, key SavedIndexKey, out []built, why error) {
	ix.setSaved(fmt.Sprintf("writing: %v", why))
	ix.savedDone, ix.saveNow = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ix.savedDone)
		t := time.NewTimer(saveDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ix.saveNow:
		}
		if err := writeSaved(path, encodeSaved(key, out)); err != nil {
			ix.setSaved(fmt.Sprintf("rebuilt: %v; not written: %v", why, err))
			return
		}
		ix.setSaved(fmt.Sprintf("written: %v", why))
	}()
}

// encodeSaved renders the saved index of out, the entries NewIndex computed, under key.
// Entries that are search or promo candidates (built.ep set) are marked to be built
// again: their text index needs the request itself.
func encodeSaved(key SavedIndexKey, out []built) []byte {
	var buf bytes.Buffer
	buf.Grow(64 + 256*len(out))
	buf.WriteString(savedMagic)
	var tmp [binary.MaxVarintLen64]byte
	uv := func(v uint64) { buf.Write(tmp[:binary.PutUvarint(tmp[:], v)]) }
	str := func(s string) { uv(uint64(len(s))); buf.WriteString(s) }
	uv(SavedIndexVersion)
	buf.Write(key[:])
	uv(uint64(len(out)))
	for i := range out {
		o := &out[i]
		var fl byte
		switch {
		case o.skip != "":
			fl = savedSkip
		case o.ep != nil:
			fl = savedRebuild
		default:
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
		}
		buf.WriteByte(fl)
		switch {
		case fl&savedSkip != 0:
			str(o.skip)
			continue
		case fl&savedRebuild != 0:
			continue
		}
		str(o.key.Method)
		str(o.key.Host)
		str(o.key.Path)
		str(o.keyStr)
		str(o.base)
		str(o.urlKey)
		uv(uint64(len(o.params)))
		for _, p := range o.params {
			str(p)
		}
		if o.loc != nil {
			str(o.loc.url)
			str(o.loc.key)
		}
	}
	sum := sha256.Sum256(buf.Bytes())
	buf.Write(sum[:])
	return buf.Bytes()
}

// savedReader decodes a saved index held in one string: every string decoded is a
// substring of it (no allocation per string).
type savedReader struct {
	s   string
	pos int
	err error
}

func (r *savedReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s", r.pos, fmt.Sprintf(format, args...))
	}
}

func (r *savedReader) uv() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := uvarintString(r.s[r.pos:])
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.pos += n
	return v
}

// count reads a count of items that take at least one byte each.
func (r *savedReader) count() int {
	v := r.uv()
	if v > uint64(len(r.s)-r.pos) {
		r.fail("count %d is more than the bytes left", v)
		return 0
	}
	return int(v)
}

func (r *savedReader) str() string {
	n := r.uv()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.s)-r.pos) {
		r.fail("string of %d bytes past the end", n)
		return ""
	}
	s := r.s[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s
}

func (r *savedReader) byte1() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.s) {
		r.fail("unexpected end")
		return 0
	}
	c := r.s[r.pos]
	r.pos++
	return c
}

// uvarintString is binary.Uvarint over a string, refusing a value written in more bytes
// than it needs (so a file has one reading, the one encodeSaved writes).
func uvarintString(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			if (i == binary.MaxVarintLen64-1 && c > 1) || (c == 0 && i > 0) {
				return 0, -1
			}
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}

// decodeSaved parses data, a saved index, into out (one built per entry; len(out) is the
// number of entries the bundle has). It checks the magic, version, key, entry count and
// SHA-256 trailer before anything else, and every length against the bytes left; rebuild
// lists the entries marked to be built again. Strings in out are views of data, which the
// caller must never change afterwards; the params of all entries share one slice, and the
// redirects one array. Of an entry's key only the Method, Host and Path are saved (what
// the index keeps of it). On error out is left partly filled and must not be used.
func decodeSaved(data []byte, key SavedIndexKey, out []built) (rebuild []int, err error) {
	head := len(savedMagic)
	if len(data) < head+1+len(key)+1+sha256.Size || string(data[:head]) != savedMagic {
		return nil, errors.New("not a saved index")
	}
	body, trailer := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], trailer) {
		return nil, errors.New("checksum does not match: damaged")
	}
	// the file's bytes are not changed or reused once read: its strings are views of them
	r := &savedReader{s: unsafe.String(unsafe.SliceData(body), len(body)), pos: head}
	if v := r.uv(); r.err == nil && v != SavedIndexVersion {
		return nil, fmt.Errorf("version %d, want %d", v, SavedIndexVersion)
	}
	if r.err == nil && (len(r.s)-r.pos < len(key) || r.s[r.pos:r.pos+len(key)] != string(key[:])) {
		return nil, errors.New("computed from another recording, rules or pab")
	}
	r.pos += len(key)
	if n := r.uv(); r.err == nil && n != uint64(len(out)) {
		return nil, fmt.Errorf("%d entries, the bundle has %d", n, len(out))
	}
	// the shared backing of every entry's slices: grown as needed, cut with a capacity
	// limit so no entry's append can reach another's
	var (
		params []string
		locs   []redirectLoc
	)
	for i := 0; i < len(out) && r.err == nil; i++ {
		o := &out[i]
		fl := r.byte1()
		switch {
		case fl&^savedFlags != 0, fl&(savedSkip|savedRebuild) != 0 && fl != savedSkip && fl != savedRebuild,
			fl&savedLocHTTPS != 0 && fl&savedLoc == 0:
			r.fail("entry %d: bad flags %#x", i, fl)
			continue
		case fl&savedSkip != 0:
			if o.skip = r.str(); o.skip == "" {
				r.fail("entry %d: empty skip reason", i)
			}
			continue
		case fl&savedRebuild != 0:
			rebuild = append(rebuild, i)
			continue
		}
		o.static, o.https = fl&savedStatic != 0, fl&savedHTTPS != 0
		o.key.Method, o.key.Host, o.key.Path = r.str(), r.str(), r.str()
		o.keyStr, o.base, o.urlKey = r.str(), r.str(), r.str()
		np := r.count()
		start := len(params)
		for range np {
			params = append(params, r.str())
		}
		o.params = params[start:len(params):len(params)]
		if fl&savedLoc != 0 {
			locs = append(locs, redirectLoc{url: r.str(), key: r.str(), https: fl&savedLocHTTPS != 0})
			o.loc = &locs[len(locs)-1]
		}
		if r.err == nil && (o.keyStr == "" || o.base == "" || o.urlKey == "") {
			r.fail("entry %d: empty key", i)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.pos != len(r.s) {
		return nil, fmt.Errorf("%d bytes after the last entry", len(r.s)-r.pos)
	}
	// locs may have moved while it grew: point every redirect at its final element
	k := 0
	for i := range out {
		if out[i].loc != nil {
			out[i].loc = &locs[k]
			k++
		}
	}
	return rebuild, nil
}

// readSaved reads the saved index file path (at most maxSavedIndexBytes).
func readSaved(path string) ([]byte, error) {
	return readlimit.File(path, maxSavedIndexBytes)
}

// writeSaved writes data to path atomically (internal/atomicfile), its directory made, and
// removes the temporary files of writes to path that a process left (removeStaleTemps).
func writeSaved(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	removeStaleTemps(path, time.Now())
	return atomicfile.Write(path, data, 0o644)
}

// staleTempAge is how old a temporary file of a saved index write must be before another
// write removes it: far longer than any write takes, so a concurrent one is left alone.
const staleTempAge = 10 * time.Minute

// removeStaleTemps removes the temporary files atomicfile makes for path
// (".BASE.tmp-*") that are older than staleTempAge: left by a process that exited while it
// wrote. Errors are ignored.
func removeStaleTemps(path string, now time.Time) {
	temps, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+globEscape(filepath.Base(path))+".tmp-*"))
	for _, tmp := range temps {
		if fi, err := os.Lstat(tmp); err == nil && fi.Mode().IsRegular() && now.Sub(fi.ModTime()) > staleTempAge {
			os.Remove(tmp)
		}
	}
}

// globEscape escapes the characters filepath.Match treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
