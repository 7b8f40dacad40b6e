// Inflating a .warc.gz in a goroutine of its own, ahead of the record parsing (Reader.InflateAhead).

package warc

import (
	"sync"
)

const (
	// aheadChunk is the uncompressed bytes the inflating goroutine hands over at a time.
	aheadChunk = 256 << 10
	// aheadChunks is the number of chunks between the goroutine and the reader: at most
	// aheadChunks*aheadChunk bytes (1 MiB) are inflated ahead of the reader.
	aheadChunks = 4
)

// memberEvent is a gzip member starting (start) or ending at uncompressed position pos;
// mb is the member as it stood then.
type memberEvent struct {
	pos   int64
	start bool
	mb    member
}

// aheadChunk is one hand-over from the inflating goroutine: data, the member events
// within it (in order, at positions from the chunk's first byte to its end), and, in the
// last chunk, the stream's end (err: io.EOF or the gzip error) and its trailing bytes.
type inflatedChunk struct {
	data        []byte
	events      []memberEvent
	err         error
	trailing    int64
	trailingOff int64
}

// inflateAhead is the goroutine's side: the memberReader that inflates, and the channels.
type inflateAhead struct {
	full chan *inflatedChunk
	free chan *inflatedChunk
	done chan struct{}
	exit chan struct{}
	stop sync.Once

	cur  *inflatedChunk // being read (nil: take the next)
	off  int            // read so far of cur.data
	next int            // next event of cur to apply
}

// startInflateAhead moves m's inflating into a goroutine: m keeps its member table and
// position, updated as the reader takes the bytes, as if it inflated them itself. Each
// member's start is applied when the reader asks for the bytes after it, and its end
// with its last byte; a Read never returns bytes of two members, as memberReader.Read.
func (m *memberReader) startInflateAhead() {
	inner := &memberReader{br: m.br, cr: m.cr, base: m.base}
	a := &inflateAhead{
		full: make(chan *inflatedChunk, aheadChunks),
		free: make(chan *inflatedChunk, aheadChunks),
		done: make(chan struct{}),
		exit: make(chan struct{}),
	}
	for range aheadChunks {
		a.free <- &inflatedChunk{data: make([]byte, aheadChunk)}
	}
	m.ahead = a
	go a.run(inner)
}

// run inflates into the free chunks until the stream ends or fails, or stop.
func (a *inflateAhead) run(inner *memberReader) {
	defer close(a.exit)
	var c *inflatedChunk
	inner.event = func(ev memberEvent) { c.events = append(c.events, ev) }
	for {
		select {
		case c = <-a.free:
		case <-a.done:
			return
		}
		c.data, c.events, c.err = c.data[:cap(c.data)], c.events[:0], nil
		n := 0
		for n < len(c.data) && c.err == nil {
			k, err := inner.Read(c.data[n:])
			n += k
			if err != nil {
				c.err = err
				c.trailing, c.trailingOff = inner.trailing, inner.trailingOff
			}
		}
		c.data = c.data[:n]
		if k := len(inner.members); k > 1 { // the reader keeps the table; here only the current member
			inner.members = append(inner.members[:0], inner.members[k-1])
		}
		select {
		case a.full <- c:
		case <-a.done:
			return
		}
		if c.err != nil {
			return
		}
	}
}

// close stops the goroutine and waits for it (it may be inflating one chunk).
func (a *inflateAhead) close() {
	a.stop.Do(func() { close(a.done) })
	<-a.exit
}

// readAhead is memberReader.Read over the chunks of the goroutine.
func (m *memberReader) readAhead(p []byte) (int, error) {
	a := m.ahead
	for {
		if m.err != nil {
			return 0, m.err
		}
		if a.cur == nil {
			a.cur, a.off, a.next = <-a.full, 0, 0
		}
		c := a.cur
		// members starting here (and empty ones ending here) are applied before the bytes
		for a.next < len(c.events) && c.events[a.next].pos == m.dpos {
			m.apply(c.events[a.next])
			a.next++
		}
		if a.off == len(c.data) {
			// every event of the chunk is at or before its end, so all are applied now
			if c.err != nil {
				m.trailing, m.trailingOff = c.trailing, c.trailingOff
				m.err = c.err
				return 0, m.err
			}
			a.cur = nil
			a.free <- c
			continue
		}
		n := len(c.data) - a.off
		if a.next < len(c.events) {
			n = int(min(int64(n), c.events[a.next].pos-m.dpos))
		}
		n = copy(p, c.data[a.off:a.off+n])
		a.off += n
		m.dpos += int64(n)
		// the member ending with these bytes is ended now, as when gzip returns its last
		// bytes with io.EOF
		for a.next < len(c.events) && c.events[a.next].pos == m.dpos && !c.events[a.next].start {
			m.apply(c.events[a.next])
			a.next++
		}
		if n > 0 {
			return n, nil
		}
	}
}

// apply records a member event of the goroutine in m's table.
func (m *memberReader) apply(ev memberEvent) {
	if ev.start {
		m.members = append(m.members, ev.mb)
		return
	}
	if k := len(m.members) - 1; k >= 0 && m.members[k].cOff == ev.mb.cOff {
		m.members[k] = ev.mb
	}
}
