package recording

// importpark.go: an import keeps no record in memory between reading it and writing its
// exchange. Each HTTP record read is "parked": its WARC header, HTTP head and where its body
// lies are written to the spool (parkRecord), and only a few fixed-size keys stay in memory
// (inRec, about 150 bytes a record, docs/import.md "Limits and memory"); the record is read
// back (unparkRecord) when its exchange is written.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"time"

	"github.com/pab-dev/pab/warc"
)

// hkey is a 128-bit key standing for a string (a record id, a target URI): two
// independent 64-bit hashes, so that two different strings share a key with a chance of
// about 2^-128 per pair, and the import need not keep the strings.
type hkey [2]uint64

// hkeySeed seeds the second hash of hkeyOf; it varies between processes, which is harmless:
// keys are only compared within one import.
var hkeySeed = maphash.MakeSeed()

// hkeyOf is the key of s; the zero key stands for "".
func hkeyOf(s string) hkey {
	if s == "" {
		return hkey{}
	}
	return hkey{TableHash(s), maphash.String(hkeySeed, s)}
}

// errParked is the error of a parked record that does not read back (a spool damaged
// under the import).
var errParked = errors.New("parked record unreadable")

// parkRecord appends rec (all but Block and Warnings, which an import does not keep) to sp
// and returns where it lies. It encodes rec in buf's memory (the spool copies it) and
// returns that memory, grown as it had to be, for the next record.
func parkRecord(sp *warc.Spool, rec *warc.Record, buf []byte) (warc.Span, []byte, error) {
	b := buf[:0]
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	num := func(n int64) { b = binary.AppendVarint(b, n) }
	fields := func(fs warc.Fields) {
		b = binary.AppendUvarint(b, uint64(len(fs)))
		for _, f := range fs {
			str(f.Name)
			str(f.Value)
		}
	}
	str(rec.Version)
	str(rec.Type)
	str(rec.ID)
	str(rec.TargetURI)
	tb, err := rec.Date.MarshalBinary()
	if err != nil {
		return warc.Span{}, b, fmt.Errorf("park record: %w", err)
	}
	str(string(tb))
	num(rec.Offset)
	num(rec.Length)
	num(rec.Pos)
	num(rec.BlockSize)
	str(rec.Where())
	num(rec.Body.Off)
	num(rec.Body.N)
	fields(rec.Header)
	if rec.HTTP == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		m := rec.HTTP
		str(m.Method)
		str(m.RequestURI)
		num(int64(m.StatusCode))
		str(m.Reason)
		str(m.Proto)
		fields(m.Header)
	}
	mk := sp.Mark()
	if _, err := sp.Write(b); err != nil {
		return warc.Span{}, b, err
	}
	return sp.Since(mk), b, nil
}

// unparkRecord reads back a record parkRecord wrote at s.
func unparkRecord(sp *warc.Spool, s warc.Span) (*warc.Record, error) {
	b := make([]byte, s.N)
	if _, err := io.ReadFull(sp.Section(s), b); err != nil {
		return nil, fmt.Errorf("read spool: %w", err)
	}
	bad := false
	str := func() string {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			bad = true
			b = nil
			return ""
		}
		v := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return v
	}
	num := func() int64 {
		n, k := binary.Varint(b)
		if k <= 0 {
			bad = true
			b = nil
			return 0
		}
		b = b[k:]
		return n
	}
	fields := func() warc.Fields {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) {
			bad = true
			b = nil
			return nil
		}
		b = b[k:]
		if n == 0 {
			return nil
		}
		fs := make(warc.Fields, 0, n)
		for range n {
			fs = append(fs, warc.Field{Name: str(), Value: str()})
		}
		return fs
	}
	rec := &warc.Record{Version: str(), Type: str(), ID: str(), TargetURI: str()}
	tb := []byte(str())
	if err := rec.Date.UnmarshalBinary(tb); err != nil {
		return nil, errParked
	}
	// time.Time.UnmarshalBinary takes a nanosecond count of 10^9 or more and keeps it in
	// bits meant for others; a time that does not marshal back to the same bytes was not
	// written by parkRecord.
	if again, err := rec.Date.MarshalBinary(); err != nil || string(again) != string(tb) {
		return nil, errParked
	}
	if rec.Date.IsZero() {
		rec.Date = time.Time{}
	}
	rec.Offset, rec.Length, rec.Pos, rec.BlockSize = num(), num(), num(), num()
	rec.SetWhere(str())
	rec.Body.Off, rec.Body.N = num(), num()
	rec.Header = fields()
	if len(b) > 0 && b[0] == 1 {
		b = b[1:]
		m := &warc.HTTPMessage{Method: str(), RequestURI: str()}
		m.StatusCode = int(num())
		m.Reason, m.Proto = str(), str()
		m.Header = fields()
		rec.HTTP = m
	} else if len(b) > 0 {
		b = b[1:]
	} else {
		bad = true
	}
	if bad || len(b) != 0 {
		return nil, errParked
	}
	return rec, nil
}
