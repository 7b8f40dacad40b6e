package warc

// reader_stream.go: streamed reading of record blocks (Reader.spool, set by ImportWARCs):
// the HTTP head of a record is parsed from a bounded buffer and the body goes to the spool
// file, so a record of any size passes through a fixed amount of memory.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
)

// streamedBlock is what streamBlock learned of one block.
type streamedBlock struct {
	msg      *HTTPMessage // nil when the block is not an HTTP message
	body     Span         // the HTTP body in the spool
	warnings []string
	head     []byte // the HTTP head read, when the block was taken as HTTP
	spooled  bool   // the body went to the spool
	tail     []byte // the last bytes of the block (at most ResyncWindow), for endRecord
	ends     *endHasher
}

// streamBlock reads the cl-byte block of rec from r.br (advancing r.pos). For a response,
// request or revisit record whose block is HTTP, the head (status or request line and
// header fields, through the empty line) is parsed as ParseHTTP parses a whole block, and
// must fit in MaxHTTPHeaderBytes; the body is appended to r.spool. Every other block is read
// and dropped. WARC-Block-Digest and WARC-Payload-Digest are checked on the way, with the
// warnings verifyDigests gives. Errors are those of the in-memory path: ErrTooLarge for a
// head over the bound, ErrTruncated for a block cut short, and the spool's own.
func (r *Reader) streamBlock(rec *Record, cl int64, httpType bool) (*streamedBlock, error) {
	if r.ring == nil {
		r.ring = newTailRing(ResyncWindow)
	}
	r.ring.reset()
	sb, n, err := r.streamFrom(rec, r.br, cl, httpType, r.ring)
	r.pos += n
	if err != nil {
		return nil, err
	}
	sb.tail = r.ring.bytes()
	return sb, nil
}

// restream reads a block again after endRecord corrected its length (fix): the corrected
// block is rebuilt from the HTTP head, the spooled body and the stray bytes (or from the
// kept tail, when that holds the whole block), then streamed as streamBlock streams it, so
// the HTTP message and the digests are those of the corrected block. The body is spooled
// again after the old copy, which stays unused. When the block cannot be rebuilt (not
// spooled and longer than ResyncWindow), the record keeps what was read, with a warning.
func (r *Reader) restream(rec *Record, sb *streamedBlock, cl int64, fix *resyncResult, httpType bool) (*streamedBlock, error) {
	var src io.Reader
	switch {
	case sb.spooled:
		src = io.MultiReader(bytes.NewReader(sb.head), r.Spool.Section(sb.body), bytes.NewReader(fix.stray))
	case int64(len(sb.tail)) == cl:
		src = io.MultiReader(bytes.NewReader(sb.tail), bytes.NewReader(fix.stray))
	default:
		sb.warnings = append(sb.warnings, "block digests not checked again after the Content-Length correction (the block was not kept)")
		return sb, nil
	}
	nb, n, err := r.streamFrom(rec, io.LimitReader(src, fix.size), fix.size, httpType, nil)
	if err == nil && n != fix.size {
		err = fmt.Errorf("%w: re-reading the corrected block gave %d bytes, not %d", ErrTruncated, n, fix.size)
	}
	if err != nil {
		return nil, err
	}
	return nb, nil
}

// streamFrom reads the cl-byte block of rec from src, as streamBlock describes; it returns
// how many bytes it read. ring, when set, keeps the last bytes of the block.
func (r *Reader) streamFrom(rec *Record, from io.Reader, cl int64, httpType bool, ring *tailRing) (*streamedBlock, int64, error) {
	sb := &streamedBlock{}
	cr := &countingReader{r: io.LimitReader(from, cl)}
	var src io.Reader = cr
	if ring != nil {
		src = io.TeeReader(cr, ring)
	}
	var blockWarns, payloadWarns []string // in this order, as verifyDigests gives them
	var blockSum hash.Hash
	var blockDigest Digest
	if r.VerifyDigests {
		if v := rec.Header.Get("WARC-Block-Digest"); v != "" {
			d, err := ParseDigest(v)
			if err != nil {
				blockWarns = append(blockWarns, fmt.Sprintf("unreadable WARC-Block-Digest %q: %v", v, err))
			} else {
				blockDigest, blockSum = d, d.Hash()
				if ring != nil {
					sb.ends = &endHasher{h: blockSum, cl: cl}
					src = io.TeeReader(src, sb.ends)
				} else {
					src = io.TeeReader(src, blockSum)
				}
			}
		}
	}
	if r.blk == nil {
		r.blk = bufio.NewReaderSize(src, 64<<10)
	} else {
		r.blk.Reset(src)
	}
	br := r.blk

	ct := strings.ToLower(rec.Header.Get("Content-Type"))
	u := strings.ToLower(rec.TargetURI)
	isHTTP := httpType && (strings.HasPrefix(ct, "application/http") || strings.HasPrefix(u, "http:") || strings.HasPrefix(u, "https:")) &&
		(cl > 0 || rec.Type != "revisit")
	var sinks []io.Writer
	spooled := false
	mark := r.Spool.Mark()
	if isHTTP {
		head, tooLarge, err := readHTTPHead(br, MaxHTTPHeaderBytes)
		sb.head = head
		if err != nil {
			return nil, cr.n, blockReadErr(err, cl, cr.n)
		}
		msg, warns, perr := ParseHTTP(head, rec.Type == "request")
		switch {
		case tooLarge && perr == nil:
			return nil, cr.n, fmt.Errorf("%w: the HTTP header of this %s record is longer than %d bytes", ErrTooLarge, rec.Type, MaxHTTPHeaderBytes)
		case perr != nil:
			sb.warnings = append(sb.warnings, "block is not an HTTP message: "+perr.Error())
		default:
			msg.Body = nil
			sb.msg = msg
			sb.warnings = append(sb.warnings, warns...)
			sinks = append(sinks, r.Spool)
			spooled, sb.spooled = true, true
		}
	}

	// The payload digest covers the HTTP body, or the whole block of a record that is not
	// HTTP by type; it is unknown for a response or request whose block is not HTTP.
	var payloadSum, dechunkedSum hash.Hash
	var payloadDigest Digest
	var dechunk *ChunkDecoder
	if v := rec.Header.Get("WARC-Payload-Digest"); r.VerifyDigests && v != "" && rec.Type != "revisit" && (sb.msg != nil || !httpType) {
		d, err := ParseDigest(v)
		if err != nil {
			payloadWarns = append(payloadWarns, fmt.Sprintf("unreadable WARC-Payload-Digest %q: %v", v, err))
		} else {
			payloadDigest, payloadSum, dechunkedSum = d, d.Hash(), d.Hash()
			dechunk = NewChunkDecoder(dechunkedSum)
			sinks = append(sinks, payloadSum, dechunk)
		}
	}
	var dst io.Writer = io.Discard
	if len(sinks) > 0 {
		dst = io.MultiWriter(sinks...)
	}
	_, err := io.Copy(dst, br)
	if err != nil {
		if spooled {
			r.Spool.Truncate(mark)
		}
		if errors.Is(err, ErrSpoolFull) {
			return nil, cr.n, fmt.Errorf("the HTTP records read so far hold more than %d bytes", r.Spool.Limit)
		}
		return nil, cr.n, blockReadErr(err, cl, cr.n)
	}
	if cr.n < cl {
		if spooled {
			r.Spool.Truncate(mark)
		}
		return nil, cr.n, blockReadErr(io.ErrUnexpectedEOF, cl, cr.n)
	}
	if spooled {
		sb.body = r.Spool.Since(mark)
	}
	if blockSum != nil && !bytes.Equal(blockSum.Sum(nil), blockDigest.Sum) {
		blockWarns = append(blockWarns, fmt.Sprintf("WARC-Block-Digest %s does not match the block", rec.Header.Get("WARC-Block-Digest")))
	}
	if payloadSum != nil && !bytes.Equal(payloadSum.Sum(nil), payloadDigest.Sum) &&
		(!dechunk.OK() || !bytes.Equal(dechunkedSum.Sum(nil), payloadDigest.Sum)) {
		// Some writers digest the de-chunked entity, others the bytes as stored.
		payloadWarns = append(payloadWarns, fmt.Sprintf("WARC-Payload-Digest %s does not match the payload", rec.Header.Get("WARC-Payload-Digest")))
	}
	sb.warnings = append(append(sb.warnings, blockWarns...), payloadWarns...)
	return sb, cr.n, nil
}

// readHTTPHead reads an HTTP head from br: the first line, then lines up to and including
// the first empty one (LF or CRLF), or everything up to the end of br when no empty line
// comes. This is exactly the part of a block that ParseHTTP takes as the head. When the
// head is longer than max bytes, its first max bytes are returned with tooLarge set (the
// caller tells an HTTP message from other data by them). Errors are br's.
func readHTTPHead(br *bufio.Reader, max int) (head []byte, tooLarge bool, err error) {
	first := true     // still in the first line
	lineStart := true // the next piece starts a line
	for {
		piece, err := br.ReadSlice('\n')
		if len(head)+len(piece) > max {
			return append(head, piece[:max-len(head)]...), true, nil
		}
		head = append(head, piece...)
		switch err {
		case nil:
		case bufio.ErrBufferFull:
			lineStart = false
			continue
		case io.EOF:
			return head, false, nil
		default:
			return nil, false, err
		}
		empty := lineStart && len(piece) <= 3 && len(bytes.TrimLeft(piece, "\r")) == 1 // LF, CRLF or CR CR LF
		if empty && !first {
			return head, false, nil
		}
		first, lineStart = false, true
	}
}
