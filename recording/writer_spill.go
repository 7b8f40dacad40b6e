package recording

// writer_spill.go: what BundleWriter keeps of each written exchange, on disk, so that its
// memory does not grow with the exchanges: an entry's id is its number (entryID), and what
// a later revisit of it needs (original) is appended to a temporary file and read back by
// number.

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
)

// entryID is the id of entry i (counted from 0) of a bundle BundleWriter writes: "e000001"
// for 0, at least six digits.
func entryID(i int) string { return fmt.Sprintf("e%06d", i+1) }

// entryIndex is the index of the entry with id in a BundleWriter of n entries, and whether
// id is one of them (exactly as entryID writes it).
func entryIndex(id string, n int) (int, bool) {
	if len(id) < 7 || id[0] != 'e' {
		return 0, false
	}
	k, err := strconv.Atoi(id[1:])
	if err != nil || k < 1 || k > n || entryID(k-1) != id {
		return 0, false
	}
	return k - 1, true
}

// digestKey is the first 8 bytes of a hex sha256 digest, the key of BundleWriter.byDigest
// (0 for a digest that is not hex: such a digest is never looked up).
func digestKey(hexDigest string) uint64 {
	if len(hexDigest) < 16 {
		return 0
	}
	var b [8]byte
	if _, err := hex.Decode(b[:], []byte(hexDigest[:16])); err != nil {
		return 0
	}
	return binary.BigEndian.Uint64(b[:])
}

// origSpill is the originals of a BundleWriter's entries, one per entry, in a temporary
// file removed as soon as it is created (where the system allows it), with each one's
// offset in memory (8 bytes an entry). The latest ones are held in memory until they fill
// origSpillBuffer bytes and are written at once (one write(2) per few hundred entries, not
// one each).
type origSpill struct {
	f       *os.File
	path    string // "" once removed
	offs    []int64
	size    int64
	flushed int64  // the bytes before this offset are in the file, the rest in pending
	pending []byte // the bytes [flushed, size)
}

// origSpillBuffer is the bytes of originals origSpill holds before writing them (64 KiB).
const origSpillBuffer = 64 << 10

// newOrigSpill creates an empty spill in dir.
func newOrigSpill(dir string) (*origSpill, error) {
	f, err := os.CreateTemp(dir, ".bundle-origs-*")
	if err != nil {
		return nil, err
	}
	s := &origSpill{f: f, path: f.Name()}
	if os.Remove(s.path) == nil {
		s.path = ""
	}
	return s, nil
}

// add appends the original of the next entry.
func (s *origSpill) add(o original) error {
	b := s.pending
	for _, v := range []string{o.recordID, o.url, o.date, o.digest} {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	b = binary.AppendVarint(b, o.size)
	b = binary.AppendVarint(b, int64(o.revisitOf))
	if o.stored {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	s.offs = append(s.offs, s.size)
	s.size += int64(len(b) - len(s.pending))
	s.pending = b
	if len(s.pending) >= origSpillBuffer {
		if _, err := s.f.WriteAt(s.pending, s.flushed); err != nil {
			return fmt.Errorf("spill: %w", err)
		}
		s.flushed, s.pending = s.size, s.pending[:0]
	}
	return nil
}

// get reads back the original of entry i (0 <= i < the entries added).
func (s *origSpill) get(i int) (original, error) {
	end := s.size
	if i+1 < len(s.offs) {
		end = s.offs[i+1]
	}
	var b []byte
	if s.offs[i] >= s.flushed { // still in memory
		b = s.pending[s.offs[i]-s.flushed : end-s.flushed]
	} else {
		b = make([]byte, end-s.offs[i])
		if _, err := s.f.ReadAt(b, s.offs[i]); err != nil && err != io.EOF {
			return original{}, fmt.Errorf("spill: %w", err)
		}
	}
	bad := fmt.Errorf("spill: entry %d unreadable", i)
	var strs [4]string
	for k := range strs {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return original{}, bad
		}
		strs[k] = string(b[w : w+int(n)])
		b = b[w+int(n):]
	}
	size, w := binary.Varint(b)
	if w <= 0 {
		return original{}, bad
	}
	b = b[w:]
	rev, w := binary.Varint(b)
	if w <= 0 || len(b) != w+1 {
		return original{}, bad
	}
	return original{recordID: strs[0], url: strs[1], date: strs[2], digest: strs[3], size: size, revisitOf: int32(rev), stored: b[w] == 1}, nil
}

// close closes and removes the file.
func (s *origSpill) close() {
	if s.f != nil {
		_ = s.f.Close()
		s.f = nil
	}
	if s.path != "" {
		_ = os.Remove(s.path)
		s.path = ""
	}
	s.offs, s.pending = nil, nil
}
