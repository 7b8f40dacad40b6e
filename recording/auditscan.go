package recording

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/pab-dev/pab/warc"
	"golang.org/x/net/http/httpguts"
)

// This file scans a WARC file record by record for the audit: framing, digests and HTTP
// heads, without trusting the index.

// auditRec is what the sequential scan of data.warc learned about one record.
type auditRec struct {
	off, length    int64
	typ, target    string
	exchID         string
	recordID       string
	refersTo       string // WARC-Refers-To of a revisit
	payloadDigest  string // WARC-Payload-Digest as written
	firstLine      string // HTTP request or status line
	payloadSHA     string // hex sha256 of the block after the HTTP head
	payloadLen     int64
	hasHTTP        bool
	referencedFrom string // id of the entry pointing at it
}

func recWhere(r *auditRec) string {
	if r.exchID != "" {
		return "entry " + r.exchID
	}
	return fmt.Sprintf("offset %d", r.off)
}

// scanWARC reads every record of a bundle's data.warc in order and checks its framing,
// digests, credentials and header lines. It stops at the first record it cannot frame.
func scanWARC(f *os.File, name string) ([]*auditRec, int64, []Problem) {
	var probs []Problem
	var recs []*auditRec
	fi, err := f.Stat()
	if err != nil {
		return nil, -1, []Problem{{File: name, Msg: err.Error()}}
	}
	size := fi.Size()
	br := bufio.NewReaderSize(f, 256<<10)
	var off int64
	for off < size {
		rec, probsOfRec, err := scanRecord(br, off, name)
		probs = append(probs, probsOfRec...)
		if err != nil {
			probs = append(probs, Problem{File: name, Where: fmt.Sprintf("offset %d", off), Msg: err.Error() + "; the rest of the file is not checked"})
			return recs, -1, probs
		}
		recs = append(recs, rec)
		off += rec.length
	}
	return recs, size, probs
}

// headReaders are the 4 KiB readers scanRecord reads HTTP heads and payloads through (one
// allocated for every record was the audit's largest allocation).
var headReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// scanRecord reads the record starting at off from br.
func scanRecord(br *bufio.Reader, off int64, name string) (*auditRec, []Problem, error) {
	rec := &auditRec{off: off}
	lines, n, err := warc.ReadHead(br, warc.MaxWARCHeaderBytes, false)
	if err != nil && !errors.Is(err, warc.ErrEmptyHead) {
		return nil, nil, fmt.Errorf("warc header: %w", err)
	}
	h, err := warc.ParseWARCHead(lines) // an empty line where a record should start: no version line
	if err != nil {
		return nil, nil, err
	}
	cl := h.ContentLength
	rec.typ = h.Fields.Get("WARC-Type")
	rec.target = h.Fields.Get("WARC-Target-URI")
	rec.exchID = h.Fields.Get(warc.HeaderExchangeID)
	rec.recordID = h.Fields.Get("WARC-Record-ID")
	rec.refersTo = h.Fields.Get("WARC-Refers-To")
	rec.payloadDigest = h.Fields.Get("WARC-Payload-Digest")
	blockDigest := h.Fields.Get("WARC-Block-Digest")
	where := func() string { return recWhere(rec) }
	var probs []Problem
	add := func(format string, args ...any) {
		probs = append(probs, Problem{File: name, Where: where(), Msg: fmt.Sprintf(format, args...)})
	}
	if rec.typ == "response" {
		for _, n := range h.Fields.Values(warc.HeaderPayloadNote) {
			if strings.HasPrefix(n, NoteChunkedKept) { // a note of HTML longer than its Content-Length is no problem
				probs = append(probs, Problem{File: name, Where: where(), Kept: true,
					Msg: fmt.Sprintf("payload %.300s (RR-Payload-Note): replay serves it so, with a note in its log", n)})
			}
		}
	}

	blockHash := sha256.New()
	block := io.TeeReader(io.LimitReader(br, cl), blockHash)
	payloadHash := sha256.New()
	httpRec := rec.typ == "response" || rec.typ == "request" || rec.typ == "revisit"
	if httpRec {
		rec.hasHTTP = true
		hb := headReaders.Get().(*bufio.Reader)
		hb.Reset(block)
		defer func() {
			hb.Reset(nil)
			headReaders.Put(hb)
		}()
		head, _, err := warc.ReadHead(hb, warc.MaxHTTPHeaderBytes, true)
		switch {
		case err == nil, errors.Is(err, warc.ErrEmptyHead):
			// an empty head is reported by auditHTTPHead
			if len(head) > 0 {
				rec.firstLine = head[0]
			}
			auditHTTPHead(rec.typ, head, add)
		case errors.Is(err, warc.ErrTruncatedHead):
			add("%s record's HTTP head is cut short: %v, and no empty line ends it", rec.typ, err)
		default:
			return nil, nil, fmt.Errorf("http header: %w", err)
		}
		m, err := io.Copy(payloadHash, hb)
		if err != nil {
			return nil, nil, fmt.Errorf("block: %w", err)
		}
		rec.payloadLen = m
	}
	if _, err := io.Copy(io.Discard, block); err != nil {
		return nil, nil, fmt.Errorf("block: %w", err)
	}
	var tail [4]byte
	if _, err := io.ReadFull(br, tail[:]); err != nil || string(tail[:]) != "\r\n\r\n" {
		return nil, nil, fmt.Errorf("the %d-byte block is not followed by CRLF CRLF (Content-Length wrong or file cut short)", cl)
	}
	rec.length = n + cl + 4
	rec.payloadSHA = hex.EncodeToString(payloadHash.Sum(nil))
	if blockDigest != "" {
		if msg := digestMismatch(blockDigest, blockHash); msg != "" {
			add("WARC-Block-Digest %s", msg)
		}
	}
	if httpRec && rec.typ != "revisit" && rec.payloadDigest != "" {
		if d, ok := strings.CutPrefix(rec.payloadDigest, "sha256:"); ok && d != rec.payloadSHA {
			add("WARC-Payload-Digest %s does not match the payload (sha256:%s)", rec.payloadDigest, rec.payloadSHA)
		}
	}
	return rec, probs, nil
}

// digestMismatch compares a "sha256:<hex>" digest with h; other algorithms are not checked.
func digestMismatch(digest string, h hash.Hash) string {
	d, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		return ""
	}
	if got := hex.EncodeToString(h.Sum(nil)); d != got {
		return fmt.Sprintf("%s does not match the block (sha256:%s)", digest, got)
	}
	return ""
}

// auditHTTPHead checks an HTTP head (first line and header lines) of a record of type typ.
func auditHTTPHead(typ string, head []string, add func(string, ...any)) {
	if len(head) == 0 {
		add("%s record has no HTTP head", typ)
		return
	}
	what := "response"
	if typ == "request" {
		what = "request"
	}
	for i, line := range head[1:] {
		name, value, ok := strings.Cut(line, ":")
		if line[0] == ' ' || line[0] == '\t' || !ok || !httpguts.ValidHeaderFieldName(name) {
			add("%s header line %d %.60q is not a \"Name: value\" field (a value joined by a newline, as older recorders stored repeated fields)", what, i+1, line)
			continue
		}
		value = strings.TrimSpace(value)
		switch {
		case typ == "request" && slices.ContainsFunc(credentialHeaders, func(c string) bool { return strings.EqualFold(c, name) }):
			add("request stores the %s header", name)
		case typ != "request" && (strings.EqualFold(name, "Set-Cookie") || strings.EqualFold(name, "Set-Cookie2")) && value != "REDACTED":
			add("%s value is not REDACTED", name)
		}
	}
}
