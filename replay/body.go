package replay

// This file reads the request bodies the proxy keys on: kept in memory within
// Options.BodyMemory, spilled to a temporary file within Options.BodySpill, refused beyond.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
)

// byteBudget is a count of bytes in use bounded by max; safe for concurrent use.
type byteBudget struct {
	max  int64
	used atomic.Int64
}

// take reserves n bytes; it reports false, reserving nothing, when they do not fit.
func (b *byteBudget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// give returns n bytes reserved with take.
func (b *byteBudget) give(n int64) { b.used.Add(-n) }

// requestBody is a request body as read by readBody: its first maxKeyBody bytes kept in
// memory (mem) or in a temporary file (file), and the budgets it holds until close.
type requestBody struct {
	mem     []byte
	file    *os.File
	kept    int64  // bytes kept, in mem or file
	total   int64  // bytes read
	refused string // why the body could not be kept ("" when it was): the answer is 413

	memHeld, diskHeld int64
	s                 *Server
}

// spillChunk is how much of a spilled body is written at a time.
const spillChunk = 64 << 10

// readBody reads the whole request body. Up to maxKeyBody bytes are kept for the key, the
// rest is read and discarded. A body of at most maxMemBody bytes is kept in memory when it
// fits under Options.BodyMemory; otherwise it goes to a temporary file, within
// Options.BodySpill; a body that fits under neither is read to the end, not kept, and
// marked refused. Reading the body is also what sends "100 Continue" to a client that
// asked for it (Expect). The result goes to rb (the caller's, so that it need not be
// allocated); close releases it.
func (s *Server) readBody(r *http.Request, rb *requestBody) error {
	*rb = requestBody{s: s}
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	// in memory: the whole body when its length is known, else growing up to maxMemBody
	if n := r.ContentLength; n >= 0 && n <= maxMemBody {
		if s.bodyMem.take(n) {
			rb.memHeld = n
			rb.mem = make([]byte, n)
			m, err := io.ReadFull(r.Body, rb.mem)
			rb.kept, rb.total = int64(m), int64(m)
			if err != nil {
				return err
			}
			// net/http ends the body at Content-Length; this only sees its end
			extra, err := io.Copy(io.Discard, r.Body)
			rb.total += extra
			return err
		}
	} else if n < 0 {
		for {
			if len(rb.mem) == cap(rb.mem) {
				c := int64(min(max(2*cap(rb.mem), 32<<10), maxMemBody))
				if int64(cap(rb.mem)) >= maxMemBody || !s.bodyMem.take(c-rb.memHeld) {
					break // to a temporary file with what was read so far
				}
				grown := make([]byte, len(rb.mem), c)
				copy(grown, rb.mem)
				rb.mem, rb.memHeld = grown, c
			}
			m, err := r.Body.Read(rb.mem[len(rb.mem):cap(rb.mem)])
			rb.mem = rb.mem[:len(rb.mem)+m]
			rb.kept, rb.total = int64(len(rb.mem)), int64(len(rb.mem))
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	}
	return rb.spill(r.Body)
}

// spill moves what rb holds in memory to a temporary file and reads the rest of body into
// it, up to maxKeyBody bytes kept; the rest is read and discarded. When the file cannot
// be made or written, or Options.BodySpill is reached, the body is read to the end, not
// kept, and rb.refused says why.
func (rb *requestBody) spill(body io.Reader) error {
	s := rb.s
	head := rb.mem
	rb.mem, rb.kept = nil, 0 // head is kept again below, in the file
	defer func() {
		if rb.memHeld > 0 {
			s.bodyMem.give(rb.memHeld)
			rb.memHeld = 0
		}
	}()
	buf := make([]byte, spillChunk)
	write := func(p []byte) {
		if rb.refused != "" || len(p) == 0 {
			return
		}
		p = p[:min(int64(len(p)), maxKeyBody-rb.kept)]
		if len(p) == 0 {
			return
		}
		if !s.bodyDisk.take(int64(len(p))) {
			rb.refuse(fmt.Sprintf("request body not kept: other requests use the caps of %d MiB of request bodies in memory and %d MiB in temporary files",
				s.bodyMem.max>>20, s.bodyDisk.max>>20))
			return
		}
		rb.diskHeld += int64(len(p))
		if rb.file == nil {
			f, err := os.CreateTemp(s.opts.SpillDir, "pab-replay-body-*")
			if err != nil {
				rb.refuse("request body not kept: temporary file: " + err.Error())
				return
			}
			os.Remove(f.Name()) // the open file stays readable; nothing is left behind
			rb.file = f
		}
		if _, err := rb.file.Write(p); err != nil {
			rb.refuse("request body not kept: temporary file: " + err.Error())
			return
		}
		rb.kept += int64(len(p))
	}
	write(head)
	for {
		m, err := body.Read(buf)
		rb.total += int64(m)
		write(buf[:m])
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// refuse drops what rb kept and records why.
func (rb *requestBody) refuse(why string) {
	rb.refused = why
	rb.kept = 0
	rb.closeFile()
}

// closeFile closes the temporary file and gives back its bytes.
func (rb *requestBody) closeFile() {
	if rb.file != nil {
		rb.file.Close()
		rb.file = nil
	}
	if rb.diskHeld > 0 {
		rb.s.bodyDisk.give(rb.diskHeld)
		rb.diskHeld = 0
	}
}

// bytes returns the kept body for the lookup, and done, to be called once the lookup is
// over. A spilled body is read back under mu, which done unlocks: one at a time.
func (rb *requestBody) bytes(mu *sync.Mutex) (body []byte, done func(), err error) {
	if rb.file == nil {
		return rb.mem, func() {}, nil
	}
	mu.Lock()
	body = make([]byte, rb.kept)
	if _, err := rb.file.ReadAt(body, 0); err != nil {
		mu.Unlock()
		return nil, nil, fmt.Errorf("read back the temporary file: %w", err)
	}
	return body, mu.Unlock, nil
}

// close releases the memory and the temporary file rb holds.
func (rb *requestBody) close() {
	rb.mem = nil
	if rb.memHeld > 0 {
		rb.s.bodyMem.give(rb.memHeld)
		rb.memHeld = 0
	}
	rb.closeFile()
}
