package recording

// pack_stream.go: packing a bundle directory into format 3 one entry at a time, so that
// the memory of pab import's pack does not grow with the entries (docs/import.md "Limits
// and memory").

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/pab-dev/pab/internal/atomicfile"
	"github.com/pab-dev/pab/internal/progress"
)

// errNotInArchiveOrder says that a bundle's entries do not name its records in archive
// order: packStream cannot pack it, and the caller packs it with the entries in memory
// (packMembers), which sorts them.
var errNotInArchiveOrder = errors.New("entries not in archive order")

// packStream writes the format 3 archive and entries.jsonl.gz of the bundle directory
// bundleDir into dir, as packMembers and writeEntriesGz do (the same bytes), reading
// entries.jsonl one line at a time with OpenBundle's checks (eachEntry) and pages.jsonl
// checked the same way. It needs the records in the order the entries name them, each
// entry's response then its request, which every bundle pab writes has; otherwise it
// returns errNotInArchiveOrder (what it wrote in dir is then to be removed by the caller).
//
// The archive is read once, in order, through one buffer. Its members are compressed by
// packWorkers goroutines (one per CPU, at most 4) and written to the parts in archive order
// by one writer goroutine, which also writes each entry's line once its members have their
// places; at most packInFlight bytes of records (or one record, when it is larger) are
// between the reader and the writer at a time, so the memory does not grow with the
// entries. ctx is checked between records: once it is done, packStream stops and returns
// its error.
func packStream(ctx context.Context, bundleDir, dir string, partSize int64) error {
	root, err := os.OpenRoot(bundleDir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := EachBundlePage(bundleDir, func(*Page) error { return nil }); err != nil {
		return err
	}
	wf, err := openBundleFile(root, bundleDir, WARCFile)
	if err != nil {
		return err
	}
	defer wf.Close()
	fi, err := wf.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", filepath.Join(bundleDir, WARCFile), err)
	}
	warcSize := fi.Size()
	ef, err := openBundleFile(root, bundleDir, EntriesFile)
	if err != nil {
		return err
	}
	defer ef.Close()

	meter := progress.FromContext(ctx) // counts entries and the archive's bytes read
	parent := ctx                      // Ctrl-C; p.ctx also ends when the writer fails
	p := startPackPipe(ctx, dir, partSize)
	src := bufio.NewReaderSize(wf, 1<<20)
	var at int64 // the archive is read up to here
	// member reads [off, off+n) of the archive (off >= at) and queues it for compression
	member := func(off, n int64, first bool) (*packMember, error) {
		if _, err := src.Discard(int(off - at)); err != nil {
			return nil, fmt.Errorf("read %s at offset %d: %w", WARCFile, at, err)
		}
		m, err := p.member(n, first, func(raw []byte) error {
			if _, err := io.ReadFull(src, raw); err != nil {
				return fmt.Errorf("read %s at offset %d: %w", WARCFile, off, err)
			}
			return nil
		})
		if err == nil {
			at = off + n
		}
		return m, err
	}
	// record queues the member for the bytes before [off, off+n), if any, then the record's
	record := func(it *packItem, off, n int64) (*packMember, error) {
		if off < at {
			return nil, errNotInArchiveOrder
		}
		if off > at {
			gap, err := member(at, off-at, len(it.members) == 0)
			if err != nil {
				return nil, err
			}
			it.members = append(it.members, gap)
		}
		m, err := member(off, n, len(it.members) == 0)
		if err != nil {
			return nil, err
		}
		it.members = append(it.members, m)
		return m, nil
	}
	readErr := eachEntry(ef, filepath.Join(bundleDir, EntriesFile), warcSize, func(_ int, e *Entry) error {
		if err := context.Cause(parent); err != nil {
			return err
		}
		if err := context.Cause(p.ctx); err != nil {
			return err
		}
		if e.ReqLength > 0 && e.ReqOffset < e.RespOffset {
			return errNotInArchiveOrder
		}
		it := &packItem{e: new(Entry)}
		*it.e = *e
		var err error
		if it.resp, err = record(it, e.RespOffset, e.RespLength); err == nil && e.ReqLength > 0 {
			it.req, err = record(it, e.ReqOffset, e.ReqLength)
		}
		if len(it.members) > 0 {
			p.queue(it)
		}
		meter.Record(at)
		return err
	})
	if readErr == nil && at < warcSize {
		it := &packItem{}
		if m, err := member(at, warcSize-at, true); err != nil {
			readErr = err
		} else {
			it.members = append(it.members, m)
			p.queue(it)
		}
	}
	return p.finish(readErr)
}

// packPipe compresses the members of a format 3 archive and writes them, with the entries'
// lines, into a directory: its producer (packStream reading a bundle's data.warc, or the
// bundle writer as it writes, packTee) gives each record's bytes in archive order (member)
// and each entry once its members are queued (queue); the members go to packWorkers
// goroutines in batches (packBatch) to be compressed, one writer goroutine writes them to
// the parts in order and each entry's line to entries.jsonl.gz once its members have their
// places. At most packInFlight bytes of records (or one record, when it is larger), plus
// the batch being filled, are between the producer and the writer.
type packPipe struct {
	ctx      context.Context // ends with the producer's context or the writer's error
	cancel   context.CancelCauseFunc
	jobs     chan *packBatch
	order    chan []*packItem
	budget   *byteBudget
	stopWake func() bool
	wg       sync.WaitGroup
	writeErr chan error
	pw       *packWriter

	// the producer's side: the batch being filled and the entries queued since the last
	// batch was handed over (flush)
	cur      *packBatch
	curBytes int64
	items    []*packItem
}

// packBatch is a run of consecutive members handed to one worker at once (packBatchMembers
// members or packBatchBytes bytes of records at most, unless one record is larger), so
// that the producer, the workers and the writer meet once a batch, not once a member (an
// import of small records has millions of them). done is closed once every member of it is
// compressed.
type packBatch struct {
	members []*packMember
	arena   []byte // the records' bytes of the members that fit, end to end
	done    chan struct{}
}

const (
	packBatchMembers = 256
	packBatchBytes   = 128 << 10
)

// startPackPipe starts the workers and the writer of a pack into dir, parts of partSize
// bytes. ctx done stops the writer at its next entry.
func startPackPipe(ctx context.Context, dir string, partSize int64) *packPipe {
	p := &packPipe{jobs: make(chan *packBatch, 64), order: make(chan []*packItem, 64), budget: newByteBudget(packInFlight),
		writeErr: make(chan error, 1), pw: newPackWriter(dir, partSize)}
	p.ctx, p.cancel = context.WithCancelCause(ctx)
	p.stopWake = context.AfterFunc(p.ctx, p.budget.wake)
	for range packWorkers() {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			var zbuf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&zbuf, gzip.DefaultCompression)
			var ends []int
			for b := range p.jobs {
				z := make([]byte, 0, len(b.arena)/2) // the members' compressed bytes, end to end
				ends = ends[:0]
				for _, m := range b.members {
					zbuf.Reset()
					zw.Reset(&zbuf)
					_, m.err = zw.Write(m.raw)
					if m.err == nil {
						m.err = zw.Close()
					}
					z = append(z, zbuf.Bytes()...)
					ends = append(ends, len(z))
				}
				from := 0
				for i, m := range b.members {
					m.z = z[from:ends[i]:ends[i]]
					from = ends[i]
				}
				close(b.done)
			}
		}()
	}
	go func() {
		err := atomicfile.WriteNew(filepath.Join(dir, RecordingEntriesFile), 0o644, func(w io.Writer) error {
			return gzipTo(w, func(ezw io.Writer) error {
				bw := bufio.NewWriterSize(ezw, 64<<10)
				for items := range p.order {
					for _, it := range items {
						if err := context.Cause(p.ctx); err != nil {
							return err
						}
						for _, m := range it.members {
							<-m.batch.done
							p.budget.release(m.n)
							if m.err != nil {
								return m.err
							}
							m.zlen = len(m.z)
							var err error
							if m.part, m.zoff, err = p.pw.write(m.z); err != nil {
								return err
							}
							m.raw, m.z = nil, nil
						}
						if it.e == nil { // the bytes after the last record
							continue
						}
						e := it.e
						e.RespPart, e.RespGzOffset, e.RespGzLength = it.resp.part, it.resp.zoff, int64(it.resp.zlen)
						if it.req != nil {
							e.ReqPart, e.ReqGzOffset, e.ReqGzLength = it.req.part, it.req.zoff, int64(it.req.zlen)
						}
						if err := writeJSONLine(bw, e); err != nil {
							return err
						}
					}
				}
				return bw.Flush()
			})
		})
		if err != nil {
			p.cancel(err)
			for items := range p.order { // let the producer finish
				for _, it := range items {
					for _, m := range it.members {
						<-m.batch.done
						p.budget.release(m.n)
					}
				}
			}
		}
		p.writeErr <- err
	}()
	return p
}

// member queues a record of n bytes for compression: it takes n bytes of the budget (the
// first member of an entry waits for them; its later ones, the record after a gap or the
// request after the response, take them at once: the writer releases members only once
// their entry is queued, after all of its members, so waiting there would wait for the
// entry itself; an entry holds at most three members, so in flight stays within three
// times packInFlight), and fill writes the record's bytes into the member's. A first
// member that must wait hands over the batch being filled first (flush): the writer may be
// waiting for it to free the budget.
func (p *packPipe) member(n int64, first bool, fill func(raw []byte) error) (*packMember, error) {
	if first {
		if !p.budget.tryAcquire(n) {
			// the writer may be waiting for what is not handed over yet
			if err := p.flush(); err != nil {
				return nil, err
			}
			if err := p.budget.acquire(p.ctx, n); err != nil {
				return nil, err
			}
		}
	} else {
		p.budget.take(n)
	}
	if err := context.Cause(p.ctx); err != nil {
		p.budget.release(n)
		return nil, err
	}
	if p.cur == nil {
		p.cur = &packBatch{done: make(chan struct{})}
	}
	b := p.cur
	if b.arena == nil && n <= packBatchBytes {
		b.arena = make([]byte, 0, packBatchBytes)
	}
	m := &packMember{n: n, batch: b}
	k := len(b.arena)
	inArena := int64(cap(b.arena)-k) >= n
	if inArena {
		b.arena = b.arena[:k+int(n)]
		m.raw = b.arena[k : k+int(n) : k+int(n)]
	} else {
		m.raw = make([]byte, n)
	}
	if err := fill(m.raw); err != nil {
		if inArena {
			b.arena = b.arena[:k]
		}
		p.budget.release(n)
		return nil, err
	}
	b.members = append(b.members, m)
	p.curBytes += n
	return m, nil
}

// queue hands the writer an entry whose members are all queued (with the batch they are
// in, once it is full).
func (p *packPipe) queue(it *packItem) {
	p.items = append(p.items, it)
	if p.cur == nil || len(p.cur.members) >= packBatchMembers || p.curBytes >= packBatchBytes {
		p.flush() //nolint:errcheck // a done context is seen by the producer's next member or finish
	}
}

// flush hands the batch being filled to the workers and the entries queued since the last
// flush to the writer. When the pack's context is done it drops them instead (releasing
// their budget) and returns its cause: the writer never waits for a batch not handed over.
func (p *packPipe) flush() error {
	if b := p.cur; b != nil {
		p.cur, p.curBytes = nil, 0
		select {
		case p.jobs <- b:
		case <-p.ctx.Done():
			for _, m := range b.members {
				p.budget.release(m.n)
			}
			p.items = nil
			return context.Cause(p.ctx)
		}
	}
	if len(p.items) > 0 {
		p.order <- p.items
		p.items = nil
	}
	return nil
}

// finish ends the pack: with prodErr (the producer's error) nil, once everything queued is
// written, the parts are flushed, synced and named (packWriter.finish); otherwise the
// writer stops at its next entry and prodErr is returned. The writer's own error, when it
// failed first, is returned too. What was written in dir is the caller's to remove after an
// error.
func (p *packPipe) finish(prodErr error) error {
	if prodErr != nil {
		p.cancel(prodErr) // the writer stops at its next entry
	}
	if err := p.flush(); err != nil && prodErr == nil {
		prodErr = err
	}
	close(p.jobs)
	close(p.order)
	wErr := <-p.writeErr
	p.wg.Wait()
	p.stopWake()
	defer p.pw.closeParts()
	p.cancel(nil)
	if prodErr != nil { // the writer's own error, when it failed first (the producer saw it as ctx's cause)
		return prodErr
	}
	if wErr != nil {
		return wErr
	}
	return p.pw.finish()
}

// packInFlight bounds the bytes of records packStream holds between reading and writing.
const packInFlight = 32 << 20

// packWorkers is the number of goroutines compressing members: one per CPU, at most 4.
func packWorkers() int { return min(max(1, runtime.GOMAXPROCS(0)), 4) }

// packMember is one gzip member of packStream: the archive bytes it holds (raw, n bytes),
// its compressed bytes (z, or err), closed done once compressed, then its place.
type packMember struct {
	raw, z []byte
	n      int64
	err    error
	batch  *packBatch // done once compressed
	part   int
	zoff   int64
	zlen   int
}

// packItem is one entry of packStream (e nil: the archive's bytes after its last record)
// with the members its line waits for, in archive order: any gap before a record, then the
// record's own member.
type packItem struct {
	e         *Entry
	members   []*packMember
	resp, req *packMember
}

// packWriter writes members to the parts of a format 3 recording in dir, buffered, a new
// part when the next member would pass partSize (a member never spans two parts).
type packWriter struct {
	dir      string
	partSize int64
	parts    []*os.File
	bw       *bufio.Writer
	partOff  int64
}

func newPackWriter(dir string, partSize int64) *packWriter {
	return &packWriter{dir: dir, partSize: partSize}
}

// write appends member z and returns its part and offset in that part.
func (p *packWriter) write(z []byte) (part int, zoff int64, err error) {
	zn := int64(len(z))
	if len(p.parts) == 0 || (p.partOff > 0 && p.partOff+zn > p.partSize) {
		if len(p.parts) == maxParts {
			return 0, 0, fmt.Errorf("archive needs more than %d parts of %d bytes", maxParts, p.partSize)
		}
		if err := p.newPart(); err != nil {
			return 0, 0, err
		}
	}
	if _, err := p.bw.Write(z); err != nil {
		return 0, 0, err
	}
	zoff = p.partOff
	p.partOff += zn
	return len(p.parts) - 1, zoff, nil
}

// newPart flushes the current part and opens the next.
func (p *packWriter) newPart() error {
	if p.bw != nil {
		if err := p.bw.Flush(); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(filepath.Join(p.dir, RecordingDataPart(len(p.parts))), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	p.parts = append(p.parts, f)
	if p.bw == nil {
		p.bw = bufio.NewWriterSize(f, 256<<10)
	} else {
		p.bw.Reset(f)
	}
	p.partOff = 0
	return nil
}

// finish flushes and syncs the parts (an empty archive: one empty file) and names a single
// part data.warc.gz.
func (p *packWriter) finish() error {
	if len(p.parts) == 0 {
		if err := p.newPart(); err != nil {
			return err
		}
	}
	if err := p.bw.Flush(); err != nil {
		return err
	}
	for _, f := range p.parts {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if len(p.parts) == 1 {
		return os.Rename(filepath.Join(p.dir, RecordingDataPart(0)), filepath.Join(p.dir, RecordingDataFile))
	}
	return nil
}

// closeParts closes the part files (after finish, or on error).
func (p *packWriter) closeParts() {
	for _, f := range p.parts {
		f.Close()
	}
}

// byteBudget is a counting semaphore of bytes: acquire waits until n more bytes fit under
// the limit (a request larger than the limit waits for all of it to be free).
type byteBudget struct {
	mu    sync.Mutex
	cond  *sync.Cond
	limit int64
	used  int64
}

func newByteBudget(limit int64) *byteBudget {
	b := &byteBudget{limit: limit}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	n = min(n, b.limit)
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.used > 0 && b.used+n > b.limit {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		b.cond.Wait()
	}
	b.used += n
	return nil
}

// tryAcquire is acquire when it need not wait: it reports whether it took n bytes.
func (b *byteBudget) tryAcquire(n int64) bool {
	n = min(n, b.limit)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used > 0 && b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

// take counts n bytes (at most the limit) at once, over the limit if need be.
func (b *byteBudget) take(n int64) {
	n = min(n, b.limit)
	b.mu.Lock()
	b.used += n
	b.mu.Unlock()
}

// wake wakes every acquire, to see its context done.
func (b *byteBudget) wake() {
	b.mu.Lock()
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *byteBudget) release(n int64) {
	n = min(n, b.limit)
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}

// OpenBundleSample opens the bundle directory dir as OpenBundle does, but holds only a
// sample of its entries: at most max of them (0 or less: all), evenly spaced in recording
// order (the first is the first entry), plus the original of every revisit among them, in
// recording order; total is the number of entries of the whole bundle. Pages are not read
// (Pages is nil). entries.jsonl is read two or three times, one line at a time, with
// OpenBundle's checks, so the memory it takes does not grow with the bundle's entries
// beyond a 16-byte key an entry while it checks ids. For commands that learn from a bundle
// rather than serve it (rule inference).
func OpenBundleSample(dir string, max int) (b *Bundle, total int, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("open bundle %s: %w", dir, err)
	}
	defer root.Close()
	m, err := ReadBundleManifest(dir)
	if err != nil {
		return nil, 0, err
	}
	wf, err := openBundleFile(root, dir, WARCFile)
	if err != nil {
		return nil, 0, err
	}
	fi, err := wf.Stat()
	if err != nil {
		wf.Close()
		return nil, 0, fmt.Errorf("stat %s: %w", filepath.Join(dir, WARCFile), err)
	}
	b = &Bundle{Dir: dir, Manifest: m, warc: wf, closer: wf, warcSize: fi.Size(), byID: map[string]int{}}
	each := func(fn func(i int, e *Entry) error) error {
		ef, err := openBundleFile(root, dir, EntriesFile)
		if err != nil {
			return err
		}
		defer ef.Close()
		i := 0
		return eachEntry(ef, filepath.Join(dir, EntriesFile), b.warcSize, func(_ int, e *Entry) error {
			err := fn(i, e)
			i++
			return err
		})
	}
	if err := each(func(int, *Entry) error { total++; return nil }); err != nil {
		wf.Close()
		return nil, 0, err
	}
	want := map[int]bool{}
	for _, k := range spreadIndexes(total, max) {
		want[k] = true
	}
	origs := map[string]bool{}
	if err := each(func(i int, e *Entry) error {
		if want[i] {
			if e.RevisitOf != "" {
				origs[e.RevisitOf] = true
			}
			b.byID[e.ID] = len(b.Entries)
			b.Entries = append(b.Entries, *e)
		}
		return nil
	}); err != nil {
		wf.Close()
		return nil, 0, err
	}
	for id := range origs {
		if _, ok := b.byID[id]; ok {
			delete(origs, id)
		}
	}
	if len(origs) > 0 {
		var all []Entry
		if err := each(func(i int, e *Entry) error {
			if want[i] || origs[e.ID] {
				all = append(all, *e)
			}
			return nil
		}); err != nil {
			wf.Close()
			return nil, 0, err
		}
		b.Entries, b.byID = all, map[string]int{}
		for i := range all {
			b.byID[all[i].ID] = i
		}
	}
	return b, total, nil
}

// spreadIndexes returns max indexes of 0..n-1, evenly spaced and ascending (the first is
// 0), or all n of them when max <= 0 or max >= n.
func spreadIndexes(n, max int) []int {
	if max <= 0 || max >= n {
		max = n
	}
	out := make([]int, max)
	for i := range out {
		out[i] = int(int64(i) * int64(n) / int64(max))
	}
	return out
}

// EachBundleEntry calls fn with each line of the indexes/entries.jsonl of the bundle
// directory dir, in order, read and checked as OpenBundle reads it (ids unique, spans inside
// data.warc) but one line at a time; i counts from 0. The Entry is reused between calls:
// fn copies what it keeps. An error of fn stops it and is returned. Errors name the file
// and line.
func EachBundleEntry(dir string, fn func(i int, e *Entry) error) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open bundle %s: %w", dir, err)
	}
	defer root.Close()
	wf, err := openBundleFile(root, dir, WARCFile)
	if err != nil {
		return err
	}
	fi, err := wf.Stat()
	wf.Close()
	if err != nil {
		return fmt.Errorf("stat %s: %w", filepath.Join(dir, WARCFile), err)
	}
	ef, err := openBundleFile(root, dir, EntriesFile)
	if err != nil {
		return err
	}
	defer ef.Close()
	i := 0
	return eachEntry(ef, filepath.Join(dir, EntriesFile), fi.Size(), func(_ int, e *Entry) error {
		err := fn(i, e)
		i++
		return err
	})
}

// OpenBundleSubset opens the bundle directory dir as OpenBundle does, but holds only the
// entries keepEntry keeps (called with each entry's index and line, in recording order),
// plus the original of every revisit among them, in recording order, and only the pages
// keepPage keeps (nil: none). entries.jsonl is read two or three times, one line at a time,
// with OpenBundle's checks, so its memory is what is kept plus a 16-byte key an entry while
// ids are checked. For a replay of a sample of a large recording (the import's
// self-check).
func OpenBundleSubset(dir string, keepEntry func(i int, e *Entry) bool, keepPage func(p *Page) bool) (*Bundle, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open bundle %s: %w", dir, err)
	}
	defer root.Close()
	m, err := ReadBundleManifest(dir)
	if err != nil {
		return nil, err
	}
	var pages []Page
	if keepPage != nil {
		if err := EachBundlePage(dir, func(p *Page) error {
			if keepPage(p) {
				pages = append(pages, *p)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	wf, err := openBundleFile(root, dir, WARCFile)
	if err != nil {
		return nil, err
	}
	fi, err := wf.Stat()
	if err != nil {
		wf.Close()
		return nil, fmt.Errorf("stat %s: %w", filepath.Join(dir, WARCFile), err)
	}
	b := &Bundle{Dir: dir, Manifest: m, Pages: pages, warc: wf, closer: wf, warcSize: fi.Size(), byID: map[string]int{}}
	kept := map[int]bool{}
	origs := map[string]bool{}
	if err := EachBundleEntry(dir, func(i int, e *Entry) error {
		if keepEntry(i, e) {
			kept[i] = true
			if e.RevisitOf != "" {
				origs[e.RevisitOf] = true
			}
			b.byID[e.ID] = len(b.Entries)
			b.Entries = append(b.Entries, *e)
		}
		return nil
	}); err != nil {
		wf.Close()
		return nil, err
	}
	for id := range origs {
		if _, ok := b.byID[id]; ok {
			delete(origs, id)
		}
	}
	if len(origs) > 0 {
		var all []Entry
		if err := EachBundleEntry(dir, func(i int, e *Entry) error {
			if kept[i] || origs[e.ID] {
				all = append(all, *e)
			}
			return nil
		}); err != nil {
			wf.Close()
			return nil, err
		}
		b.Entries, b.byID = all, map[string]int{}
		for i := range all {
			b.byID[all[i].ID] = i
		}
	}
	return b, nil
}
