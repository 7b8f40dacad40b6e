package warc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"

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
		n, err := io.Copy(cw, payload)
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

// EncodeExchange returns x as two whole WARC 1.1 records, its response record then its
// request record (WARC 1.1 sections 6.4 and 6.5; the request is WARC-Concurrent-To the
// response), encoded exactly as BundleWriter.Add encodes a stored exchange: the same
// removed and redacted HTTP fields, digests, Content-Length and record ids derived from id
// and the content. id becomes RR-Exchange-ID; extra fields are added to the response
// record's header after pab's own. Revisits are the bundle writer's business: x must not
// set RevisitOf or Unresolved, and a payload is always stored whole. It also returns the
// warnings about HTTP header fields left out (see BundleWriter.Warnings). Errors are
// BundleWriter.Add's for bad input: a URL that is not absolute, no date, a status out of
// range, a bad method, an HTTP head over MaxHTTPHeaderBytes, a WARC header over
// MaxWARCHeaderBytes (ErrHeaderTooLarge).
func EncodeExchange(x Exchange, id string, extra []Field) ([]byte, []string, error) {
	if x.RevisitOf != "" || x.Unresolved != nil {
		return nil, nil, fmt.Errorf("exchange %s (%s): EncodeExchange writes no revisits", id, x.URL)
	}
	// A writer with no bundle: it holds no payloads to revisit, and collects the warnings.
	var w BundleWriter
	a, err := w.checkExchange(x, id)
	if err != nil {
		return nil, nil, err
	}
	if err := a.buildHeads(&w); err != nil {
		return nil, nil, err
	}
	if err := a.digestPayload(&w); err != nil {
		return nil, nil, err
	}
	resp, req, err := a.recordFields(extra)
	if err != nil {
		return nil, nil, err
	}
	var out bytes.Buffer
	if _, err := EncodeRecord(&out, resp, a.head.Bytes(), a.payload, a.payloadLen); err != nil {
		return nil, nil, fmt.Errorf("exchange %s (%s): %w", id, x.URL, err)
	}
	EncodeRecord(&out, req, a.qblock.Bytes(), nil, 0) //nolint:errcheck // a bytes.Buffer does not fail
	return out.Bytes(), w.warnings, nil
}

// ErrHeaderTooLarge is wrapped by the errors of BundleWriter.Add and EncodeExchange for an
// exchange whose WARC header would be longer than MaxWARCHeaderBytes.
var ErrHeaderTooLarge = errors.New("WARC header too large")

// headerSize is the length of the WARC header EncodeRecord writes for hdr and a block of
// blockLen bytes: the version line, the fields, Content-Length and the blank line.
func headerSize(hdr []Field, blockLen int64) int {
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

// recordID derives a WARC-Record-ID from the record's content: a urn:uuid made of the
// first 16 bytes of a sha256 (version 8, RFC 9562 section 5.8), so equal input gives
// equal ids and no randomness reaches the archive.
func recordID(exchangeID, kind, url, date string, block []byte) string {
	h := recordIDHash(exchangeID, kind, url, date)
	h.Write(block)
	return recordIDFrom(h)
}

// recordIDHash starts the hash of recordID; the block is written to it next.
func recordIDHash(exchangeID, kind, url, date string) hash.Hash {
	h := sha256.New()
	for _, s := range []string{exchangeID, kind, url, date} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return h
}

// recordIDFrom is the WARC-Record-ID of a recordIDHash that has seen the block.
func recordIDFrom(h hash.Hash) string {
	sum := h.Sum(nil)
	sum[6] = sum[6]&0x0f | 0x80
	sum[8] = sum[8]&0x3f | 0x80
	x := hex.EncodeToString(sum[:16])
	return "<urn:uuid:" + x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32] + ">"
}

// protocolFields are the WARC-Protocol fields of an exchange: each value once, lower case as
// WARC 1.1 section 5.15 writes them, values that are not one field value dropped.
func protocolFields(ps []string) []Field {
	var out []Field
	seen := map[string]bool{}
	for _, p := range ps {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" || seen[p] || !validFieldValue(p) {
			continue
		}
		seen[p] = true
		out = append(out, Field{"WARC-Protocol", p})
	}
	return out
}

// validFieldValue reports whether v can be written as one WARC header field value: at most
// 1024 bytes, no control characters.
func validFieldValue(v string) bool {
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
