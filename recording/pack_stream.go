package recording

// pack_stream.go: packing a bundle directory into format 3 one entry at a time, so that
// the memory of pab import's pack does not grow with the entries (docs/import.md "Limits
// and memory").

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/gzip"
	"github.com/pab-dev/pab/internal/atomicfile"
)

// errNotInArchiveOrder says that a bundle's entries do not name its records in archive
// order: packStream cannot pack it, and the caller packs it with the entries in memory
// (packMembers), which sorts them.
var errNotInArchiveOrder = errors.New("entries not in archive order")

// packStream writes the format 3 archive and entries.jsonl.gz of the bundle directory
// bundleDir into dir, as packMembers and writeEntriesGz do (the same bytes), reading
// entries.jsonl one line at a time with OpenBundle's checks (eachEntry) and pages.jsonl
// checked the same way, and holding only the current entry and member. It needs the
// records in the order the entries name them, each entry's response then its request,
// which every bundle pab writes has; otherwise it returns errNotInArchiveOrder (what it
// wrote in dir is then to be removed by the caller).
func packStream(bundleDir, dir string, partSize int64) error {
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

	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	var (
		parts   []*os.File
		partOff int64
		at      int64 // the archive is packed up to here
	)
	defer func() {
		for _, f := range parts {
			f.Close()
		}
	}()
	// member packs [off, off+n) of the archive as one member and returns where it went
	member := func(off, n int64) (part int, zoff, zn int64, err error) {
		buf.Reset()
		zw.Reset(&buf)
		if _, err := io.Copy(zw, io.NewSectionReader(wf, off, n)); err != nil {
			return 0, 0, 0, fmt.Errorf("read %s at offset %d: %w", WARCFile, off, err)
		}
		if err := zw.Close(); err != nil {
			return 0, 0, 0, err
		}
		zn = int64(buf.Len())
		if len(parts) == 0 || (partOff > 0 && partOff+zn > partSize) {
			if len(parts) == maxParts {
				return 0, 0, 0, fmt.Errorf("archive needs more than %d parts of %d bytes", maxParts, partSize)
			}
			f, err := os.OpenFile(filepath.Join(dir, RecordingDataPart(len(parts))), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return 0, 0, 0, err
			}
			parts = append(parts, f)
			partOff = 0
		}
		if _, err := parts[len(parts)-1].Write(buf.Bytes()); err != nil {
			return 0, 0, 0, err
		}
		zoff = partOff
		partOff += zn
		return len(parts) - 1, zoff, zn, nil
	}
	// record packs the record at [off, off+n), after a member for the bytes before it
	record := func(off, n int64) (int, int64, int64, error) {
		if off < at {
			return 0, 0, 0, errNotInArchiveOrder
		}
		if off > at {
			if _, _, _, err := member(at, off-at); err != nil {
				return 0, 0, 0, err
			}
		}
		at = off + n
		return member(off, n)
	}
	err = atomicfile.WriteNew(filepath.Join(dir, RecordingEntriesFile), 0o644, func(w io.Writer) error {
		ezw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return err
		}
		bw := bufio.NewWriterSize(ezw, 64<<10)
		err = eachEntry(ef, filepath.Join(bundleDir, EntriesFile), warcSize, func(_ int, e *Entry) error {
			if e.ReqLength > 0 && e.ReqOffset < e.RespOffset {
				return errNotInArchiveOrder
			}
			var err error
			if e.RespPart, e.RespGzOffset, e.RespGzLength, err = record(e.RespOffset, e.RespLength); err != nil {
				return err
			}
			if e.ReqLength > 0 {
				if e.ReqPart, e.ReqGzOffset, e.ReqGzLength, err = record(e.ReqOffset, e.ReqLength); err != nil {
					return err
				}
			}
			return writeJSONLine(bw, e)
		})
		if err != nil {
			return err
		}
		if at < warcSize {
			if _, _, _, err := member(at, warcSize-at); err != nil {
				return err
			}
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		return ezw.Close()
	})
	if err != nil {
		return err
	}
	if len(parts) == 0 { // an empty archive: one empty file
		f, err := os.OpenFile(filepath.Join(dir, RecordingDataPart(0)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		parts = append(parts, f)
	}
	for _, f := range parts {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if len(parts) == 1 {
		return os.Rename(filepath.Join(dir, RecordingDataPart(0)), filepath.Join(dir, RecordingDataFile))
	}
	return nil
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
