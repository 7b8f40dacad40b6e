package replay

// This file is the saved index: what NewIndex computes for every entry (its key, the
// strings it is bucketed by, its redirect), written once to a file in the cache and read
// back on the next start instead of being computed again, when the file's key says the
// recording, the rules and pab are the ones it was computed from (docs/replay.md, "The
// saved index").

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pab-dev/pab/internal/atomicfile"
)

// SavedIndexVersion is the version of the saved index format; a file of another version is
// rebuilt. Callers put it into the key they compute (SavedIndexKey), so a pab that computes
// entries differently never reads another's files.
const SavedIndexVersion = 3

// savedMagic starts every saved index file.
const savedMagic = "pab saved index\n"

// maxSavedIndexBytes bounds the saved index file mapped: a larger file is not read (and is
// rebuilt). A real file holds about 400 bytes an entry (its entry and its keys).
const maxSavedIndexBytes = 64 << 30

// Flags of one entry in a saved index.
const (
	savedStatic   = 1 << iota // built.static
	savedHTTPS                // built.https
	savedLoc                  // a redirect: its Location URL and key follow
	savedLocHTTPS             // the redirect's Location is https
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
		data, err := encodeDisk(key, ix.b, out)
		if err == nil {
			err = writeSaved(path, data)
		}
		if err != nil {
			ix.setSaved(fmt.Sprintf("rebuilt: %v; not written: %v", why, err))
			return
		}
		ix.setSaved(fmt.Sprintf("written: %v", why))
	}()
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

// removeStaleTemps removes the temporary files of writes to path that are older than
// staleTempAge: left by a process that exited while it wrote. They are the files
// atomicfile makes for path (".BASE.tmp-*"), BuildSavedIndex's parts (".BASE.tmp-table-*"
// and the like) and those of a build for one start only (a file ".BASE.tmp-start-*" and
// its own parts, "..BASE.tmp-start-*.tmp-*"): every name that starts with a dot and holds
// "BASE.tmp-". Errors are ignored.
func removeStaleTemps(path string, now time.Time) {
	temps, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*"+globEscape(filepath.Base(path))+".tmp-*"))
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
