package recording

// inflate_parallel.go: the gzip members of a format 3 part inflated by several goroutines
// at once, between the offsets where the entries say members start (inflateMembers'
// starts), written in order by the caller's goroutine. Whatever the starts say, the bytes
// written, the spans and the errors are those of inflating the part one member at a time
// (inflater.sequential): a run of bytes between two starts that is not exactly one whole
// member is read again from its start by sequential.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
)

const (
	// inflateChunkMax bounds the compressed bytes a worker inflates in memory (256 KiB);
	// a longer member is inflated by sequential, streamed.
	inflateChunkMax = 256 << 10
	// inflateOutMax bounds what a worker may inflate one member to in memory (1 MiB): a
	// member that inflates to more is inflated again by sequential, streamed.
	inflateOutMax = 1 << 20
	// inflateAhead bounds the members between the reader and the writer, so the memory
	// in flight is at most inflateAhead times 1.25 MiB.
	inflateAhead = 64
)

// inflatedByWorkers counts the members the workers inflated, for the tests.
var inflatedByWorkers atomic.Int64

// inflateWorkers is the number of goroutines inflating members: one per CPU, at most 4.
func inflateWorkers() int { return min(max(1, runtime.GOMAXPROCS(0)), 4) }

// inflateChunk is the bytes [off, end) of a part, expected to be one gzip member: raw,
// then, once done is closed, ok and what it inflates to (out) when it is one whole member
// that inflates to at most inflateOutMax bytes.
type inflateChunk struct {
	off, end int64
	raw, out []byte
	ok       bool
	done     chan struct{}
}

// chunkBounds returns 0, the offsets of hint inside (0, size) in ascending order without
// repeats, and size: the runs between them are the members expected. It returns nil when
// there is nothing to gain from workers (no hint, one CPU).
func chunkBounds(hint []int64, size int64) []int64 {
	if len(hint) == 0 || inflateWorkers() < 2 || size <= 0 {
		return nil
	}
	b := make([]int64, 0, len(hint)+2)
	b = append(b, 0)
	for _, h := range hint {
		if h > 0 && h < size {
			b = append(b, h)
		}
	}
	if !slices.IsSorted(b) {
		slices.Sort(b)
	}
	b = slices.Compact(b)
	return append(b, size)
}

// part inflates part pi (path, open as f, size bytes): the runs between the expected
// starts (hint) by workers while each is one whole member, the rest one member at a time.
func (st *memberInflater) part(ctx context.Context, pi int, path string, f *os.File, size int64, hint []int64) error {
	var from int64
	if bounds := chunkBounds(hint, size); len(bounds) >= 2 {
		i := 0
		for {
			k, err := st.parallel(ctx, pi, path, f, bounds[i:])
			if err != nil {
				return err
			}
			if i += k; i == len(bounds)-1 {
				return nil
			}
			// the run from bounds[i] is not one member as expected: read its first
			// member one at a time; go on with workers if it ends where a run starts
			end, err := st.sequential(ctx, pi, path, f, bounds[i], size, true)
			if err != nil {
				return err
			}
			j, found := slices.BinarySearch(bounds, end)
			if !found {
				from = end
				break
			}
			if i = j; i == len(bounds)-1 {
				return nil
			}
		}
	}
	_, err := st.sequential(ctx, pi, path, f, from, size, false)
	return err
}

// parallel inflates the runs between consecutive bounds of part pi with workers and
// writes them in order, while each is one whole member within the bounds; it returns how
// many runs it wrote (fewer than len(bounds)-1: the next one is not such a member).
func (st *memberInflater) parallel(ctx context.Context, pi int, path string, f *os.File, bounds []int64) (int, error) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan *inflateChunk, inflateAhead)
	order := make(chan *inflateChunk, inflateAhead)
	var wg sync.WaitGroup
	for range inflateWorkers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inflateWorker(ctx, jobs)
		}()
	}
	go func() { // the reader
		defer close(order)
		defer close(jobs)
		br := bufio.NewReaderSize(io.NewSectionReader(f, bounds[0], bounds[len(bounds)-1]-bounds[0]), 1<<20)
		for k := 0; k+1 < len(bounds); k++ {
			c := &inflateChunk{off: bounds[k], end: bounds[k+1], done: make(chan struct{})}
			if n := c.end - c.off; n <= inflateChunkMax {
				c.raw = make([]byte, n)
				if _, err := io.ReadFull(br, c.raw); err == nil {
					select {
					case jobs <- c:
					case <-ctx.Done():
						return
					}
					select {
					case order <- c:
						continue
					case <-ctx.Done():
						return
					}
				}
			}
			// too long, or unreadable: not ok; the writer reads it one member at a time
			close(c.done)
			select {
			case order <- c:
			case <-ctx.Done():
			}
			return
		}
	}()
	written := 0
	var err error
	stopped := false
	for c := range order {
		if stopped {
			continue // let the reader finish
		}
		if err = context.Cause(parent); err != nil {
			stopped = true
			cancel()
			continue
		}
		<-c.done
		if !c.ok || st.total+int64(len(c.out)) > st.max {
			stopped = true
			cancel()
			continue
		}
		if _, werr := (&budgetWriter{w: st.w, u: st.u}).Write(c.out); werr != nil {
			if le, ok := asLimitError(werr); ok {
				err = le
			} else {
				err = &memberError{part: pi, zoff: c.off, err: fmt.Errorf("read %s: gzip member at offset %d: %w", path, c.off, werr)}
			}
			stopped = true
			cancel()
			continue
		}
		n := int64(len(c.out))
		st.total += n
		st.spans = append(st.spans, memberSpan{part: pi, zoff: c.off, zn: c.end - c.off, off: st.total - n, n: n})
		st.meter.Record(st.before + c.end)
		written++
		inflatedByWorkers.Add(1)
		c.out = nil
	}
	cancel()
	wg.Wait()
	return written, err
}

// inflateWorker inflates the chunks of jobs (inflateOne) until jobs is closed, closing
// each one's done; once ctx is done it only closes them.
func inflateWorker(ctx context.Context, jobs <-chan *inflateChunk) {
	zr := new(gzip.Reader)
	var out bytes.Buffer
	for c := range jobs {
		if ctx.Err() == nil {
			c.out, c.ok = inflateOne(zr, &out, c.raw)
		}
		c.raw = nil
		close(c.done)
	}
}

// inflateOne inflates raw as one gzip member (its CRC-32 and size checked) and returns
// what it inflates to, and false when raw is not exactly one whole member or inflates to
// more than inflateOutMax bytes.
func inflateOne(zr *gzip.Reader, out *bytes.Buffer, raw []byte) ([]byte, bool) {
	br := bytes.NewReader(raw)
	if zr.Reset(br) != nil {
		return nil, false
	}
	zr.Multistream(false)
	out.Reset()
	n, err := out.ReadFrom(io.LimitReader(zr, inflateOutMax+1))
	if err != nil || n > inflateOutMax || br.Len() != 0 {
		return nil, false
	}
	return bytes.Clone(out.Bytes()), true
}

// addMemberStarts adds to starts[part] the offsets where e's response and request members
// start, as its member fields give them (a part that is not one of starts' is left out):
// inflateMembers' hint.
func addMemberStarts(starts [][]int64, e *Entry) [][]int64 {
	add := func(part int, zoff, zn int64) {
		if part >= 0 && part < len(starts) && zn > 0 && zoff >= 0 {
			starts[part] = append(starts[part], zoff)
		}
	}
	add(e.RespPart, e.RespGzOffset, e.RespGzLength)
	if e.ReqLength > 0 {
		add(e.ReqPart, e.ReqGzOffset, e.ReqGzLength)
	}
	return starts
}
