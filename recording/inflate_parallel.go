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
	// inflateAhead bounds the runs of members (inflateChunk) between the reader and the
	// writer; a run holds at most 256 KiB of compressed bytes and less than twice
	// inflateOutMax inflated, so the memory in flight is at most about inflateAhead times
	// 2.25 MiB.
	inflateAhead = 16
)

// inflatedByWorkers counts the members the workers inflated, for the tests.
var inflatedByWorkers atomic.Int64

// inflateWorkers is the number of goroutines inflating members: one per CPU, at most 4.
func inflateWorkers() int { return min(max(1, runtime.GOMAXPROCS(0)), 4) }

// inflateChunk is a run of consecutive members of a part, the bytes [bounds[0],
// bounds[len(bounds)-1]), each [bounds[j], bounds[j+1]) expected to be one gzip member:
// raw, then, once done is closed, what the first ok of them inflate to, end to end in
// out (the j-th is out[ends[j-1]:ends[j]]): a member that is not one whole member, or
// inflates to more than inflateOutMax bytes, ends the run there. Once out holds
// inflateOutMax bytes the worker stops (cut) and the writer inflates the rest.
type inflateChunk struct {
	bounds []int64
	raw    []byte
	out    []byte
	ends   []int
	ok     int
	cut    bool // the members after the first ok are not inflated yet (not failed)
	done   chan struct{}
}

// Members are handed to the workers in runs of at most inflateRunMembers members and
// inflateRunBytes compressed bytes, so that the goroutines meet once a run, not once a
// member (a recording of small records has millions of them).
const (
	inflateRunMembers = 256
	inflateRunBytes   = 128 << 10
)

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
		for k := 0; k+1 < len(bounds); {
			// the run: members from bounds[k] while each is at most inflateChunkMax bytes,
			// within inflateRunMembers and inflateRunBytes (always at least one)
			j := k
			for j+1 < len(bounds) && j-k < inflateRunMembers && bounds[j+1]-bounds[j] <= inflateChunkMax &&
				(j == k || bounds[j+1]-bounds[k] <= inflateRunBytes) {
				j++
			}
			c := &inflateChunk{bounds: bounds[k : max(j, k+1)+1], done: make(chan struct{})}
			if j > k {
				c.raw = make([]byte, bounds[j]-bounds[k])
				if _, err := io.ReadFull(br, c.raw); err == nil {
					select {
					case jobs <- c:
					case <-ctx.Done():
						return
					}
					select {
					case order <- c:
						k = j
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
	zr := new(gzip.Reader) // for the members of a run a worker left (cut)
	var zbuf bytes.Buffer
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
		from := 0
		members := len(c.bounds) - 1
		for j := 0; j < members && !stopped; j++ {
			var out []byte
			switch {
			case j < c.ok:
				out = c.out[from:c.ends[j]]
				from = c.ends[j]
			case c.cut: // the worker left the rest of a run that inflates to so much
				var ok bool
				base := c.bounds[0]
				if out, ok = inflateOne(zr, &zbuf, c.raw[c.bounds[j]-base:c.bounds[j+1]-base]); !ok {
					stopped = true
					continue
				}
			default:
				stopped = true
				continue
			}
			if st.total+int64(len(out)) > st.max {
				stopped = true
				break
			}
			if _, werr := (&budgetWriter{w: st.w, u: st.u}).Write(out); werr != nil {
				if le, ok := asLimitError(werr); ok {
					err = le
				} else {
					err = &memberError{part: pi, zoff: c.bounds[j], err: fmt.Errorf("read %s: gzip member at offset %d: %w", path, c.bounds[j], werr)}
				}
				stopped = true
				break
			}
			n := int64(len(out))
			st.total += n
			st.spans = append(st.spans, memberSpan{part: pi, zoff: c.bounds[j], zn: c.bounds[j+1] - c.bounds[j], off: st.total - n, n: n})
			st.meter.Record(st.before + c.bounds[j+1])
			written++
			inflatedByWorkers.Add(1)
		}
		c.out, c.raw = nil, nil
		if stopped {
			cancel()
		}
	}
	cancel()
	wg.Wait()
	return written, err
}

// inflateWorker inflates the runs of jobs (inflateOne, each member) until jobs is closed,
// closing each one's done; once ctx is done it only closes them.
func inflateWorker(ctx context.Context, jobs <-chan *inflateChunk) {
	zr := new(gzip.Reader)
	var out bytes.Buffer
	for c := range jobs {
		if ctx.Err() == nil {
			c.ends = make([]int, 0, len(c.bounds)-1)
			base := c.bounds[0]
			for j := 0; j+1 < len(c.bounds); j++ {
				if len(c.out) >= inflateOutMax && j+2 < len(c.bounds) {
					c.cut = true // the rest is the writer's, so a run holds at most twice inflateOutMax
					break
				}
				m, ok := inflateOne(zr, &out, c.raw[c.bounds[j]-base:c.bounds[j+1]-base])
				if !ok {
					break
				}
				c.out = append(c.out, m...)
				c.ends = append(c.ends, len(c.out))
				c.ok++
			}
		}
		if !c.cut {
			c.raw = nil
		}
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
	return out.Bytes(), true
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
