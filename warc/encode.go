package warc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"sync"

	gowarc "github.com/nlnwa/gowarc/v3"
)

// This file encodes WARC records (WARC 1.1 section 4: version line, named fields, CRLF,
// block, CRLF CRLF) and derives their content-based record ids.

// EncodeRecord writes one WARC 1.1 record (WARC 1.1 section 4) to w: the version line, the
// header fields in the order and spelling given (gowarc.WarcFields' form, "Name: value"),
// Content-Length, a blank line, the block (head, then the payloadLen bytes of payload, nil
// when there are none) and CRLF CRLF. The block is streamed, never held whole. It returns
// the bytes written; the first write error, or a payload of another length than
// payloadLen, is the error. It is the one WARC record encoder of pab (the bundle writer,
// EncodeExchange, record's journal through it).
func EncodeRecord(w io.Writer, hdr []Field, head []byte, payload io.Reader, payloadLen int64) (int64, error) {
	fields := make(gowarc.WarcFields, 0, len(hdr)+1)
	for _, f := range hdr {
		fields.Add(f.Name, f.Value)
	}
	// gowarc canonicalises unknown names ("Rr-Exchange-Id"); keep the names as given.
	for i, f := range hdr {
		fields[i].Name = f.Name
	}
	fields.AddInt64(gowarc.ContentLength, int64(len(head))+payloadLen)
	cw := &stickyWriter{w: w}
	io.WriteString(cw, gowarc.V1_1.String()+"\r\n")
	if _, err := fields.Write(cw); err != nil {
		return cw.n, err
	}
	io.WriteString(cw, "\r\n")
	cw.Write(head)
	if payload != nil {
		bp := copyBufs.Get().(*[]byte)
		n, err := io.CopyBuffer(cw, payload, *bp)
		copyBufs.Put(bp)
		if err == nil && n != payloadLen {
			err = fmt.Errorf("payload has %d bytes, not %d", n, payloadLen)
		}
		if err != nil {
			return cw.n, err
		}
	}
	io.WriteString(cw, "\r\n\r\n")
	return cw.n, cw.err
}

// copyBufs are the 32 KiB buffers EncodeRecord copies payloads through (io.Copy would
// allocate one for every record).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ErrHeaderTooLarge is wrapped by the errors of BundleWriter.Add and EncodeExchange for an
// exchange whose WARC header would be longer than MaxWARCHeaderBytes.
var ErrHeaderTooLarge = errors.New("WARC header too large")

// HeaderSize is the length of the WARC header EncodeRecord writes for hdr and a block of
// blockLen bytes: the version line, the fields, Content-Length and the blank line.
func HeaderSize(hdr []Field, blockLen int64) int {
	n := len("WARC/1.1\r\n") + len("Content-Length: \r\n") + len(strconv.FormatInt(blockLen, 10)) + len("\r\n")
	for _, f := range hdr {
		n += len(f.Name) + len(": ") + len(f.Value) + len("\r\n")
	}
	return n
}

// stickyWriter counts the bytes written through it and keeps the first error (later
// writes are dropped).
type stickyWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *stickyWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// RecordID derives a WARC-Record-ID from the record's content: a urn:uuid made of the
// first 16 bytes of a sha256 (version 8, RFC 9562 section 5.8), so equal input gives
// equal ids and no randomness reaches the archive.
func RecordID(exchangeID, kind, url, date string, block []byte) string {
	h := RecordIDHash(exchangeID, kind, url, date)
	h.Write(block)
	return RecordIDFrom(h)
}

// RecordIDHash starts the hash of recordID; the block is written to it next.
func RecordIDHash(exchangeID, kind, url, date string) hash.Hash {
	h := sha256.New()
	for _, s := range []string{exchangeID, kind, url, date} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return h
}

// RecordIDFrom is the WARC-Record-ID of a recordIDHash that has seen the block.
func RecordIDFrom(h hash.Hash) string {
	sum := h.Sum(nil)
	sum[6] = sum[6]&0x0f | 0x80
	sum[8] = sum[8]&0x3f | 0x80
	x := hex.EncodeToString(sum[:16])
	return "<urn:uuid:" + x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32] + ">"
}

// ProtocolFields are the WARC-Protocol fields of an exchange: each value once, lower case as
// WARC 1.1 section 5.15 writes them, values that are not one field value dropped.
func ProtocolFields(ps []string) []Field {
	var out []Field
	seen := map[string]bool{}
	for _, p := range ps {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" || seen[p] || !ValidFieldValue(p) {
			continue
		}
		seen[p] = true
		out = append(out, Field{"WARC-Protocol", p})
	}
	return out
}

// ValidFieldValue reports whether v can be written as one WARC header field value: at most
// 1024 bytes, no control characters.
func ValidFieldValue(v string) bool {
	if len(v) > 1024 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
